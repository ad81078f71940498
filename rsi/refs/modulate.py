"""Indexed AdaLN modulation at a block input, as MiniMax-H3 computes it.

``h = bf16(RMSNorm(x) * w) * (1 + scale[idx]) + shift[idx]`` with fp32 statistics, eps 1e-5, bf16 in/out
(H3_SPEC.md sections 1 and 5). ``shift``/``scale`` are two of the six chunks of the modulation table
``[T, 6H]`` (T = 6 for T2VA, 9 for FL2VA), i.e. non-contiguous ``[T, H]`` views with row stride 6H; ``idx`` is the
per-row modulation-row index (timestep index x 3 + modality tag).

Reference (the model's eager order): n = bf16(x_f32 * rsqrt(mean(x_f32^2) + eps) * w_f32); then bf16 arithmetic
``n * (1 + scale[idx]) + shift[idx]`` (each op rounds to bf16). A fused kernel does the affine in fp32 and rounds
once, so the class is ``tolerance``. Bytes: read x, write h (4*R*H) + w, table rows and idx.
Term scale of h (the last operation is ``n * (1 + scale) + shift``, which may cancel): ``max(|n (1 + scale)|,
|shift|)`` with n from the fp64 chain.
Layouts (same values): 0 production (contiguous x, w, idx; shift/scale views of the row-major [T, 6H] table);
1 x with a padded row stride (H + 24), w, idx and the table at storage offsets, the table with a padded row
stride (6H + 24); 2 the table stored transposed ([6H, T] storage: chunk strides (1, T)), x with an odd row
stride at an odd offset (unaligned), w at an odd offset, idx with element stride 2.
"""

from __future__ import annotations

import random

import torch

from rsi.contract import OpGroup, Shape, Tolerance
from rsi.refs.common import (
    ALL_SPECIALS,
    BF16,
    draw_rows,
    drawn,
    generator,
    padded_rows,
    randn,
    relayout,
    spread,
    table_chunks,
)

OP = "modulate"
HIDDEN = 5376
EPS = 1e-5
TABLE_ROWS = (3, 6, 9)  # 3 modulation rows per distinct timestep (video, text, audio); H3 uses M = 2 or 3
SCHEMA = "(Tensor x, Tensor w, Tensor shift, Tensor scale, Tensor idx) -> Tensor"


def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """bf16(x * rsqrt(mean(x^2) + eps) * w), statistics and product in fp32."""
    xf = x.float()
    rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (xf * rstd * w.float()).to(x.dtype)


def reference(x, w, shift, scale, idx):
    """x: [R, H] bf16, w: [H], shift/scale: [T, H] (views of the [T, 6H] table), idx: [R] int64 -> [R, H] bf16."""
    n = rms_norm(x, w)
    return n * (1 + scale[idx]) + shift[idx]


def norm64(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """RMSNorm(x) * w in fp64 (x may be bf16 or already fp64)."""
    xd = x.double()
    return xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + EPS) * w.double()


def oracle(x, w, shift, scale, idx):
    n = norm64(x, w)
    return n * (1 + scale.double()[idx]) + shift.double()[idx]


def affine_term(n: torch.Tensor, shift, scale, idx) -> torch.Tensor:
    """max(|n (1 + scale[idx])|, |shift[idx]|) in fp64: the terms of h's last operation."""
    return torch.maximum((n * (1 + scale.double()[idx])).abs(), shift.double()[idx].abs())


def term_scale(x, w, shift, scale, idx):
    return (affine_term(norm64(x, w), shift, scale, idx),)


def make_table(rows: int, hidden: int, seed: int, device) -> torch.Tensor:
    """AdaLN table [T, 6H] with realistic magnitudes (shift/scale/gate ~ N(0, 0.5))."""
    return randn((rows, 6 * hidden), seed + 7919, device, BF16, scale=0.5)


def make_idx(rows: int, table_rows: int, seed: int, device) -> torch.Tensor:
    return torch.randint(0, table_rows, (rows,), generator=generator(seed + 104729, device), device=device)


def place_rows(x: torch.Tensor, layout: int, pad: tuple[int, int] = (24, 3)) -> torch.Tensor:
    """A [R, H] activation in the given layout: 0 as is, 1 padded row stride at a 16-byte offset, 2 an odd row
    stride at an odd offset."""
    if layout == 1:
        return padded_rows(x, pad[0], 8)
    if layout == 2:
        return padded_rows(x, pad[1], 1)
    return x


