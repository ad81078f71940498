"""Ulysses head merge on the return path (bitwise layout op), the inverse of the all-to-all packing.

x: ``[W, S, h, 128]`` bf16 as received (source rank major: rank w sent its h heads for my S rows)
-> ``[S, W*h*128]``: row s holds heads (w, j) in order, the layout ``out_proj`` consumes
(vllm-omni ``merge_ulysses_heads``: [W,S,1,h,D] -> [1,S,W,h,D]).
Reference: ``permute + contiguous + view``. Class ``bitwise``. Bytes: 2 * 2 * W * S * h * 128.
Layouts (same values): 0 the contiguous receive buffer; 1 a view of a larger receive buffer ([W, S + 3, h, 136]:
padded head rows and a padded row count per rank) at a 16-byte storage offset.
No huge shape: the largest production tensor is 2.7e8 elements (38,248 x 7168), far from 2**31.
"""

from __future__ import annotations

import random

from rsi.contract import Bitwise, OpGroup, Shape
from rsi.refs.common import ALL_SPECIALS, BF16, drawn, randn, relayout
from rsi.refs.qkv_pack import sample_dims as _pack_dims
from rsi.refs.qkv_pack import ulysses_shapes

OP = "head_merge"
HEAD_DIM = 128
SCHEMA = "(Tensor x) -> Tensor"


def reference(x):
    W, S, h, D = x.shape
    return x.permute(1, 0, 2, 3).contiguous().view(S, W * h * D)


def make_inputs(shape: Shape, seed: int, device, layout: int = 0):
    W, S, NH = shape.dims["world"], shape.dims["rows"], shape.dims["heads"]
    x = randn((W, S, NH // W, HEAD_DIM), seed, device, BF16)
    if layout == 1:
        x = relayout(x, pad=(0, 3, 0, 8), offset=8)
    return (x,)


def dims_of(args: tuple) -> dict[str, int]:
    """x: [W, S, h, 128] -> rows S, heads W*h, world W."""
    W, S, h, _ = args[0].shape
    return {"rows": S, "heads": W * h, "world": W}


def fake(x):
    return x.new_empty((x.shape[1], x.shape[0] * x.shape[2] * x.shape[3]))


def bytes_moved(shape: Shape) -> int:
    return 2 * 2 * shape.dims["rows"] * shape.dims["heads"] * HEAD_DIM


def flops(shape: Shape) -> int:
    return 0  # a pure layout op


def sample_shapes(rng: random.Random, backend: str, n: int) -> list[Shape]:
    return drawn(rng, backend, n, _pack_dims)  # the same W-way splits as the packing side


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
    flops=flops,
    input_names=("x",),
    template="head_merge",
    notes="layouts: contiguous receive buffer, a padded view of a larger one",
    n_layouts=2,
    sample_shapes=sample_shapes,
    huge_shapes=(),
    dims_of=dims_of,
    fake=fake,
    schema=SCHEMA,
)
