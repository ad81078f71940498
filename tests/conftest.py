"""Test-wide fixtures and marker handling.

* ``gpu`` tests need CUDA and are skipped without it.
* ``interpreter`` tests run Triton kernels on the CPU and need TRITON_INTERPRET=1 in the environment *before*
  Python starts (``@triton.jit`` reads it at import); without it they are skipped with that instruction.
"""

from __future__ import annotations

import os
import random

import pytest


def pytest_collection_modifyitems(config, items):
    import torch

    has_cuda = torch.cuda.is_available()
    interp = os.environ.get("TRITON_INTERPRET") == "1"
    for item in items:
        if "gpu" in item.keywords and not has_cuda:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU"))
        if "interpreter" in item.keywords and not interp:
            item.add_marker(pytest.mark.skip(reason="set TRITON_INTERPRET=1 before starting pytest"))


@pytest.fixture(autouse=True)
def _seeds():
    import torch

    random.seed(0)
    torch.manual_seed(0)
    yield
    # the flush-subnormals flag is process-wide: a test (or the code it runs) that leaves it set changes the bytes
    # of later tests in the same worker, so the test that leaks it fails here instead
    from runtime.pipeline import flushing_denormals

    if flushing_denormals():
        torch.set_flush_denormal(False)
        pytest.fail("this test left subnormals flushed (torch.set_flush_denormal) for the tests after it")


@pytest.fixture(scope="session", autouse=True)
def _interpreter_rounding():
    if os.environ.get("TRITON_INTERPRET") == "1":
        from rsi.harness.interp import patch_interpreter_rounding

        patch_interpreter_rounding()
    yield
