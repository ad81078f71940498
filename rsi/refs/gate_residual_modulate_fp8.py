"""``gate_residual_modulate`` fused with the e4m3 quantisation of its modulated output (bitwise class): the producer
of the activation that feeds fc1 in every block and qkv_proj in every block after the first (rsi/refs/fp8_linear.py).

``reference(res, gate, branch, w, shift, scale, idx) -> (r, h8, h_scale)``: gate_residual_modulate's inputs
(rsi/refs/gate_residual_modulate.py: same layouts and shapes; special cases with +-Inf in every float input), outputs

* r [R, H] bf16: the new residual ``res + gate[idx] * branch`` in the model's eager roundings (the product rounds to
  bf16, then the sum) - exactly gate_residual_modulate's reference r;
* h8 float8_e4m3fn [R, H] and h_scale fp32 [R]: ``quantize_rows(modulate_canonical(r, w, shift, scale, idx))``
  (rsi/refs/modulate_fp8.py: the pairwise-tree sum of squares, IEEE square root and divisions, then modulate's eager
  roundings; rsi/refs/fp8_common.py: per-row scale amax / 448, RNE saturating e4m3).

Every operation is an IEEE basic operation in a fixed order, so all three outputs are bit for bit the same in torch
on the CPU and on CUDA and in a kernel that launches without fma contraction. r being the eager r (not a once-rounded
fp32 fma, as the locked bf16 gate_residual_modulate kernel computes it) is what lets the class be bitwise: both are
within gate_residual_modulate's tolerance class, and h is modulate_canonical of r, which modulate_fp8 shows is within
modulate's.

Bytes: read res and branch (4RH), write r (2RH), h8 (RH) and h_scale (4R), plus w, the table rows and idx. FLOPs:
gate_residual_modulate's R (9H + 3) plus the quantiser's H comparisons and divisions and the scale: R (11H + 4).
"""

from __future__ import annotations

import torch

from rsi.contract import Bitwise, OpGroup
from rsi.refs import gate_residual_modulate as G
from rsi.refs.common import ALL_SPECIALS
from rsi.refs.fp8_common import E4M3, quantize_rows
from rsi.refs.modulate_fp8 import modulate_canonical

OP = "gate_residual_modulate_fp8"
SCHEMA = ("(Tensor res, Tensor gate, Tensor branch, Tensor w, Tensor shift, Tensor scale, Tensor idx) "
          "-> (Tensor, Tensor, Tensor)")


def reference(res, gate, branch, w, shift, scale, idx):
    """-> (r bf16 [R, H], h8 float8_e4m3fn [R, H], h_scale fp32 [R])."""
    r = res + gate[idx] * branch
    return (r, *quantize_rows(modulate_canonical(r, w, shift, scale, idx)))


def fake(res, gate, branch, w, shift, scale, idx):
    R, H = res.shape
    return res.new_empty((R, H)), res.new_empty((R, H), dtype=E4M3), res.new_empty((R,), dtype=torch.float32)


def bytes_moved(shape) -> int:
    R, H, T = shape.dims["rows"], shape.dims["hidden"], shape.dims["table"]
    return 7 * R * H + 4 * R + 2 * H + 3 * 2 * T * H + 8 * R


def flops(shape) -> int:
    R, H = shape.dims["rows"], shape.dims["hidden"]
    return R * (11 * H + 4)


_B = G.OP_GROUP
OP_GROUP = OpGroup(
    name=OP,
    reference=reference,
    oracle=reference,
    make_inputs=_B.make_inputs,
    tolerance=Bitwise(),
    shapes=_B.shapes,
    odd_shapes=_B.odd_shapes,
    interp_shapes=_B.interp_shapes,
    special_cases=ALL_SPECIALS,
    bytes_moved=bytes_moved,
    flops=flops,
    noncontiguous_inputs=_B.noncontiguous_inputs,
    special_inputs=(),
    input_names=_B.input_names,
    template="gate_residual_modulate_fp8",
    notes="gate_residual_modulate's eager r, then modulate with the canonical statistics and the per-row e4m3 "
          "quantiser of fp8_common; bitwise on (r, h8, h_scale); gate_residual_modulate's inputs and layouts; every "
          "special case reaches every float input, +-Inf in w and scale too (gate_residual_modulate keeps them out "
          "because a fused r may not cancel to 0 as the eager r does; here r is the eager r)",
    n_layouts=_B.n_layouts,
    sample_shapes=_B.sample_shapes,
    huge_shapes=(),
    dims_of=_B.dims_of,
    fake=fake,
    schema=SCHEMA,
)
