"""Parametric Triton template for ``head_merge`` (searched by the offline proposer): a bitwise layout copy.

out[s, (w*h + j)*D + d] = x[w, s, j, d]  for x: [W, S, h, D] as received from the all-to-all
(rsi/refs/head_merge.py; vllm-omni ``merge_ulysses_heads``). Work is split over destination head rows
p = (s*W + w)*h + j in output order: one program copies BLOCK_P rows of D elements, BLOCK_P*D contiguous output
elements, reading each from x through its strides. Values are moved as bf16 bits (no conversion), so NaN payloads
survive. Bytes: read and write W*S*h*D bf16 once.
Config: BLOCK_P (head rows per program), num_warps, EVICT (policy of the streaming loads), CONST (1: world size
and heads per rank are compile-time constants, one kernel per layout, as Inductor specializes them).
"""

import triton
import triton.language as tl

from rsi import kernel as K


@triton.jit
def _head_merge_kernel(x_ptr, out_ptr, n_slots, world, heads_per_rank, s_w, s_s, s_h, s_d,
                       D: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_P: tl.constexpr, EVICT: tl.constexpr,
                       WORLD: tl.constexpr, HPR: tl.constexpr):
    p = tl.program_id(0).to(tl.int64) * BLOCK_P + tl.arange(0, BLOCK_P)  # destination head row (s, w, j)
    pmask = p < n_slots
    if WORLD > 0:  # CONST = 1: world and heads per rank compiled in, so / and % become multiply-shifts
        j = p % HPR
        sw = p // HPR
        w = sw % WORLD
        s = sw // WORLD
    else:
        j = p % heads_per_rank
        sw = p // heads_per_rank
        w = sw % world
        s = sw // world
    d = tl.arange(0, BLOCK_D)
    m = pmask[:, None] & (d[None, :] < D)
    x = tl.load(x_ptr + (w * s_w + s * s_s + j * s_h)[:, None] + d[None, :] * s_d, mask=m, eviction_policy=EVICT)
    tl.store(out_ptr + (p * D)[:, None] + d[None, :], x, mask=m)


def launch(x, BLOCK_P=32, num_warps=4, EVICT="", CONST=0):
    world, n_rows, heads_per_rank, head_dim = x.shape
    out = K.empty((n_rows, world * heads_per_rank * head_dim), dtype=x.dtype, device=x.device)
    n_slots = n_rows * world * heads_per_rank
    grid = (triton.cdiv(n_slots, BLOCK_P),)
    _head_merge_kernel[grid](x, out, n_slots, world, heads_per_rank, x.stride(0), x.stride(1), x.stride(2),
                             x.stride(3), D=head_dim, BLOCK_D=triton.next_power_of_2(head_dim), BLOCK_P=BLOCK_P,
                             EVICT=EVICT, WORLD=world if CONST else 0, HPR=heads_per_rank if CONST else 0,
                             num_warps=num_warps)
    return out
