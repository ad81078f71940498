"""SwiGLU as MiniMax-H3's MLP computes it.

fc1's output ``x: [rows, 2F]`` is split ``[gate | up]`` and the model computes ``silu(gate) * up`` in bf16 eager,
i.e. ``bf16(bf16(silu(gate)) * up)``: silu is evaluated in fp32 and rounded to bf16, the product is evaluated in
fp32 and rounded again (H3_SPEC.md section 5, "SwiGLU"). F = 14336 in H3.

Bytes (compulsory): read rows*2F bf16, write rows*F bf16 -> 6*rows*F.
Tolerance: the fused kernel may evaluate exp/sigmoid differently from torch, so the class is ``tolerance``
(bounds below), never lower precision than bf16 rounding of silu and of the product.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from rsi.contract import OpGroup, Shape, Tolerance
from rsi.refs.common import ALL_SPECIALS, BF16, randn

OP = "swiglu"
FFN = 14336


def reference(x: torch.Tensor) -> torch.Tensor:
    """x: [R, 2F] bf16 -> [R, F] bf16 = bf16(bf16(silu(gate)) * up)."""
    gate, up = x.chunk(2, dim=-1)
    return F.silu(gate) * up


def oracle(x: torch.Tensor) -> torch.Tensor:
    """The same formula in fp64 with no intermediate rounding."""
    gate, up = x.double().chunk(2, dim=-1)
    return gate * torch.sigmoid(gate) * up


def make_inputs(shape: Shape, seed: int, device) -> tuple[torch.Tensor]:
    rows, ffn = shape.dims["rows"], shape.dims["ffn"]
    return (randn((rows, 2 * ffn), seed, device, BF16, scale=2.0),)


def bytes_moved(shape: Shape) -> int:
    return 6 * shape.dims["rows"] * shape.dims["ffn"]


def flops(shape: Shape) -> int:
    return 0  # elementwise: the physics gate is bandwidth only


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
    # most 2x that (or under the small floors). fp8-like or truncated math fails by orders of magnitude.
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
    notes="fc1 output split [gate | up]; H3 FFN 14336",
)
