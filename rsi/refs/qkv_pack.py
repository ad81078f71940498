"""Destination-major QKV packing for the Ulysses all-to-all (bitwise layout op).

q, k, v: ``[S, NH, 128]`` bf16, read through their existing strides (views of the fused QKV output).
out: ``[W, S, NH/W, 3*128]`` with out[w, s, j] = q|k|v[s, w*NH/W + j] concatenated along the last dim, so one
all-to-all sends rank w its heads for all local rows (vllm-omni ``pack_qkv_destination_major``).
Reference: ``stack + view + permute + contiguous``. Class ``bitwise``. Bytes: 2 * 3 * S * NH * 128 * 2.
Layouts (same values): 0 production (q, k, v the [Q; K; V] column blocks of one contiguous [S, 3*NH*128] qkv);
1 that qkv with a padded row stride (+24) at a 16-byte storage offset; 2 the per-head interleaved qkv of the raw
``qkv_proj`` (H3_SPEC.md "layout traps": [S, NH, 3, 128], q = [:, :, 0]; strides (NH*384, 384, 1)).
Huge shape: 104,000 rows x 56 heads at W = 2 (qkv and out: 2.24e9 elements > 2**31, 4.5 GB each); bitwise, so no
fp64 oracle: inputs, reference and two candidate outputs peaked at 18 GB on the H200.
"""

from __future__ import annotations

import random

import torch

from rsi.contract import Bitwise, OpGroup, Shape
from rsi.refs.common import ALL_SPECIALS, BF16, MAX_ROWS, ULYSSES_WORLDS, draw_rows, drawn, padded_rows, randn

OP = "qkv_pack"
HEADS = 56
HEAD_DIM = 128
SCHEMA = "(Tensor q, Tensor k, Tensor v, int world) -> Tensor"


def reference(q, k, v, world: int):
    S, NH, D = q.shape
    x = torch.stack([q, k, v], dim=2)                       # [S, NH, 3, D]
    x = x.view(S, world, NH // world, 3 * D)                # [S, W, NH/W, 3D]
    # clone, not .contiguous(): at W = 1 the permuted view already counts as contiguous and .contiguous() would
    # return it with a non-canonical stride on the size-1 dim, which the harness's stride check then demands
    return x.permute(1, 0, 2, 3).clone(memory_format=torch.contiguous_format)  # [W, S, NH/W, 3D]


def make_inputs(shape: Shape, seed: int, device, layout: int = 0):
    S, NH, W = shape.dims["rows"], shape.dims["heads"], shape.dims["world"]
    qkv = randn((S, 3 * NH * HEAD_DIM), seed, device, BF16)
    inner = NH * HEAD_DIM
    if layout == 2:  # same values, per-head interleaved storage
        blocks = qkv.view(S, 3, NH, HEAD_DIM)
        inter = torch.empty((S, NH, 3, HEAD_DIM), dtype=qkv.dtype, device=qkv.device)
        inter.copy_(blocks.permute(0, 2, 1, 3))
        return inter[:, :, 0], inter[:, :, 1], inter[:, :, 2], W
    if layout == 1:
        qkv = padded_rows(qkv, 24, 8)
    q, k, v = (qkv[:, i * inner:(i + 1) * inner].view(S, NH, HEAD_DIM) for i in range(3))
    return q, k, v, W


def dims_of(args: tuple) -> dict[str, int]:
    """q: [S, NH, 128], world -> rows, heads, world."""
    return {"rows": args[0].shape[0], "heads": args[0].shape[1], "world": int(args[3])}


def fake(q, k, v, world):
    return q.new_empty((world, q.shape[0], q.shape[1] // world, 3 * q.shape[2]))


def bytes_moved(shape: Shape) -> int:
    return 2 * 3 * shape.dims["rows"] * shape.dims["heads"] * HEAD_DIM * 2


def flops(shape: Shape) -> int:
    return 0  # a pure layout op


def ulysses_shapes() -> tuple[Shape, ...]:
    """5 s 1344x768 on W ranks: 38,248 rows split W ways (one GPU: W = 1)."""
    return tuple(Shape(f"w{w}", {"rows": MAX_ROWS // w, "heads": HEADS, "world": w}) for w in ULYSSES_WORLDS)


def sample_dims(rng: random.Random, backend: str) -> dict[str, int]:
    """W ranks of NH/W heads each: under the interpreter W in 1, 2, 4 with 1 or 2 heads a rank; on a GPU H3's 56
    heads, W in 1, 2, 4, 8."""
    if backend == "interpret":
        world = rng.choice((1, 2, 4))
        heads = world * rng.randint(1, 2)
    else:
        world, heads = rng.choice(ULYSSES_WORLDS), HEADS
    return {"rows": draw_rows(rng, backend), "heads": heads, "world": world}


def sample_shapes(rng: random.Random, backend: str, n: int) -> list[Shape]:
    return drawn(rng, backend, n, sample_dims)


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
    flops=flops,
    noncontiguous_inputs=("q", "k", "v"),
    input_names=("q", "k", "v", "world"),
    template="qkv_pack",
    notes="q/k/v are strided views of one qkv buffer (specials are written into a copy of it, layout kept); "
          "huge: 104,000 rows at W = 2 (> 2**31 elements), bitwise against the reference",
    n_layouts=3,
    sample_shapes=sample_shapes,
    huge_shapes=(Shape("huge", {"rows": 104000, "heads": HEADS, "world": 2}),),
    dims_of=dims_of,
    fake=fake,
    schema=SCHEMA,
)
