"""The LTX-2 feed-forward activation: GELU with the tanh approximation, as diffusers computes it in bf16.

diffusers 0.42.1 ``FeedForward(activation_fn="gelu-approximate")`` -> ``GELU(approximate="tanh")``:
``F.gelu(proj(x), approximate="tanh")`` on the bf16 fc1 output. torch evaluates
``0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))`` in fp32 and rounds once to bf16.
x: [R, F] bf16 (video F = 16384 = 4 x 4096 at 16,128 rows; audio F = 8192 at ~126 rows) -> [R, F] bf16.

Class ``tolerance``: a kernel's tanh (or exp) differs from torch's in the last fp32 bits, which flips the bf16
rounding of some outputs; the last operation is a product, so the term scale is |oracle| (``term_scale`` None).
Bounds as swiglu's. Where x is very negative, ``1 + tanh`` cancels in fp32 and the reference's own error is large
(the bound follows it); the oracle is the same function in fp64 (see ``oracle``).
Bytes: read and write R*F bf16 (4*R*F).
Layouts: 0 contiguous (fc1's output); 1 a padded row stride (F + 24) at a 16-byte storage offset; 2 an odd row
stride (F + 3) at an odd offset (unaligned).
No huge shape: the largest tensor is 2.6e8 elements (16,128 x 16,384), within 3x of 2**31 only at 8x the rows.
"""

from __future__ import annotations

import math
import random

import torch
import torch.nn.functional as F

from rsi.contract import OpGroup, Shape, Tolerance
from rsi.refs.common import ALL_SPECIALS, BF16, draw_rows, drawn, padded_rows, randn

OP = "gelu_tanh"
VIDEO_FFN = 16384
AUDIO_FFN = 8192
SCHEMA = "(Tensor x) -> Tensor"


def reference(x: torch.Tensor) -> torch.Tensor:
    """x: [R, F] bf16 -> [R, F] bf16 = F.gelu(x, approximate="tanh")."""
    return F.gelu(x, approximate="tanh")


def oracle(x: torch.Tensor) -> torch.Tensor:
    """The same function in fp64, with ``0.5 (1 + tanh u)`` spelled ``sigmoid(2u)``: below x ~ -6 even fp64's
    ``1 + tanh u`` cancels to 0 (tanh u rounds to -1), which would make an accurate kernel's tiny outputs
    (-1e-20 at x = -8) "errors" against an oracle of -0."""
    xd = x.double()
    return xd * torch.sigmoid(2 * math.sqrt(2 / math.pi) * (xd + 0.044715 * xd.pow(3)))


def make_inputs(shape: Shape, seed: int, device, layout: int = 0) -> tuple[torch.Tensor]:
    R, Fd = shape.dims["rows"], shape.dims["ffn"]
    x = randn((R, Fd), seed, device, BF16, scale=2.0)
    if layout == 1:
        x = padded_rows(x, 24, 8)
    elif layout == 2:
        x = padded_rows(x, 3, 1)
    return (x,)


def dims_of(args: tuple) -> dict[str, int]:
    """x: [R, F] -> rows, ffn."""
    return {"rows": args[0].shape[0], "ffn": args[0].shape[1]}


def fake(x):
    return x.new_empty(x.shape)


def bytes_moved(shape: Shape) -> int:
    return 4 * shape.dims["rows"] * shape.dims["ffn"]


def flops(shape: Shape) -> int:
    """Per element: x^3 (2), 0.044715 * (1), + x (1), * sqrt(2/pi) (1), tanh (1), 1 + (1), 0.5 * x (1), * (1) = 9."""
    return 9 * shape.dims["rows"] * shape.dims["ffn"]


def sample_dims(rng: random.Random, backend: str) -> dict[str, int]:
    """Any rows, any F; on a GPU the video or audio stream's FFN width."""
    ffn = rng.randint(1, 300) if backend == "interpret" else rng.choice((VIDEO_FFN, AUDIO_FFN))
    return {"rows": draw_rows(rng, backend), "ffn": ffn}


def sample_shapes(rng: random.Random, backend: str, n: int) -> list[Shape]:
    return drawn(rng, backend, n, sample_dims)


def _shape(name: str, rows: int, ffn: int) -> Shape:
    return Shape(name, {"rows": rows, "ffn": ffn})


OP_GROUP = OpGroup(
    name=OP,
    reference=reference,
    oracle=oracle,
    make_inputs=make_inputs,
    tolerance=Tolerance(atol=1e-6, rtol=1e-4, factor=2.0, cosine_floor=0.9999),
    shapes=(_shape("video", 16128, VIDEO_FFN), _shape("audio", 126, AUDIO_FFN)),
    odd_shapes=(_shape("one_row", 1, VIDEO_FFN), _shape("odd", 333, 1000)),
    interp_shapes=(_shape("tiny", 3, 96), _shape("odd", 17, 200)),
    special_cases=ALL_SPECIALS,
    bytes_moved=bytes_moved,
    flops=flops,
    noncontiguous_inputs=(),
    input_names=("x",),
    template="gelu_tanh",
    notes="LTX-2 FFN activation F.gelu(approximate='tanh') on the bf16 fc1 output (fp32 math, one rounding); "
          "layouts: contiguous, padded row stride, unaligned; largest tensor 2.6e8 elements: no huge shape",
    term_scale=None,  # the last operation is a product: its magnitude is |oracle|
    n_layouts=3,
    sample_shapes=sample_shapes,
    huge_shapes=(),
    dims_of=dims_of,
    fake=fake,
    schema=SCHEMA,
)
