"""runtime.pipeline.denormals_flushed: subnormals flush inside a CPU run and the caller's mode, either one, comes
back afterwards, also when the run raises (the flag is process-wide; a pipeline run that left it set once changed
the bytes of later fp8 tests in the same worker). On CUDA devices it touches nothing."""

from __future__ import annotations

import pytest
import torch

from runtime.pipeline import denormals_flushed, flushing_denormals


@pytest.mark.parametrize("before", [False, True])
def test_mode_inside_and_restored(before):
    torch.set_flush_denormal(before)
    try:
        assert flushing_denormals() is before
        with pytest.raises(RuntimeError), denormals_flushed(torch.device("cpu")):
            assert flushing_denormals()
            assert (torch.tensor([3e-39]) * 1.0).item() == 0.0
            raise RuntimeError("run failed")
        assert flushing_denormals() is before
    finally:
        torch.set_flush_denormal(False)
    assert (torch.tensor([3e-39]) * 1.0).item() > 0.0


def test_cuda_device_leaves_mode_alone():
    with denormals_flushed(torch.device("cuda")):
        assert not flushing_denormals()
