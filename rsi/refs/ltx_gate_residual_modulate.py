"""The LTX-2 block's gated residual fused with the next RMSNorm + modulation, in one pass.

diffusers 0.42.1 ``LTX2VideoTransformerBlock.forward``: ``hidden_states = hidden_states + attn_hidden_states *
gate_msa`` (and ``+ ff_output * gate_mlp`` at the end of a block), followed by the next norm and modulation
(``rsi.refs.ltx_modulate``). Returns ``(x', h)`` with ``x' = x + branch * gate`` in bf16 (the product rounds to
bf16, then the sum rounds) and ``h = ltx_modulate(x', scale, shift)``.
x, branch: [R, D] bf16; gate/scale/shift: [D] bf16 rows of one timestep's [6, D] ada table.

Class ``tolerance`` for both outputs (the norm's fp32 statistics: see rsi.refs.ltx_modulate). x' itself has no
reduction: the template computes it in the eager order and tests/interp checks it is bitwise the reference's.
Oracle: x' and h in fp64 from the inputs with no intermediate rounding (h = modulate of the exact x'), as
``gate_residual_modulate``: judging h against the modulate of the *reference's* x' would reject a kernel that
rounds x' once (fp32 FMA) where x and branch * gate cancel.
Term scales: x' = x + gate*branch: ``max(|x|, |gate * branch|)``; h: ``max(|n (1 + scale)|, |shift|)`` with n
from the fp64 chain (the exact x').
Bytes: read x, branch; write x', h (8*R*D) + gate, scale, shift (6*D).
Layouts (same values): 0 production (contiguous x, branch; gate/scale/shift rows of one contiguous [6, D] table);
1 padded row strides at storage offsets (x: D + 24, branch: D + 40), the table with a padded row stride; 2 odd row
strides at odd offsets (x: D + 3, branch: D + 5; unaligned), the table stored transposed (element stride 6).
"""

from __future__ import annotations

import torch

from rsi.contract import OpGroup, Shape
from rsi.refs import ltx_modulate as M
from rsi.refs.common import BF16, FINITE_SPECIALS, nonfinite_case, randn

OP = "ltx_gate_residual_modulate"
SCHEMA = "(Tensor x, Tensor branch, Tensor gate, Tensor scale, Tensor shift) -> (Tensor, Tensor)"

# Specials reach every float input. In the nonfinite case scale gets NaN but no +-Inf: it multiplies n, computed
# from x' = x + gate*branch, which cancels to exactly 0 in the eager double rounding but to a tiny value in a
# single-rounding kernel, so 0 * Inf = NaN against tiny * Inf = Inf would judge the rounding of x', not the
# kernel (as gate_residual_modulate). x, branch, gate and shift get NaN, +Inf and -Inf.
SPECIALS = FINITE_SPECIALS + (nonfinite_case(nan_only=(3,)),)


def reference(x, branch, gate, scale, shift):
    """x, branch: [R, D] bf16, gate/scale/shift: [D] bf16 -> (x' [R, D] bf16, h [R, D] bf16)."""
    x = x + branch * gate
    return x, M.reference(x, scale, shift)


def _parts64(x, branch, gate) -> tuple[torch.Tensor, torch.Tensor]:
    """(x, branch * gate) in fp64."""
    return x.double(), branch.double() * gate.double()


def oracle(x, branch, gate, scale, shift):
    a, b = _parts64(x, branch, gate)
    r = a + b
    return r, M.oracle(r, scale, shift)


def term_scale(x, branch, gate, scale, shift):
    a, b = _parts64(x, branch, gate)
    r = a + b
    return torch.maximum(a.abs(), b.abs()), M.affine_term(M.norm64(r), scale, shift)


def make_inputs(shape: Shape, seed: int, device, layout: int = 0):
    R, D = shape.dims["rows"], shape.dims["dim"]
    x = randn((R, D), seed, device, BF16, scale=4.0)
    branch = randn((R, D), seed + 2, device, BF16, scale=1.0)
    t = M.make_table(D, seed, device, layout)
    # the attention branch gated by gate_msa, then the MLP norm with (scale_mlp, shift_mlp)
    return M.place_rows(x, layout), M.place_rows(branch, layout, pad=(40, 5)), t[2], t[4], t[3]


def dims_of(args: tuple) -> dict[str, int]:
    """x: [R, D], gate/scale/shift: [D] -> rows, dim."""
    return M.row_dims(args[0], args[2], args[3], args[4])


def fake(x, branch, gate, scale, shift):
    return x.new_empty(x.shape), x.new_empty(x.shape)


def bytes_moved(shape: Shape) -> int:
    R, D = shape.dims["rows"], shape.dims["dim"]
    return 8 * R * D + 3 * 2 * D


def flops(shape: Shape) -> int:
    """Per element: branch * gate, + x (2), then ltx_modulate's 4 per element + 2D + 3 per row."""
    R, D = shape.dims["rows"], shape.dims["dim"]
    return R * (8 * D + 3)


OP_GROUP = OpGroup(
    name=OP,
    reference=reference,
    oracle=oracle,
    make_inputs=make_inputs,
    tolerance=M.TOL,
    shapes=M.ltx_shapes(),
    odd_shapes=M.ODD_SHAPES,
    interp_shapes=M.INTERP_SHAPES,
    special_cases=SPECIALS,
    bytes_moved=bytes_moved,
    flops=flops,
    noncontiguous_inputs=(),
    special_inputs=(),
    input_names=("x", "branch", "gate", "scale", "shift"),
    template="ltx_gate_residual_modulate",
    notes="returns (x', h); gate/scale/shift are [D] rows of one timestep's [6, D] ada table; h's oracle is the "
          "modulate of the exact x'; specials reach every float input (in place, layout kept), the nonfinite case "
          "puts NaN but no +-Inf into scale (see SPECIALS); largest tensor 6.6e7 elements: no huge shape",
    term_scale=term_scale,
    n_layouts=M.N_LAYOUTS,
    sample_shapes=M.sample_shapes,
    huge_shapes=(),
    dims_of=dims_of,
    fake=fake,
    schema=SCHEMA,
)
