"""RMSNorm (no affine) + AdaLN modulation of the LTX-2 refiner block, as diffusers computes it in bf16.

diffusers 0.42.1 ``LTX2VideoTransformerBlock.forward`` (transformer_ltx2.py) with ``RMSNorm(dim, eps=1e-6,
elementwise_affine=False)`` (normalization.py)::

    variance = x.to(torch.float32).pow(2).mean(-1, keepdim=True)
    n = (x * torch.rsqrt(variance + eps)).to(x.dtype)        # bf16 x times fp32 rstd -> fp32, rounded to bf16
    h = n * (1 + scale_msa) + shift_msa                       # bf16 arithmetic: each op rounds to bf16

x: [R, D] bf16 (video D = 4096 = 32 x 128 at R = 16,128 rows for 16 latent frames of 24 x 42; audio D = 2048 =
32 x 64, ~126 rows); scale/shift: [D] bf16, one row of ``scale_shift_table[None, None] + temb.reshape(B, T, 6, -1)``
unbound into (shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp) for one timestep (B = 1, T = 1).
A ``[1, D]`` row broadcasts the same way; a per-token modulation ([R, D]) is another op: ``dims_of`` then returns
``per_token = 1``, which no bucket has, so the runtime runs this reference for it.

Class ``tolerance``, not bitwise. Every rounding after the statistics can be reproduced by a kernel (the template
rounds at each step as torch does), but the fp32 sum of squares depends on the reduction order (torch's CUDA and
CPU reductions and any Triton kernel add in different orders) and rsqrt is approximate on the GPU; a last-bit
difference in rstd flips the bf16 rounding of ``x * rstd`` for ~1 element in 2^16 per ulp, i.e. hundreds of elements
per call at the video shape. So no kernel can guarantee diffusers' bits; the template matches them everywhere else
(tests/interp/test_ltx_modulate.py measures the share). Bounds as ``modulate``'s: max-abs, rel-L2 and cosine
within 2x the bf16 reference's own error against the fp64 oracle, and per element 2x the reference's error + 4
ulps of the term scale.
Term scale of h (the last operation is ``p + shift`` with ``p = n (1 + scale)``, which may cancel):
``max(|n (1 + scale)|, |shift|)`` with n from the fp64 chain.
Bytes: read x, write h (4*R*D) + scale and shift (4*D).
Layouts (same values): 0 production (contiguous x; shift/scale rows of one contiguous [6, D] ada table); 1 x with a
padded row stride (D + 24) at a 16-byte storage offset, the table with a padded row stride (D + 24) at an offset;
2 x with an odd row stride (D + 3) at an odd offset (unaligned), the table stored transposed ([D, 6] storage:
shift/scale with element stride 6).
No huge shape: the largest tensor is 6.6e7 elements (x at 16,128 x 4096), far from 2**31.
"""

from __future__ import annotations

import random

import torch

from rsi.contract import OpGroup, Shape, Tolerance
from rsi.refs.common import ALL_SPECIALS, BF16, draw_rows, drawn, padded_rows, randn, relayout

OP = "ltx_modulate"
VIDEO_DIM = 4096       # 32 heads x 128
AUDIO_DIM = 2048       # 32 heads x 64
VIDEO_ROWS = 16128     # 16 latent frames x 24 x 42 (the refiner's second stage)
AUDIO_ROWS = 126       # audio latent frames of the same clip
EPS = 1e-6
SCHEMA = "(Tensor x, Tensor scale, Tensor shift) -> Tensor"


def rms_norm_noaffine(x: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """diffusers ``RMSNorm(dim, eps, elementwise_affine=False).forward`` (the non-NPU path), verbatim."""
    input_dtype = x.dtype
    variance = x.to(torch.float32).pow(2).mean(-1, keepdim=True)
    x = x * torch.rsqrt(variance + eps)
    return x.to(input_dtype)


def reference(x, scale, shift):
    """x: [R, D] bf16, scale/shift: [D] bf16 -> [R, D] bf16 = rms_norm_noaffine(x) * (1 + scale) + shift."""
    return rms_norm_noaffine(x) * (1 + scale) + shift


def norm64(x: torch.Tensor) -> torch.Tensor:
    """RMSNorm(x) in fp64 (x may be bf16 or already fp64)."""
    xd = x.double()
    return xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + EPS)


def affine64(n: torch.Tensor, scale, shift) -> torch.Tensor:
    return n * (1 + scale.double()) + shift.double()


def oracle(x, scale, shift):
    return affine64(norm64(x), scale, shift)


def affine_term(n: torch.Tensor, scale, shift) -> torch.Tensor:
    """max(|n (1 + scale)|, |shift|) in fp64: the terms of h's last operation."""
    return torch.maximum((n * (1 + scale.double())).abs(), shift.double().abs().expand_as(n))


def term_scale(x, scale, shift):
    return (affine_term(norm64(x), scale, shift),)


