"""The e4m3 quantiser shared by the FP8 op groups (fp8_linear and the fused producers modulate_fp8, swiglu_fp8,
head_merge_fp8), the weight quantiser and the weight-error report the runtime records.

``quantize_rows(h) -> (h8, scale)``: h [R, C] (bf16, or any float; any strides) -> h8 float8_e4m3fn [R, C]
contiguous, scale fp32 [R]. Per row r, in fp32 (bf16 -> fp32 is exact):

* ``amax_r = max_c |h[r, c]|`` (exact: a maximum does not round);
* a row holding a NaN or +-Inf: ``scale_r = NaN`` (the bits 0x7FC00000) and every byte of the row 0x7F (e4m3fn's
  NaN): the row is poison, as it would be after any GEMM;
* ``amax_r = 0`` (an all-zero row, or C = 0): ``scale_r = 1`` and ``h8 = h`` (+-0: bytes 0x00 / 0x80);
* otherwise ``scale_r = amax_r / 448`` and ``h8 = e4m3(h / scale_r)``: both quotients are IEEE fp32 divisions
  (correctly rounded; a scale below fp32's normal range is kept as a subnormal, never flushed), e4m3() rounds to
  nearest even and saturates at +-448, which is what sm_90's ``cvt.rn.satfinite.e4m3x2.f32`` does (torch's own
  cast is RNE; the clamp first makes it saturate). 448 is e4m3fn's largest finite value.

The dequantised value is ``h8 * scale_r``. The same function quantises a weight per output channel (a row of the
[N, K] weight is one output channel): ``quantize_weight = quantize_rows``.

Why the divisions are spelled ``torch.div(tensor, tensor)``: on CUDA, ATen divides a tensor by a CPU *scalar* as a
multiplication by the scalar's reciprocal (``div_true_kernel_cuda``), which is not the IEEE quotient; between two
tensors it is ``a / b``, IEEE ``div.rn.f32`` as nvcc compiles it by default. A Triton kernel must use ``tl.div_rn``:
Triton lowers fp32 ``/`` to the approximate ``div.full.f32`` (checked in the PTX, tests/unit/test_fp8_compile.py).
With those, the quantiser is bit-for-bit the same on the CPU, in torch on CUDA and in a Triton kernel.
"""

from __future__ import annotations

import functools
import math

import torch

from rsi.contract import Approximate

E4M3 = torch.float8_e4m3fn
E4M3_MAX = 448.0
E4M3_NAN = 0x7F          # e4m3fn's NaN byte (positive); e4m3fn has no infinities
NAN_F32_BITS = 0x7FC00000


def e4m3(q: torch.Tensor) -> torch.Tensor:
    """fp32 -> float8_e4m3fn: round to nearest even, saturating at +-448, NaN stays NaN."""
    return q.clamp(-E4M3_MAX, E4M3_MAX).to(E4M3)


def row_amax(h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(amax fp32 [R], bad bool [R]) of h [R, C]: the largest |h| per row and whether the row holds a NaN or Inf."""
    hf = h.float()
    if h.shape[1] == 0:
        z = torch.zeros(h.shape[0], dtype=torch.float32, device=h.device)
        return z, torch.zeros(h.shape[0], dtype=torch.bool, device=h.device)
    bad = (~torch.isfinite(hf)).any(dim=1)
    amax = torch.where(bad[:, None], torch.zeros_like(hf), hf).abs().amax(dim=1)
    return amax, bad


def row_scales(amax: torch.Tensor, bad: torch.Tensor) -> torch.Tensor:
    """The row scales of ``quantize_rows`` from the row amax (fp32 [R]) and the non-finite rows."""
    scale = torch.div(amax, torch.full_like(amax, E4M3_MAX))            # IEEE, tensor by tensor (docstring)
    scale = torch.where(amax == 0, torch.ones_like(scale), scale)
    return torch.where(bad, torch.full_like(scale, math.nan), scale)


def quantize_rows(h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """h [R, C] (any strides) -> (h8 float8_e4m3fn [R, C] contiguous, scale fp32 [R]) (module docstring)."""
    amax, bad = row_amax(h)
    scale = row_scales(amax, bad)
    q = e4m3(torch.div(h.float(), scale[:, None])).contiguous().view(torch.uint8)
    q = torch.where(bad[:, None], torch.full_like(q, E4M3_NAN), q)     # branch-free: torch.compile takes it whole
    return q.view(E4M3), scale


quantize_weight = quantize_rows


@functools.cache
def quantize_rows_compiled(dynamic: bool | None = False):
    """``quantize_rows`` under torch.compile: static shapes for the incumbents (rsi/refs/fp8_linear.py,
    rsi/refs/swiglu_fp8.py, rsi/refs/head_merge_fp8.py), ``dynamic=None`` for the runtime (runtime/precision.py: the
    linears of both stages have many row counts and widths, and static shapes would hit torch.compile's recompile
    limit). One compiled function per setting. Not bitwise on CUDA: H200 run 33 found 53,625 of 274M bytes one e4m3
    step off at head_merge_fp8's w1 shape (Inductor's generated division is not the IEEE quotient), so incumbents
    built on it are vetted in ``UNFUSED_CLASS``. On the CPU it is bitwise equal to the eager one."""
    return torch.compile(quantize_rows, dynamic=dynamic)


# The class of the unfused paths the fused producers must beat (ATen or verified bf16 op, then the compiled
# quantiser): a few bytes one e4m3 step from the reference (a different silu rounding, Inductor's division), never
# more: rel-L2 within 1% and the largest error within 15% of the largest value.
UNFUSED_CLASS = Approximate(max_rel_l2=1e-2, min_cosine=0.9999, max_abs_frac=0.15, factor=1.0, floor_rel_l2=1e-2,
                            name="unfused rounding")


def dequantize_rows(h8: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """h8 * scale per row (fp64 by default: exact, e4m3 values have 4 significant bits)."""
    return h8.to(dtype) * scale.to(dtype)[:, None]


def weight_error(w: torch.Tensor) -> dict[str, float]:
    """How far the per-output-channel e4m3 weight is from the bf16 weight it replaces, for the runtime's records:
    rel-L2, max-abs, max-abs / max|w| and cosine of ``dequantize(quantize_weight(w))`` against w (fp64, finite w)."""
    w8, ws = quantize_weight(w)
    wd = w.double()
    diff = dequantize_rows(w8, ws) - wd
    wn = float(torch.linalg.vector_norm(wd))
    dn = float(torch.linalg.vector_norm(diff))
    qd = wd + diff
    qn = float(torch.linalg.vector_norm(qd))
    peak = float(wd.abs().max()) if wd.numel() else 0.0
    max_abs = float(diff.abs().max()) if diff.numel() else 0.0
    return {"rel_l2": dn / wn if wn > 0 else 0.0, "max_abs": max_abs,
            "max_abs_frac": max_abs / peak if peak > 0 else 0.0,
            "cosine": float((qd * wd).sum()) / (qn * wn) if qn > 0 and wn > 0 else 1.0}


def spread_exponents(n: int, spread: int) -> torch.Tensor:
    """n integer exponents spread evenly over [-spread, spread] (n = 1: [0]), as fp32 (for exact 2**e factors)."""
    if n <= 1:
        return torch.zeros(max(n, 0), dtype=torch.float32)
    return torch.tensor([round(spread * (2 * i / (n - 1) - 1)) for i in range(n)], dtype=torch.float32)
