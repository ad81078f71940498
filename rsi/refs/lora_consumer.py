"""Precision-preserving LoRA on fc1: the base and LoRA branches stay separate GEMMs, and their sum is fused into the
consumer, SwiGLU.

A LoRA update merged into a bf16 weight (W + s*B@A stored in bf16) mostly rounds away (``rsi.lora_diag``
measures how much); keeping ``base = x @ W^T`` and ``lora = s * B(A x)`` as separate GEMMs keeps it. The two
bf16 outputs ``base, lora: [R, 2F]`` must then be added, and the add is fused into the next consumer, SwiGLU
(fc1's output is ``[gate | up]``), with the sum explicitly rounded to bf16 before the consumer's math.

Reference, the native unfused path: ``y = torch.add(base, lora)`` (one bf16 rounding), then the **unfused
consumer**: the ``swiglu`` template realization (rsi/templates/swiglu.py) at its heuristic config (BLOCK_F=2048,
ROWS=1, num_warps=8, tile layout; elementwise, so every config gives the same bits) computing
``bf16(bf16(silu(g)) * u)`` with silu evaluated as ``g / (1 + exp(-g))`` in fp32. Its tile kernel (as of commit
0dffabf) is copied below, so this module's source hash (pinned in every record) covers the consumer too;
tests/interp/test_lora_consumer.py checks that the copy gives the current swiglu template's bits. The reference
therefore runs on CUDA or under TRITON_INTERPRET=1 only.

Class ``bitwise``: a fused kernel must round the sum to bf16 before silu and the product, exactly like the unfused
path. Bytes (compulsory): read base and lora (2 * R*2F bf16), write R*F bf16 -> 10*R*F.
Layouts (same values): 0 contiguous base and lora (two GEMM outputs); 1 padded row strides (2F + 24, 2F + 40)
at 16-byte storage offsets; 2 odd row strides (2F + 3, 2F + 5) at odd offsets (unaligned pointers).
Huge shape: rows 80,000 (base and lora: 2.29e9 elements each > 2**31, 4.6 GB each); bitwise against the
reference (whose consumer kernel indexes rows in int64); 18 GB peak on the H200.
"""

from __future__ import annotations

import random

import torch
import triton
import triton.language as tl

from rsi.contract import Bitwise, OpGroup, Shape
from rsi.refs import swiglu as S
from rsi.refs.common import ALL_SPECIALS, BF16, padded_rows, randn

OP = "lora_consumer"
FFN = 14336
CONSUMER = "rsi/templates/swiglu.py tile kernel (FLAT=0) at its heuristic config"
CONSUMER_CONFIG = {"BLOCK_F": 2048, "ROWS": 1, "num_warps": 8, "EVICT": ""}
LORA_SCALE = 0.05  # LoRA branch output relative to the base branch (a trained adapter's update is small)
SCHEMA = "(Tensor base, Tensor lora) -> Tensor"


# ---- copy of rsi/templates/swiglu.py's tile kernel at 0dffabf (the unfused consumer) --------------------------
@triton.jit
def _swiglu_kernel(x_ptr, out_ptr, n_rows, n_cols, stride_x, stride_out,
                   BLOCK_F: tl.constexpr, ROWS: tl.constexpr, EVICT: tl.constexpr):
    pid_r = tl.program_id(0)
    pid_c = tl.program_id(1)
    rows = pid_r * ROWS + tl.arange(0, ROWS)
    cols = pid_c * BLOCK_F + tl.arange(0, BLOCK_F)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    row_off = rows[:, None].to(tl.int64)
    g_ptrs = x_ptr + row_off * stride_x + cols[None, :]
    g = tl.load(g_ptrs, mask=mask, other=0.0, eviction_policy=EVICT).to(tl.float32)
    u = tl.load(g_ptrs + n_cols, mask=mask, other=0.0, eviction_policy=EVICT).to(tl.float32)
    s = (g / (1.0 + tl.exp(-g))).to(tl.bfloat16).to(tl.float32)
    o_ptrs = out_ptr + row_off * stride_out + cols[None, :]
    tl.store(o_ptrs, (s * u).to(tl.bfloat16), mask=mask)
