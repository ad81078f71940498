"""Residual add with indexed gate, then RMSNorm + indexed modulation, in one pass (H3 block steps 3-4).

Returns ``r = res + gate[idx] * branch`` and ``h = modulate(r)`` (H3_SPEC.md section 5,
``indexed_gate_rms_norm_scale_shift``). Reference in the model's eager bf16 order: ``gate[idx] * branch`` rounds to
bf16, the add rounds to bf16, then ``modulate`` as in rsi.refs.modulate. Class ``tolerance`` for both outputs.
Bytes: read res, branch; write r, h (8*R*H) + w, table rows, idx.

Oracle: r and h both in fp64 from the inputs with no intermediate rounding (h = modulate of the exact r). Judging
h against modulate of the *reference's* r instead would reject a fused kernel that rounds r once (fp32 FMA)
rather than twice: where res and gate*branch cancel, the two bf16 r's differ by many ulps of r and the norm
carries that into h (measured: 11-32 ulps of h's term scale at rows=64, H=5376). The locked H200 kernel (and
the template compiled for the H200) is such a kernel: its r is the once-rounded sum, not the eager bits, at ~8%
of the elements, although the template spells out the eager order. Against the exact r both
the eager-order kernel (the template) and a single-rounding kernel stay within ~2 ulps of h's term scale beyond
2x the reference's own error.
Term scales: r = res + gate*branch: ``max(|res|, |gate[idx] * branch|)``; h: as modulate, ``max(|n (1 + scale)|,
|shift|)`` with n from the fp64 chain (the exact r).
Layouts (same values): 0 production (contiguous res/branch; gate/shift/scale views of the row-major [T, 6H]
table); 1 padded row strides at storage offsets (res: H + 24, branch: H + 40, table: 6H + 24), w and idx at
offsets; 2 the table stored transposed, res and branch with odd row strides at odd offsets (unaligned), w at an
odd offset, idx with element stride 2.
"""

from __future__ import annotations

import torch

from rsi.contract import OpGroup, Shape
from rsi.refs import modulate as M
from rsi.refs.common import BF16, FINITE_SPECIALS, nonfinite_case, randn, table_chunks

OP = "gate_residual_modulate"
SCHEMA = ("(Tensor res, Tensor gate, Tensor branch, Tensor w, Tensor shift, Tensor scale, Tensor idx) "
          "-> (Tensor, Tensor)")


# Specials reach every float input. In the nonfinite case w and scale get NaN but no +-Inf: they multiply values
# derived from the computed r, and r = res + gate*branch cancels to exactly 0 in the eager double rounding but to a
# tiny value in a single-rounding kernel (the locked H200 kernel: 0.4140625 + bf16(0.4453125 * -0.9296875) = 0
# there, 6.1e-5 fused), so 0 * Inf = NaN against tiny * Inf = -Inf would judge the rounding of r, not the kernel.
# res, gate, branch and shift get NaN, +Inf and -Inf.
SPECIALS = FINITE_SPECIALS + (nonfinite_case(nan_only=(3, 5)),)


def reference(res, gate, branch, w, shift, scale, idx):
    r = res + gate[idx] * branch
    return r, M.reference(r, w, shift, scale, idx)


def _r64(res, gate, branch, idx) -> tuple[torch.Tensor, torch.Tensor]:
    """(res, gate[idx] * branch) in fp64."""
    return res.double(), gate.double()[idx] * branch.double()


def oracle(res, gate, branch, w, shift, scale, idx):
    a, b = _r64(res, gate, branch, idx)
    r = a + b
    return r, M.oracle(r, w, shift, scale, idx)


def term_scale(res, gate, branch, w, shift, scale, idx):
    a, b = _r64(res, gate, branch, idx)
    t_r = torch.maximum(a.abs(), b.abs())
    r = a + b
    return t_r, M.affine_term(M.norm64(r, w), shift, scale, idx)


def make_inputs(shape: Shape, seed: int, device, layout: int = 0):
    R, H, T = shape.dims["rows"], shape.dims["hidden"], shape.dims["table"]
    res = randn((R, H), seed, device, BF16, scale=4.0)
    branch = randn((R, H), seed + 2, device, BF16, scale=1.0)
    w = (randn((H,), seed + 1, device, BF16, scale=0.2) + 1.0).to(BF16)
    c = table_chunks(M.make_table(T, H, seed, device), layout)
    idx = M.make_idx(R, T, seed, device)
    # block step 3-4: gate_msa gates the attention branch, then norm2 with shift_mlp / scale_mlp
    return (M.place_rows(res, layout), c[2], M.place_rows(branch, layout, pad=(40, 5)), M.place_vector(w, layout),
            c[3], c[4], M.place_idx(idx, layout))


def dims_of(args: tuple) -> dict[str, int]:
    """res: [R, H], gate: [T, H] -> rows, hidden, table."""
    return {"rows": args[0].shape[0], "hidden": args[0].shape[1], "table": args[1].shape[0]}


def fake(res, gate, branch, w, shift, scale, idx):
    return res.new_empty(res.shape), res.new_empty(res.shape)


def bytes_moved(shape: Shape) -> int:
    R, H, T = shape.dims["rows"], shape.dims["hidden"], shape.dims["table"]
    return 8 * R * H + 2 * H + 3 * 2 * T * H + 8 * R


def flops(shape: Shape) -> int:
    """Per element: gate * branch, + res (2), then modulate's 7 per element + 3 per row (rsi.refs.modulate)."""
    R, H = shape.dims["rows"], shape.dims["hidden"]
    return R * (9 * H + 3)


OP_GROUP = OpGroup(
    name=OP,
    reference=reference,
    oracle=oracle,
    make_inputs=make_inputs,
    tolerance=M.TOL,
    shapes=M.h3_shapes(),
    odd_shapes=(Shape("one_row", {"rows": 1, "hidden": M.HIDDEN, "table": 6}),
                Shape("odd", {"rows": 333, "hidden": 1000, "table": 9})),
    interp_shapes=(Shape("tiny", {"rows": 3, "hidden": 64, "table": 6}),
                   Shape("odd", {"rows": 7, "hidden": 200, "table": 9})),
    special_cases=SPECIALS,
    bytes_moved=bytes_moved,
    flops=flops,
    noncontiguous_inputs=("gate", "shift", "scale"),
    special_inputs=(),
    input_names=("res", "gate", "branch", "w", "shift", "scale", "idx"),
    template="gate_residual_modulate",
    notes="returns (r, h); gate/shift/scale are strided views of the [T, 6H] AdaLN table; h's oracle is modulate of "
          "the exact r; specials reach every float input (in place, layout kept), the nonfinite case puts NaN but no "
          "+-Inf into w and scale (see SPECIALS); largest tensor 2.1e8 elements: no huge shape",
    term_scale=term_scale,
    n_layouts=M.N_LAYOUTS,
    sample_shapes=M.sample_shapes,
    huge_shapes=(),
    dims_of=dims_of,
    fake=fake,
    schema=SCHEMA,
)
