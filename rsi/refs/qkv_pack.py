"""Destination-major QKV packing for the Ulysses all-to-all (bitwise layout op).

q, k, v: ``[S, NH, 128]`` bf16, read through their existing strides (views of the fused QKV output).
out: ``[W, S, NH/W, 3*128]`` with out[w, s, j] = q|k|v[s, w*NH/W + j] concatenated along the last dim, so one
all-to-all sends rank w its heads for all local rows (vllm-omni ``pack_qkv_destination_major``).
Reference: ``stack + view + permute + contiguous``. Class ``bitwise``. Bytes: 2 * 3 * S * NH * 128 * 2.
"""

from __future__ import annotations

import torch

from rsi.contract import Bitwise, OpGroup, Shape
from rsi.refs.common import ALL_SPECIALS, BF16, randn

OP = "qkv_pack"
HEADS = 56
HEAD_DIM = 128


def reference(q, k, v, world: int):
    S, NH, D = q.shape
    x = torch.stack([q, k, v], dim=2)                       # [S, NH, 3, D]
    x = x.view(S, world, NH // world, 3 * D)                # [S, W, NH/W, 3D]
    # clone, not .contiguous(): at W = 1 the permuted view already counts as contiguous and .contiguous() would
    # return it with a non-canonical stride on the size-1 dim, which the harness's stride check then demands
    return x.permute(1, 0, 2, 3).clone(memory_format=torch.contiguous_format)  # [W, S, NH/W, 3D]


def make_inputs(shape: Shape, seed: int, device):
    S, NH, W = shape.dims["rows"], shape.dims["heads"], shape.dims["world"]
    qkv = randn((S, 3 * NH * HEAD_DIM), seed, device, BF16)
    inner = NH * HEAD_DIM
    q, k, v = (qkv[:, i * inner:(i + 1) * inner].view(S, NH, HEAD_DIM) for i in range(3))
    return q, k, v, W


def bytes_moved(shape: Shape) -> int:
    return 2 * 3 * shape.dims["rows"] * shape.dims["heads"] * HEAD_DIM * 2


def ulysses_shapes() -> tuple[Shape, ...]:
    """5 s 1344x768 on W ranks: 38,248 rows split W ways (one GPU: W = 1)."""
    return tuple(Shape(f"w{w}", {"rows": 38248 // w, "heads": HEADS, "world": w}) for w in (1, 2, 4, 8))


OP_GROUP = OpGroup(
    name=OP,
    reference=reference,
    oracle=reference,
    make_inputs=make_inputs,
    tolerance=Bitwise(),
    shapes=ulysses_shapes(),
    odd_shapes=(Shape("odd", {"rows": 333, "heads": 8, "world": 4}),),
    interp_shapes=(Shape("tiny", {"rows": 3, "heads": 4, "world": 2}),
                   Shape("odd", {"rows": 7, "heads": 8, "world": 4})),
    special_cases=ALL_SPECIALS,
    bytes_moved=bytes_moved,
    noncontiguous_inputs=("q", "k", "v"),
    input_names=("q", "k", "v", "world"),
    template="qkv_pack",
)
