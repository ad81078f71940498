"""``modulate`` fused with the e4m3 quantisation of its output (bitwise class): the activation that feeds the fp8
qkv and fc1 GEMMs (rsi/refs/fp8_linear.py), quantised where it is produced.

``reference(x, w, shift, scale, idx) -> (h8, h_scale)``: modulate's inputs (rsi/refs/modulate.py: x [R, H] bf16,
w [H], shift/scale [T, H] views of the AdaLN table, idx [R] int64; same layouts, shapes, special cases), outputs
h8 float8_e4m3fn [R, H] contiguous and h_scale fp32 [R]: ``quantize_rows(h)`` (rsi/refs/fp8_common.py: per row
scale = amax / 448, RNE saturating e4m3, a non-finite row NaN throughout, a zero row scale 1) of the bf16 modulate
output h, computed as ``modulate_canonical`` below.

Why a canonical modulate and not modulate's own reference. The class is ``bitwise`` on the quantised bytes and the
scales, so the kernel must reproduce the bf16 intermediate h bit for bit: a single flipped bf16 ulp of h moves an
e4m3 rounding (1 in ~16 such flips) or, at the row's largest element, the scale of the whole row. modulate itself is
``tolerance`` class because its rstd cannot be reproduced: the fp32 sum of squares depends on the reduction order
(torch's CUDA and CPU reductions and every Triton config add in different orders) and ``tl.rsqrt`` /
``torch.rsqrt`` are approximate on the GPU. So the contract fixes them:

* ``ss`` = the sum of ``x_f32^2`` over the row as a pairwise tree over the row zero-padded to P =
  next_power_of_2(H), folding halves: each level maps a width-n vector v to ``v[i] + v[i + n/2]`` (fp32, IEEE;
  i < n/2) until one value is left. A sum of two values does not depend on their order, so a kernel realizes each
  level as a sum over an axis of size 2 (``tl.sum(tl.reshape(v, [ROWS, 2, n/2]), 1)``: compact on the GPU, where
  the outer levels stay inside a thread and the inner ones are warp shuffles), and a row held as a piece of P/2
  columns plus a power-of-two tail forms the first level as the main piece plus the zero-padded tail. The squares
  of bf16 values are exact in fp32 (16-bit products), so an fma contraction of a square into an add cannot change
  a bit, and adding the +0 padding is exact.
* ``rstd = 1 / sqrt(ss / H + 1e-5)``: IEEE division, correctly rounded square root, IEEE division, in fp32 (in
  Triton ``tl.div_rn`` and ``tl.sqrt_rn``; in torch tensor-by-tensor divisions, fp8_common's docstring says why).
* then modulate's own roundings, as its eager reference has them: ``n = bf16(x_f32 * rstd * w_f32)`` (left to
  right), ``h = bf16(bf16(n * bf16(1 + scale[idx])) + shift[idx])``.

``modulate_canonical`` is within modulate's tolerance class of modulate's reference (it differs only in rstd's last
bits; tests/interp/test_fp8_producers.py checks it at every layout and special case), so the runtime may take h8
where it took modulate's output. Every operation above is an IEEE basic operation in a fixed order: the reference
gives the same bits in torch on the CPU and on CUDA, and a kernel under the Triton interpreter and on sm_90 (the
template compiles to ``div.rn.f32``, ``sqrt.rn.f32``, ``cvt.rn.satfinite.e4m3x2.f32``; tests/unit/test_fp8_compile.py).

Bytes: read x (2RH), write h8 (RH) and h_scale (4R), plus w, the table rows and idx. FLOPs: modulate's 7H + 3 per
row plus the quantisation's H comparisons and H divisions and the scale: R (9H + 4).
"""

from __future__ import annotations

import torch

from rsi.contract import Bitwise, OpGroup
from rsi.refs import modulate as M
from rsi.refs.common import BF16
from rsi.refs.fp8_common import E4M3, quantize_rows

OP = "modulate_fp8"
SCHEMA = "(Tensor x, Tensor w, Tensor shift, Tensor scale, Tensor idx) -> (Tensor, Tensor)"


def tree_sum(v: torch.Tensor) -> torch.Tensor:
    """Pairwise tree sum over the last dim of v [R, C] (fp32), zero-padded to a power of two, folding halves
    (module docstring)."""
    R, C = v.shape
    P = 1 << max(C - 1, 0).bit_length()
    if P > C:
        v = torch.cat([v, v.new_zeros((R, P - C))], dim=1)
    while v.shape[1] > 1:
        n = v.shape[1] // 2
        v = v[:, :n] + v[:, n:]
    return v[:, 0] if C else v.new_zeros((R,))


def modulate_canonical(x, w, shift, scale, idx) -> torch.Tensor:
    """modulate with the canonical statistics (module docstring): [R, H] bf16."""
    xf = x.float()
    H = x.shape[1]
    ss = tree_sum(xf * xf)
    mean = torch.div(ss, torch.full_like(ss, float(H)))
    rstd = torch.div(torch.ones_like(mean), torch.sqrt(mean + M.EPS))
    n = (xf * rstd[:, None] * w.float()).to(BF16)
    return n * (1 + scale[idx]) + shift[idx]


def reference(x, w, shift, scale, idx):
    """-> (h8 float8_e4m3fn [R, H], h_scale fp32 [R]): the per-row e4m3 quantisation of modulate_canonical."""
    return quantize_rows(modulate_canonical(x, w, shift, scale, idx))


def fake(x, w, shift, scale, idx):
    return x.new_empty(x.shape, dtype=E4M3), x.new_empty((x.shape[0],), dtype=torch.float32)


def bytes_moved(shape) -> int:
    R, H, T = shape.dims["rows"], shape.dims["hidden"], shape.dims["table"]
    return 3 * R * H + 4 * R + 2 * H + 2 * 2 * T * H + 8 * R


def flops(shape) -> int:
    R, H = shape.dims["rows"], shape.dims["hidden"]
    return R * (9 * H + 4)


_B = M.OP_GROUP
OP_GROUP = OpGroup(
    name=OP,
    reference=reference,
    oracle=reference,
    make_inputs=_B.make_inputs,
    tolerance=Bitwise(),
    shapes=_B.shapes,
    odd_shapes=_B.odd_shapes,
    interp_shapes=_B.interp_shapes,
    special_cases=_B.special_cases,
    bytes_moved=bytes_moved,
    flops=flops,
    noncontiguous_inputs=_B.noncontiguous_inputs,
    special_inputs=(),
    input_names=_B.input_names,
    template="modulate_fp8",
    notes="modulate (canonical statistics: pairwise-tree sum of squares, IEEE sqrt and divisions) then the per-row "
          "e4m3 quantiser of fp8_common; bitwise on (h8, h_scale); modulate's inputs, layouts and special cases",
    n_layouts=_B.n_layouts,
    sample_shapes=_B.sample_shapes,
    huge_shapes=(),
    dims_of=_B.dims_of,
    fake=fake,
    schema=SCHEMA,
)