# ---- end of copy ----------------------------------------------------------------------------------------------


def swiglu_consumer(x: torch.Tensor) -> torch.Tensor:
    """The unfused consumer: the swiglu template's launch at its heuristic config. x: [R, 2F] -> [R, F]."""
    n_rows = x.shape[0]
    n_cols = x.shape[1] // 2
    out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    c = CONSUMER_CONFIG
    grid = (triton.cdiv(n_rows, c["ROWS"]), triton.cdiv(n_cols, c["BLOCK_F"]))
    _swiglu_kernel[grid](x, out, n_rows, n_cols, x.stride(0), out.stride(0),
                         BLOCK_F=c["BLOCK_F"], ROWS=c["ROWS"], EVICT=c["EVICT"], num_warps=c["num_warps"])
    return out


def reference(base: torch.Tensor, lora: torch.Tensor) -> torch.Tensor:
    """base, lora: [R, 2F] bf16 -> [R, F] bf16 = swiglu_consumer(torch.add(base, lora))."""
    # contiguous: the consumer kernel assumes unit column stride (a no-op for the usual contiguous fc1 outputs)
    return swiglu_consumer(torch.add(base, lora).contiguous())


def make_inputs(shape: Shape, seed: int, device, layout: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    rows, ffn = shape.dims["rows"], shape.dims["ffn"]
    base = randn((rows, 2 * ffn), seed, device, BF16, scale=2.0)
    lora = randn((rows, 2 * ffn), seed + 1, device, BF16, scale=2.0 * LORA_SCALE)
    if layout == 1:
        return padded_rows(base, 24, 8), padded_rows(lora, 40, 16)
    if layout == 2:
        return padded_rows(base, 3, 1), padded_rows(lora, 5, 3)
    return base, lora


def dims_of(args: tuple) -> dict[str, int]:
    """base: [R, 2F] -> rows, ffn."""
    return {"rows": args[0].shape[0], "ffn": args[0].shape[1] // 2}


def fake(base, lora):
    return base.new_empty((base.shape[0], base.shape[1] // 2))


def bytes_moved(shape: Shape) -> int:
    return 10 * shape.dims["rows"] * shape.dims["ffn"]


def flops(shape: Shape) -> int:
    """The add (one per [R, 2F] element) then swiglu's 5 per output element: 7 per output element."""
    return 7 * shape.dims["rows"] * shape.dims["ffn"]


def sample_shapes(rng: random.Random, backend: str, n: int) -> list[Shape]:
    return S.sample_shapes(rng, backend, n)  # fc1's [gate | up] output, as swiglu


def _shape(name: str, rows: int, ffn: int = FFN) -> Shape:
    return Shape(name, {"rows": rows, "ffn": ffn})


OP_GROUP = OpGroup(
    name=OP,
    reference=reference,
    oracle=reference,
    make_inputs=make_inputs,
    tolerance=Bitwise(),
    shapes=(_shape("stage1", 10250), _shape("per_rank", 9562), _shape("full", 38248)),
    odd_shapes=(_shape("one_row", 1), _shape("odd_rows", 1001), _shape("odd_ffn", 37, 1000)),
    interp_shapes=(_shape("tiny", 3, 96), _shape("odd", 17, 200), _shape("pow2", 8, 256)),
    special_cases=ALL_SPECIALS,
    bytes_moved=bytes_moved,
    flops=flops,
    input_names=("base", "lora"),
    template="lora_consumer",
    notes="fc1 base + LoRA branch outputs, sum rounded to bf16, then SwiGLU; bitwise vs add + swiglu template",
    n_layouts=3,
    sample_shapes=sample_shapes,
    huge_shapes=(_shape("huge", 80000),),
    dims_of=dims_of,
    fake=fake,
    schema=SCHEMA,
)