# ------------------------------------------------------------------------------------------------------ inputs
def make_table(dim: int, seed: int, device, layout: int = 0) -> list[torch.Tensor]:
    """The six [D] modulation rows (shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp) of one
    timestep, ~N(0, 0.5), as views of one [6, D] table in the given layout: 0 contiguous (what
    ``ada_values[0, 0].unbind(0)`` gives), 1 a padded row stride (D + 24) at a 16-byte storage offset, 2 stored
    transposed ([D, 6] storage: element stride 6)."""
    table = randn((6, dim), seed + 7919, device, BF16, scale=0.5)
    if layout == 1:
        table = padded_rows(table, 24, 8)
    elif layout == 2:
        table = relayout(table, order=(1, 0), offset=3)
    return list(table.unbind(0))


def place_rows(x: torch.Tensor, layout: int, pad: tuple[int, int] = (24, 3)) -> torch.Tensor:
    """A [R, D] activation: 0 as is, 1 padded row stride at a 16-byte offset, 2 an odd row stride at an odd
    offset."""
    if layout == 1:
        return padded_rows(x, pad[0], 8)
    if layout == 2:
        return padded_rows(x, pad[1], 1)
    return x


def make_inputs(shape: Shape, seed: int, device, layout: int = 0):
    R, D = shape.dims["rows"], shape.dims["dim"]
    x = randn((R, D), seed, device, BF16, scale=1.0)
    t = make_table(D, seed, device, layout)
    return place_rows(x, layout), t[1], t[0]   # norm1 with (scale_msa, shift_msa)


def row_dims(x: torch.Tensor, *mods: torch.Tensor) -> dict[str, int]:
    """rows, dim of x; ``per_token = 1`` when a modulation input is not one row of D values (no bucket serves
    that: the runtime then runs the reference)."""
    dims = {"rows": x.shape[0], "dim": x.shape[1]}
    if any(m.numel() != x.shape[1] for m in mods):
        dims["per_token"] = 1
    return dims


def dims_of(args: tuple) -> dict[str, int]:
    """x: [R, D], scale/shift: [D] -> rows, dim."""
    return row_dims(args[0], args[1], args[2])


def fake(x, scale, shift):
    return x.new_empty(x.shape)


def bytes_moved(shape: Shape) -> int:
    R, D = shape.dims["rows"], shape.dims["dim"]
    return 4 * R * D + 2 * 2 * D


def flops(shape: Shape) -> int:
    """Per row: sum of squares (2D), mean, + eps, rsqrt (3); per element: * rstd, 1 + scale, * (1 + scale),
    + shift (4). 6D + 3 per row."""
    R, D = shape.dims["rows"], shape.dims["dim"]
    return R * (6 * D + 3)


def sample_dims(rng: random.Random, backend: str) -> dict[str, int]:
    """Any rows; any even dim under the interpreter, the video or audio stream's dim on a GPU."""
    dim = 2 * rng.randint(1, 128) if backend == "interpret" else rng.choice((VIDEO_DIM, AUDIO_DIM))
    return {"rows": draw_rows(rng, backend), "dim": dim}


def sample_shapes(rng: random.Random, backend: str, n: int) -> list[Shape]:
    return drawn(rng, backend, n, sample_dims)


def ltx_shapes() -> tuple[Shape, ...]:
    """The refiner's streams: video (16,128 rows x 4096) and audio (126 rows x 2048)."""
    return (Shape("video", {"rows": VIDEO_ROWS, "dim": VIDEO_DIM}),
            Shape("audio", {"rows": AUDIO_ROWS, "dim": AUDIO_DIM}))


ODD_SHAPES = (Shape("one_row", {"rows": 1, "dim": VIDEO_DIM}), Shape("odd", {"rows": 333, "dim": 1000}))
INTERP_SHAPES = (Shape("tiny", {"rows": 3, "dim": 64}), Shape("odd", {"rows": 7, "dim": 200}))
TOL = Tolerance(atol=1e-6, rtol=1e-4, factor=2.0, cosine_floor=0.9999)
N_LAYOUTS = 3

OP_GROUP = OpGroup(
    name=OP,
    reference=reference,
    oracle=oracle,
    make_inputs=make_inputs,
    tolerance=TOL,
    shapes=ltx_shapes(),
    odd_shapes=ODD_SHAPES,
    interp_shapes=INTERP_SHAPES,
    special_cases=ALL_SPECIALS,
    bytes_moved=bytes_moved,
    flops=flops,
    noncontiguous_inputs=(),
    special_inputs=(),
    input_names=("x", "scale", "shift"),
    template="ltx_modulate",
    notes="LTX-2 RMSNorm without weight, eps 1e-6, fp32 statistics, then bf16 n * (1 + scale) + shift (each op "
          "rounded); scale/shift one [D] row of the [6, D] ada table; specials reach x and the table rows (in place, "
          "layout kept); largest tensor 6.6e7 elements: no huge shape",
    term_scale=term_scale,
    n_layouts=N_LAYOUTS,
    sample_shapes=sample_shapes,
    huge_shapes=(),
    dims_of=dims_of,
    fake=fake,
    schema=SCHEMA,
)
