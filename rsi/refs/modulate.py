"""Indexed AdaLN modulation at a block input, as MiniMax-H3 computes it.

``h = bf16(RMSNorm(x) * w) * (1 + scale[idx]) + shift[idx]`` with fp32 statistics, eps 1e-5, bf16 in/out
(H3_SPEC.md sections 1 and 5). ``shift``/``scale`` are two of the six chunks of the modulation table
``[T, 6H]`` (T = 6 for T2VA, 9 for FL2VA), i.e. non-contiguous ``[T, H]`` views with row stride 6H; ``idx`` is the
per-row modulation-row index (timestep index x 3 + modality tag).

Reference (the model's eager order): n = bf16(x_f32 * rsqrt(mean(x_f32^2) + eps) * w_f32); then bf16 arithmetic
``n * (1 + scale[idx]) + shift[idx]`` (each op rounds to bf16). A fused kernel does the affine in fp32 and rounds
once, so the class is ``tolerance``. Bytes: read x, write h (4*R*H) + w, table rows and idx.
"""

from __future__ import annotations

import torch

from rsi.contract import OpGroup, Shape, Tolerance
from rsi.refs.common import ALL_SPECIALS, BF16, generator, randn

OP = "modulate"
HIDDEN = 5376
EPS = 1e-5


def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """bf16(x * rsqrt(mean(x^2) + eps) * w), statistics and product in fp32."""
    xf = x.float()
    rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (xf * rstd * w.float()).to(x.dtype)


def reference(x, w, shift, scale, idx):
    """x: [R, H] bf16, w: [H], shift/scale: [T, H] (views of the [T, 6H] table), idx: [R] int64 -> [R, H] bf16."""
    n = rms_norm(x, w)
    return n * (1 + scale[idx]) + shift[idx]


def oracle(x, w, shift, scale, idx):
    xd = x.double()
    n = xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + EPS) * w.double()
    return n * (1 + scale.double()[idx]) + shift.double()[idx]


def make_table(rows: int, hidden: int, seed: int, device) -> torch.Tensor:
    """AdaLN table [T, 6H] with realistic magnitudes (shift/scale/gate ~ N(0, 0.5))."""
    return randn((rows, 6 * hidden), seed + 7919, device, BF16, scale=0.5)


def make_idx(rows: int, table_rows: int, seed: int, device) -> torch.Tensor:
    return torch.randint(0, table_rows, (rows,), generator=generator(seed + 104729, device), device=device)


def make_inputs(shape: Shape, seed: int, device):
    R, H, T = shape.dims["rows"], shape.dims["hidden"], shape.dims["table"]
    x = randn((R, H), seed, device, BF16, scale=1.0)
    w = randn((H,), seed + 1, device, BF16, scale=0.2) + 1.0
    w = w.to(BF16)
    table = make_table(T, H, seed, device)
    chunks = table.view(T, 6, H).unbind(1)  # shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp
    return x, w, chunks[0], chunks[1], make_idx(R, T, seed, device)


def bytes_moved(shape: Shape) -> int:
    R, H, T = shape.dims["rows"], shape.dims["hidden"], shape.dims["table"]
    return 4 * R * H + 2 * H + 2 * 2 * T * H + 8 * R


def h3_shapes(extra: dict | None = None) -> tuple[Shape, ...]:
    """H3 rows: Stage-1 672x384 draft (S = 10,250), 1344x768 per rank of four (9,562) and on one GPU (38,248)."""
    extra = extra or {}
    return (Shape("stage1", {"rows": 10250, "hidden": HIDDEN, "table": 6, **extra}),
            Shape("per_rank", {"rows": 9562, "hidden": HIDDEN, "table": 9, **extra}),
            Shape("full", {"rows": 38248, "hidden": HIDDEN, "table": 6, **extra}))


TOL = Tolerance(atol=1e-6, rtol=1e-4, factor=2.0, cosine_floor=0.9999)

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
    noncontiguous_inputs=("shift", "scale"),
    special_inputs=(0,),
    input_names=("x", "w", "shift", "scale", "idx"),
    template="modulate",
    notes="RMSNorm eps 1e-5 with fp32 statistics; indexed scale/shift rows of the AdaLN table",
)
