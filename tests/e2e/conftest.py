"""End-to-end runtime tests: CPU-only, tiny configs. Intra-op threads are pinned to 1 per test (tiny tensors gain
nothing from threads and OMP barriers dominate on a loaded 2-core machine); restored afterwards."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.set_flush_denormal(True)
    with torch.no_grad():
        yield
    torch.set_num_threads(n)
    torch.set_flush_denormal(False)


@pytest.fixture
def tiny_cfg():
    from runtime.config import get_config

    return get_config("tiny")


@pytest.fixture
def tiny_model(tiny_cfg):
    from runtime.model import build_dit

    return build_dit(tiny_cfg.dit, "cpu", seed=0)


@pytest.fixture
def ref_kernels():
    from runtime.kernels import Kernels

    return Kernels("reference", target=None)
