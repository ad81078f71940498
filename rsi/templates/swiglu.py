"""Parametric Triton template for ``swiglu`` (searched by the offline proposer).

out[r, j] = bf16(bf16(silu(x[r, j])) * x[r, F + j]) for x: [R, 2F] bf16 (fc1 output, [gate | up]).
Each program handles a ROWS x BLOCK_F tile; silu is evaluated in fp32 as g / (1 + exp(-g)) and rounded to bf16
before the product, as the model's eager code rounds it (H3_SPEC.md section 5).
Config: BLOCK_F (columns per program), ROWS (rows per program), num_warps, EVICT ("" or "evict_first").
"""

import torch
import triton
import triton.language as tl


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


def launch(x, BLOCK_F=1024, ROWS=1, num_warps=4, EVICT=""):
    n_rows = x.shape[0]
    n_cols = x.shape[1] // 2
    out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    grid = (triton.cdiv(n_rows, ROWS), triton.cdiv(n_cols, BLOCK_F))
    _swiglu_kernel[grid](x, out, n_rows, n_cols, x.stride(0), out.stride(0),
                         BLOCK_F=BLOCK_F, ROWS=ROWS, EVICT=EVICT, num_warps=num_warps)
    return out
