"""Ulysses head merge on the return path (bitwise layout op), the inverse of the all-to-all packing.

x: ``[W, S, h, 128]`` bf16 as received (source rank major: rank w sent its h heads for my S rows)
-> ``[S, W*h*128]``: row s holds heads (w, j) in order, the layout ``out_proj`` consumes
(vllm-omni ``merge_ulysses_heads``: [W,S,1,h,D] -> [1,S,W,h,D]).
Reference: ``permute + contiguous + view``. Class ``bitwise``. Bytes: 2 * 2 * W * S * h * 128.
"""

from __future__ import annotations

from rsi.contract import Bitwise, OpGroup, Shape
from rsi.refs.common import ALL_SPECIALS, BF16, randn
from rsi.refs.qkv_pack import ulysses_shapes

OP = "head_merge"
HEAD_DIM = 128


def reference(x):
    W, S, h, D = x.shape
    return x.permute(1, 0, 2, 3).contiguous().view(S, W * h * D)


def make_inputs(shape: Shape, seed: int, device):
    W, S, NH = shape.dims["world"], shape.dims["rows"], shape.dims["heads"]
    return (randn((W, S, NH // W, HEAD_DIM), seed, device, BF16),)


def bytes_moved(shape: Shape) -> int:
    return 2 * 2 * shape.dims["rows"] * shape.dims["heads"] * HEAD_DIM


OP_GROUP = OpGroup(
    name=OP,
    reference=reference,
    oracle=reference,
    make_inputs=make_inputs,
    tolerance=Bitwise(),
    shapes=ulysses_shapes(),  # the same W-way splits of 38,248 rows as the packing side
    odd_shapes=(Shape("odd", {"rows": 333, "heads": 8, "world": 4}),),
    interp_shapes=(Shape("tiny", {"rows": 3, "heads": 4, "world": 2}),
                   Shape("odd", {"rows": 7, "heads": 8, "world": 4})),
    special_cases=ALL_SPECIALS,
    bytes_moved=bytes_moved,
    input_names=("x",),
    template="head_merge",
)
