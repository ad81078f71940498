"""Parametric Triton template for ``qkv_pack`` (searched by the offline proposer): a bitwise layout copy.

out[w, s, j, c*D:(c+1)*D] = (q, k, v)[c][s, w*h + j, :]  for q, k, v: [S, NH, D] views, h = NH / W
(rsi/refs/qkv_pack.py; vllm-omni ``pack_qkv_destination_major``). Work is split over destination slots
p = (w*S + s)*h + j in output order: one program copies BLOCK_P slots, i.e. BLOCK_P*3*D contiguous output elements,
reading for each slot the three D-element head rows of q, k and v through their strides (contiguous 2*D-byte
segments of the fused qkv row). Values are moved as bf16 bits (no conversion), so NaN payloads survive. All loads
are issued before the stores. Bytes: read and write 3*S*NH*D bf16 once.
Config: BLOCK_P (slots per program), num_warps, EVICT (policy of the streaming loads).
"""

import triton
import triton.language as tl

from rsi import kernel as K


@triton.jit
def _qkv_pack_kernel(q_ptr, k_ptr, v_ptr, out_ptr, n_slots, n_rows, heads_per_rank,
                     sq_s, sq_h, sq_d, sk_s, sk_h, sk_d, sv_s, sv_h, sv_d,
                     D: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_P: tl.constexpr, EVICT: tl.constexpr):
    p = tl.program_id(0).to(tl.int64) * BLOCK_P + tl.arange(0, BLOCK_P)  # destination slot (w, s, j)
    pmask = p < n_slots
    j = p % heads_per_rank
    ws = p // heads_per_rank
    s = ws % n_rows
    head = (ws // n_rows) * heads_per_rank + j
    d = tl.arange(0, BLOCK_D)
    m = pmask[:, None] & (d[None, :] < D)
    xq = tl.load(q_ptr + (s * sq_s + head * sq_h)[:, None] + d[None, :] * sq_d, mask=m, eviction_policy=EVICT)
    xk = tl.load(k_ptr + (s * sk_s + head * sk_h)[:, None] + d[None, :] * sk_d, mask=m, eviction_policy=EVICT)
    xv = tl.load(v_ptr + (s * sv_s + head * sv_h)[:, None] + d[None, :] * sv_d, mask=m, eviction_policy=EVICT)
    out = out_ptr + (p * (3 * D))[:, None] + d[None, :]
    tl.store(out, xq, mask=m)
    tl.store(out + D, xk, mask=m)
    tl.store(out + 2 * D, xv, mask=m)


def launch(q, k, v, world, BLOCK_P=32, num_warps=4, EVICT=""):
    n_rows, n_heads, head_dim = q.shape
    n_world = int(world)  # a plain-int input: the static check admits arithmetic on it only through int()
    heads_per_rank = n_heads // n_world
    out = K.empty((n_world, n_rows, heads_per_rank, 3 * head_dim), dtype=q.dtype, device=q.device)
    n_slots = n_world * n_rows * heads_per_rank
    grid = (triton.cdiv(n_slots, BLOCK_P),)
    _qkv_pack_kernel[grid](q, k, v, out, n_slots, n_rows, heads_per_rank,
                           q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
                           v.stride(0), v.stride(1), v.stride(2),
                           D=head_dim, BLOCK_D=triton.next_power_of_2(head_dim), BLOCK_P=BLOCK_P, EVICT=EVICT,
                           num_warps=num_warps)
    return out
