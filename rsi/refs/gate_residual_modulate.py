"""Residual add with indexed gate, then RMSNorm + indexed modulation, in one pass (H3 block steps 3-4).

Returns ``r = res + gate[idx] * branch`` and ``h = modulate(r)`` (H3_SPEC.md section 5,
``indexed_gate_rms_norm_scale_shift``). Reference in the model's eager bf16 order: ``gate[idx] * branch`` rounds to
bf16, the add rounds to bf16, then ``modulate`` as in rsi.refs.modulate. Class ``tolerance`` for both outputs.
Bytes: read res, branch; write r, h (8*R*H) + w, table rows, idx.
"""

from __future__ import annotations

from rsi.contract import OpGroup, Shape
from rsi.refs import modulate as M
from rsi.refs.common import ALL_SPECIALS, BF16, randn

OP = "gate_residual_modulate"


def reference(res, gate, branch, w, shift, scale, idx):
    r = res + gate[idx] * branch
    return r, M.reference(r, w, shift, scale, idx)


def oracle(res, gate, branch, w, shift, scale, idx):
    # the oracle of h is taken on the *reference's* r (the residual stream is bf16 by definition), so that the
    # error of h measures the fused norm/modulation, not the already-checked rounding of r
    r = res.double() + gate.double()[idx] * branch.double()
    r_bf16 = (res + gate[idx] * branch)
    return r, M.oracle(r_bf16, w, shift, scale, idx)


def make_inputs(shape: Shape, seed: int, device):
    R, H, T = shape.dims["rows"], shape.dims["hidden"], shape.dims["table"]
    res = randn((R, H), seed, device, BF16, scale=4.0)
    branch = randn((R, H), seed + 2, device, BF16, scale=1.0)
    w = (randn((H,), seed + 1, device, BF16, scale=0.2) + 1.0).to(BF16)
    table = M.make_table(T, H, seed, device)
    c = table.view(T, 6, H).unbind(1)
    # block step 3-4: gate_msa gates the attention branch, then norm2 with shift_mlp / scale_mlp
    return res, c[2], branch, w, c[3], c[4], M.make_idx(R, T, seed, device)


def bytes_moved(shape: Shape) -> int:
    R, H, T = shape.dims["rows"], shape.dims["hidden"], shape.dims["table"]
    return 8 * R * H + 2 * H + 3 * 2 * T * H + 8 * R


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
    special_cases=ALL_SPECIALS,
    bytes_moved=bytes_moved,
    noncontiguous_inputs=("gate", "shift", "scale"),
    special_inputs=(0, 2),
    input_names=("res", "gate", "branch", "w", "shift", "scale", "idx"),
    template="gate_residual_modulate",
    notes="returns (r, h); gate/shift/scale are strided views of the [T, 6H] AdaLN table",
)
