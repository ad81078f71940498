"""SwiGLU as MiniMax-H3's MLP computes it.

fc1's output ``x: [rows, 2F]`` is split ``[gate | up]`` and the model computes ``silu(gate) * up`` in bf16 eager,
i.e. ``bf16(bf16(silu(gate)) * up)``: silu is evaluated in fp32 and rounded to bf16, the product is evaluated in
fp32 and rounded again (H3_SPEC.md section 5, "SwiGLU"). F = 14336 in H3.

Bytes (compulsory): read rows*2F bf16, write rows*F bf16 -> 6*rows*F.
Tolerance: the fused kernel may evaluate exp/sigmoid differently from torch, so the class is ``tolerance``
(bounds below), never lower precision than bf16 rounding of silu and of the product. The last operation is the
product silu(g) * u, which cannot cancel: its term scale is |oracle| itself (``term_scale`` None).
Layouts: 0 contiguous x (fc1's output); 1 a padded row stride (2F + 24) at a 16-byte storage offset (a GEMM
output with a padded leading dimension); 2 an odd row stride (2F + 3) at an odd offset (unaligned pointer).
Huge shape: rows 80,000 (x: 2.29e9 elements > 2**31, 4.6 GB); the fp64 oracle of the output (1.15e9 elements,
9.2 GB) is computed with in-place fp64 temporaries: inputs, reference, oracle and two candidate outputs peaked at
25 GB on the H200, so the huge trial is judged against the full fp64 oracle like any other.
"""

from __future__ import annotations

import random

import torch
import torch.nn.functional as F

from rsi.contract import OpGroup, Shape, Tolerance
from rsi.refs.common import ALL_SPECIALS, BF16, draw_rows, drawn, padded_rows, randn

OP = "swiglu"
FFN = 14336
SCHEMA = "(Tensor x) -> Tensor"


def reference(x: torch.Tensor) -> torch.Tensor:
    """x: [R, 2F] bf16 -> [R, F] bf16 = bf16(bf16(silu(gate)) * up)."""
    gate, up = x.chunk(2, dim=-1)
    return F.silu(gate) * up


def oracle(x: torch.Tensor) -> torch.Tensor:
    """The same formula in fp64 with no intermediate rounding (gate * sigmoid(gate) * up)."""
    gate, up = x.chunk(2, dim=-1)
    g = gate.double()
    out = torch.sigmoid(g)
    out.mul_(g)
    del g
    return out.mul_(up.double())


def make_inputs(shape: Shape, seed: int, device, layout: int = 0) -> tuple[torch.Tensor]:
    rows, ffn = shape.dims["rows"], shape.dims["ffn"]
    x = randn((rows, 2 * ffn), seed, device, BF16, scale=2.0)
    if layout == 1:
        x = padded_rows(x, 24, 8)
    elif layout == 2:
        x = padded_rows(x, 3, 1)
    return (x,)


def dims_of(args: tuple) -> dict[str, int]:
    """x: [R, 2F] -> rows, ffn."""
    x = args[0]
    return {"rows": x.shape[0], "ffn": x.shape[1] // 2}


def fake(x):
    return x.new_empty((x.shape[0], x.shape[1] // 2))


def bytes_moved(shape: Shape) -> int:
    return 6 * shape.dims["rows"] * shape.dims["ffn"]


def flops(shape: Shape) -> int:
    """silu(g) * u per output element: exp, add, div, mul (silu), mul (by up) = 5."""
    return 5 * shape.dims["rows"] * shape.dims["ffn"]


def sample_dims(rng: random.Random, backend: str) -> dict[str, int]:
    """Any rows and any F admit (the row is split in half); on a GPU F is H3's 14336."""
    ffn = rng.randint(1, 300) if backend == "interpret" else FFN
    return {"rows": draw_rows(rng, backend), "ffn": ffn}


def sample_shapes(rng: random.Random, backend: str, n: int) -> list[Shape]:
    return drawn(rng, backend, n, sample_dims)


def liger(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """Liger's SiLU*mul (optional dependency, GPU only)."""
    from liger_kernel.ops.swiglu import LigerSiLUMulFunction

    return LigerSiLUMulFunction.apply(gate, up)


def liger_prepare(inputs: tuple) -> tuple:
    """Liger takes separate contiguous gate/up (its kernel uses one row stride for a, b and c), as a model with
    two fc1 GEMMs would produce them; the halves are made outside the timed region."""
    (x,) = inputs
    gate, up = x.chunk(2, dim=-1)
    return gate.contiguous(), up.contiguous()


def _shape(name: str, rows: int, ffn: int = FFN) -> Shape:
    return Shape(name, {"rows": rows, "ffn": ffn})


OP_GROUP = OpGroup(
    name=OP,
    reference=reference,
    oracle=oracle,
    make_inputs=make_inputs,
    # bf16 rounding of silu and of the product: the reference's own error is ~2^-9 relative; a kernel may be at
    # most 2x that (or under the small floors), and per element 2x the reference's error + 4 ulps of |out|.
    # fp8-like or truncated math fails by orders of magnitude.
    tolerance=Tolerance(atol=1e-6, rtol=1e-4, factor=2.0, cosine_floor=0.9999),
    shapes=(
        _shape("stage1", 10250),    # 672x384 Stage-1 draft, one GPU (S = 10,250 rows incl. text + pad)
        _shape("per_rank", 9562),   # 1344x768, four-rank Ulysses split
        _shape("full", 38248),      # 1344x768, one GPU
    ),
    odd_shapes=(_shape("one_row", 1), _shape("odd_rows", 1001), _shape("odd_ffn", 37, 1000)),
    interp_shapes=(_shape("tiny", 3, 96), _shape("odd", 17, 200), _shape("pow2", 8, 256)),
    special_cases=ALL_SPECIALS,
    bytes_moved=bytes_moved,
    flops=flops,
    noncontiguous_inputs=(),
    input_names=("x",),
    template="swiglu",
    liger=liger,
    liger_prepare=liger_prepare,
    notes="fc1 output split [gate | up]; H3 FFN 14336; layouts: contiguous, padded row stride, unaligned",
    term_scale=None,  # the last operation is a product: |silu(g) * u| = |oracle|
    n_layouts=3,
    sample_shapes=sample_shapes,
    huge_shapes=(_shape("huge", 80000),),
    dims_of=dims_of,
    fake=fake,
    schema=SCHEMA,
)