def place_vector(w: torch.Tensor, layout: int) -> torch.Tensor:
    """A norm weight [H]: contiguous; at layout 1 at a 16-byte storage offset, at layout 2 at an odd one (a
    parameter inside a flat parameter buffer)."""
    return relayout(w, offset={0: 0, 1: 8, 2: 1}[layout]) if layout else w


def place_idx(idx: torch.Tensor, layout: int) -> torch.Tensor:
    if layout == 1:
        return relayout(idx, offset=2)
    if layout == 2:
        return spread(idx, 2, offset=1)
    return idx


def make_inputs(shape: Shape, seed: int, device, layout: int = 0):
    R, H, T = shape.dims["rows"], shape.dims["hidden"], shape.dims["table"]
    x = randn((R, H), seed, device, BF16, scale=1.0)
    w = randn((H,), seed + 1, device, BF16, scale=0.2) + 1.0
    w = w.to(BF16)
    table = make_table(T, H, seed, device)
    chunks = table_chunks(table, layout)  # shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp
    idx = make_idx(R, T, seed, device)
    return place_rows(x, layout), place_vector(w, layout), chunks[0], chunks[1], place_idx(idx, layout)


def dims_of(args: tuple) -> dict[str, int]:
    """x: [R, H], shift: [T, H] -> rows, hidden, table."""
    return {"rows": args[0].shape[0], "hidden": args[0].shape[1], "table": args[2].shape[0]}


def fake(x, w, shift, scale, idx):
    return x.new_empty(x.shape)


def bytes_moved(shape: Shape) -> int:
    R, H, T = shape.dims["rows"], shape.dims["hidden"], shape.dims["table"]
    return 4 * R * H + 2 * H + 2 * 2 * T * H + 8 * R


def flops(shape: Shape) -> int:
    """Per row: sum of squares (2H), mean, + eps, rsqrt (3); per element: * rstd, * w, 1 + scale, * (1 + scale),
    + shift (5). 7H + 3 per row."""
    R, H = shape.dims["rows"], shape.dims["hidden"]
    return R * (7 * H + 3)


def sample_dims(rng: random.Random, backend: str) -> dict[str, int]:
    """Any rows, any hidden (a whole row per program: H3's 5376 on a GPU), 3, 6 or 9 table rows."""
    hidden = rng.randint(2, 256) if backend == "interpret" else HIDDEN
    return {"rows": draw_rows(rng, backend), "hidden": hidden, "table": rng.choice(TABLE_ROWS)}


def sample_shapes(rng: random.Random, backend: str, n: int) -> list[Shape]:
    return drawn(rng, backend, n, sample_dims)


def h3_shapes(extra: dict | None = None) -> tuple[Shape, ...]:
    """H3 rows: Stage-1 672x384 draft (S = 10,250), 1344x768 per rank of four (9,562) and on one GPU (38,248)."""
    extra = extra or {}
    return (Shape("stage1", {"rows": 10250, "hidden": HIDDEN, "table": 6, **extra}),
            Shape("per_rank", {"rows": 9562, "hidden": HIDDEN, "table": 9, **extra}),
            Shape("full", {"rows": 38248, "hidden": HIDDEN, "table": 6, **extra}))


TOL = Tolerance(atol=1e-6, rtol=1e-4, factor=2.0, cosine_floor=0.9999)
N_LAYOUTS = 3

OP_GROUP = OpGroup(
    name=OP,
    reference=reference,
    oracle=oracle,
    make_inputs=make_inputs,
    tolerance=TOL,
    shapes=h3_shapes(),
    odd_shapes=(Shape("one_row", {"rows": 1, "hidden": HIDDEN, "table": 6}),
                Shape("odd", {"rows": 333, "hidden": 1000, "table": 9})),
    interp_shapes=(Shape("tiny", {"rows": 3, "hidden": 64, "table": 6}),
                   Shape("odd", {"rows": 7, "hidden": 200, "table": 9})),
    special_cases=ALL_SPECIALS,
    bytes_moved=bytes_moved,
    flops=flops,
    noncontiguous_inputs=("shift", "scale"),
    special_inputs=(),
    input_names=("x", "w", "shift", "scale", "idx"),
    template="modulate",
    notes="RMSNorm eps 1e-5 with fp32 statistics; indexed scale/shift rows of the AdaLN table; specials reach x, "
          "w and the table views (in place, layout kept); largest tensor 2.1e8 elements: no huge shape",
    term_scale=term_scale,
    n_layouts=N_LAYOUTS,
    sample_shapes=sample_shapes,
    huge_shapes=(),
    dims_of=dims_of,
    fake=fake,
    schema=SCHEMA,
)
