"""Parametric Triton template for ``lora_consumer`` (searched by the offline proposer).

out[r, j] = bf16(bf16(silu(y[r, j])) * y[r, F + j]),  y = bf16(base + lora)   for base, lora: [R, 2F] bf16
(rsi/refs/lora_consumer.py). The LoRA branch's output is added to the base GEMM's output inside the consumer
(SwiGLU) instead of in a separate kernel: the sum is rounded to bf16 first, exactly as the unfused ``torch.add``
rounds it, and silu is evaluated with the same expression as the swiglu template (``g / (1 + exp(-g))`` in fp32,
rounded to bf16 before the product), so the output is bitwise the unfused path's. One pass: reads base and lora
once, writes out once (10*R*F bytes instead of 16*R*F for add + swiglu). Each program handles a ROWS x BLOCK_F tile.
Config: BLOCK_F (columns per program), ROWS (rows per program), num_warps, EVICT ("" or "evict_first").
"""

import triton
import triton.language as tl

from rsi import kernel as K


@triton.jit
def _lora_swiglu_kernel(base_ptr, lora_ptr, out_ptr, n_rows, n_cols, stride_br, stride_bc, stride_lr, stride_lc,
                        stride_out, BLOCK_F: tl.constexpr, ROWS: tl.constexpr, EVICT: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.program_id(1) * BLOCK_F + tl.arange(0, BLOCK_F)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    row_off = rows[:, None].to(tl.int64)
    b_ptrs = base_ptr + row_off * stride_br + cols[None, :] * stride_bc
    l_ptrs = lora_ptr + row_off * stride_lr + cols[None, :] * stride_lc
    bg = tl.load(b_ptrs, mask=mask, other=0.0, eviction_policy=EVICT).to(tl.float32)
    lg = tl.load(l_ptrs, mask=mask, other=0.0, eviction_policy=EVICT).to(tl.float32)
    bu = tl.load(b_ptrs + n_cols * stride_bc, mask=mask, other=0.0, eviction_policy=EVICT).to(tl.float32)
    lu = tl.load(l_ptrs + n_cols * stride_lc, mask=mask, other=0.0, eviction_policy=EVICT).to(tl.float32)
    g = (bg + lg).to(tl.bfloat16).to(tl.float32)  # the unfused add's bf16 rounding, kept explicitly
    u = (bu + lu).to(tl.bfloat16).to(tl.float32)
    s = (g / (1.0 + tl.exp(-g))).to(tl.bfloat16).to(tl.float32)
    tl.store(out_ptr + row_off * stride_out + cols[None, :], (s * u).to(tl.bfloat16), mask=mask)


def launch(base, lora, BLOCK_F=8192, ROWS=1, num_warps=16, EVICT=""):
    n_rows = base.shape[0]
    n_cols = base.shape[1] // 2
    out = K.empty((n_rows, n_cols), dtype=base.dtype, device=base.device)
    grid = (triton.cdiv(n_rows, ROWS), triton.cdiv(n_cols, BLOCK_F))
    _lora_swiglu_kernel[grid](base, lora, out, n_rows, n_cols, base.stride(0), base.stride(1), lora.stride(0),
                              lora.stride(1), out.stride(0), BLOCK_F=BLOCK_F, ROWS=ROWS, EVICT=EVICT,
                              num_warps=num_warps)
    return out
