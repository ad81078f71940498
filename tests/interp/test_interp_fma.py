"""The interpreter's fp32 ``tl.fma`` rounds once, as ``fma.rn.f32`` does on the GPU (rsi/harness/interp.py's patch;
the quantisers' reciprocal quotient rests on it). Triton 3.6's own interpreter computes ``x * y + z`` in fp32 and
gives 0 here."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

pytestmark = pytest.mark.interpreter


@triton.jit
def _fma_kernel(a_ptr, b_ptr, c_ptr, o_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(o_ptr + i, tl.fma(tl.load(a_ptr + i), tl.load(b_ptr + i), tl.load(c_ptr + i)))


def test_fma_rounds_once():
    a = torch.full((4,), 1 + 2**-23)
    b = torch.full((4,), 1 - 2**-23)
    c = torch.tensor([-1.0, -1.0, 2.0**-60, 0.0])
    o = torch.empty(4)
    _fma_kernel[(1,)](a, b, c, o, N=4)
    assert o[0].item() == -(2.0**-46) and o[1].item() == -(2.0**-46)
    assert o[2].item() == torch.tensor(1 - 2**-46 + 2**-60, dtype=torch.float64).float().item()
