"""The incumbents of varlen document attention: the SDPA backends one at a time and FlexAttention.

Every function here takes what the attention op groups' references take, ``(q, k, v, cu_seqlens_q, cu_seqlens_k)``
(``attention``: q [S, H, D], k, v [S_k, H, D]) or ``(q, k, v, cu_seqlens)`` (the self-attention groups: the key
documents are the query documents) with bf16 tensors (any strides) and int32 [n_docs + 1] bounds, through a
``prepare`` step that runs outside the timed call (rsi.contract.Baseline), and returns a contiguous [S, H, D] bf16
output.

* ``sdpa_cudnn``, ``sdpa_flash``, ``sdpa_efficient``: runtime/layers.py ``sdpa_documents`` with one SDPA backend
  (``torch.nn.attention.sdpa_kernel``): per document, query rows ``[a, b)`` and key rows ``[ka, kb)`` -> [1, H, n, D]
  views and ``F.scaled_dot_product_attention`` (non-causal, scale 1/sqrt(D)), written into rows [a, b) of the
  output; a query document facing no keys gets zeros (the op's convention; SDPA is not called on it). prepare turns
  the cu_seqlens into the host lists of bounds the runtime already holds. A backend that does not support the
  inputs raises (no fallback inside one baseline); on the CPU, cuDNN and memory-efficient raise and flash runs
  PyTorch's CPU flash kernel.
* ``flex``: ``torch.compile(flex_attention)`` (one compiled function for the process; it compiles once per shape
  and stride pattern, and a new block mask of the same shape does not recompile) on [1, H, S, D] views with a
  document block mask (``doc_q[q] == doc_k[k]``) built by prepare with ``create_block_mask`` (eager: it materializes
  an S x S_k boolean mask once per input set, outside the timed call); the [1, H, S, D] result is copied into the
  contiguous [S, H, D] output inside the timed call. Past dynamo's recompile limit (8 shape and stride patterns)
  the call raises rather than fall back to eager flex_attention.

* ``fa4``: FlashAttention-4's CuTe DSL kernels (the ``flash-attn-4`` package, its SM90 forward on Hopper:
  ``flash_attn.cute.flash_attn_varlen_func`` over cu_seqlens, the op's own [S, H, D] layout), a peer library a
  user could run instead. Not installed by rsi (it needs the CuTe DSL): where it is missing the call raises and the
  judge drops it with that reason.

Shared by every op group over this signature (attention, and the approximate attention groups, whose incumbents
are these exact implementations).

``FP8_BASELINES`` (attention_fp8, on top of ``BASELINES``):

* ``cudnn_fp8``: cuDNN's fused FP8 attention (runtime/attention_fp8_cudnn.py: per-head scales kept through one
  scalar score descale, e4m3 P, bf16 out), what ``--attention fp8`` runs where no verified kernel serves. It raises
  where it cannot run (the CPU, before Hopper, nvidia-cudnn-frontend missing), so the judge drops it there.

``SOL_BASELINES`` (the sol_attn op group, signature ``(q, k, v, cu_seqlens, tau, sink_rows)`` -> ``(out, mask)``):

* ``sol_flex``: what the runtime runs for ``--attention sol`` without a verified kernel, and what the Sol-H3 report
  measured (FlexAttention block masks: 2.98 ms against 6.24 ms for cuDNN dense at the refiner's 16,128 rows, ~27%
  of blocks kept): sol_attn's own fp64 selection (``selection_mask``, inside the timed call: the selection is part
  of the op), then ``flex_block_sparse`` over the kept 128-row blocks. One document only (the refiner's video
  self-attention); more documents raise, so the H3 buckets have no incumbent of this kind.
"""

from __future__ import annotations

import functools
import itertools

import torch
import torch.nn.functional as F

from rsi.contract import Baseline


def _bounds(q, k, v, cu_seqlens) -> tuple:
    return q, k, v, [int(b) for b in cu_seqlens.tolist()]


def _both_bounds(q, k, v, cu_seqlens_q, cu_seqlens_k=None) -> tuple:
    """(q, k, v, query bounds, key bounds) as host lists; one cu_seqlens serves both (self-attention groups)."""
    bq = _bounds(q, k, v, cu_seqlens_q)[3]
    return q, k, v, bq, bq if cu_seqlens_k is None else _bounds(q, k, v, cu_seqlens_k)[3]


def per_document(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bq: list[int], bk: list[int],
                 attend=F.scaled_dot_product_attention) -> torch.Tensor:
    """The op through ``attend`` ([1, H, n, D] x [1, H, n_k, D] -> [1, H, n, D]) once per document: query rows
    [a, b) against key rows [ka, kb) of the host bounds bq, bk -> a new [S, H, D] tensor; a query document without
    keys gets zeros. The SDPA incumbents here and the runtime's sdpa_documents."""
    out = q.new_empty(q.shape)
    for (a, b), (ka, kb) in zip(itertools.pairwise(bq), itertools.pairwise(bk), strict=True):
        if b > a and kb <= ka:
            out[a:b] = 0                                                                # no keys: zeros
        elif b > a:
            o = attend(q[a:b].transpose(0, 1).unsqueeze(0), *(t[ka:kb].transpose(0, 1).unsqueeze(0) for t in (k, v)))
            out[a:b] = o[0].transpose(0, 1)                                           # [n, H, D]
    return out


def _sdpa(backend_name: str):
    def run(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bq: list[int], bk: list[int]) -> torch.Tensor:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel(getattr(SDPBackend, backend_name)):
            return per_document(q, k, v, bq, bk)

    run.__name__ = f"sdpa_{backend_name.lower()}"
    return run


@functools.cache
def _flex_compiled():
    from torch.nn.attention.flex_attention import flex_attention

    return torch.compile(flex_attention, dynamic=False)


def _documents(cu_seqlens: torch.Tensor, device) -> torch.Tensor:
    """int64 [rows]: the document of every row."""
    bounds = cu_seqlens.to(device=device, dtype=torch.int64)
    return torch.repeat_interleave(torch.arange(bounds.numel() - 1, device=device), bounds.diff())


def _flex_prepare(q, k, v, cu_seqlens_q, cu_seqlens_k=None) -> tuple:
    """q, k, v as [1, H, S, D] views and the document block mask of the two cu_seqlens."""
    from torch.nn.attention.flex_attention import create_block_mask

    doc_q = _documents(cu_seqlens_q, q.device)
    doc_k = doc_q if cu_seqlens_k is None else _documents(cu_seqlens_k, q.device)

    def same_document(b, h, q_idx, kv_idx):
        return doc_q[q_idx] == doc_k[kv_idx]

    mask = create_block_mask(same_document, None, None, q.shape[0], k.shape[0], device=q.device)
    return (*(t.transpose(0, 1).unsqueeze(0) for t in (q, k, v)), mask)


def _flex(q4: torch.Tensor, k4: torch.Tensor, v4: torch.Tensor, mask) -> torch.Tensor:
    # past dynamo's recompile limit the call would silently run flex_attention eagerly (unfused, scores
    # materialized) and time something the runtime would not run: raise instead
    with torch._dynamo.config.patch(fail_on_recompile_limit_hit=True):
        o = _flex_compiled()(q4, k4, v4, block_mask=mask)                             # [1, H, S, D]
    return o[0].transpose(0, 1).contiguous()


def _fa4_prepare(q, k, v, cu_seqlens_q, cu_seqlens_k=None) -> tuple:
    def longest(b: torch.Tensor, rows: int) -> int:   # one document: all rows (the op's contract), no read-back
        return rows if b.numel() == 2 else int(b.diff().max()) if b.numel() > 1 else 0

    bq = cu_seqlens_q.to(device=q.device, dtype=torch.int32)
    bk = bq if cu_seqlens_k is None else cu_seqlens_k.to(device=q.device, dtype=torch.int32)
    return q, k, v, bq, bk, longest(bq, q.shape[0]), longest(bk, k.shape[0])


def _fa4(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bq: torch.Tensor, bk: torch.Tensor, longest_q: int,
         longest_k: int) -> torch.Tensor:
    from flash_attn.cute import flash_attn_varlen_func

    r = flash_attn_varlen_func(q, k, v, cu_seqlens_q=bq, cu_seqlens_k=bk, max_seqlen_q=longest_q,
                               max_seqlen_k=longest_k, causal=False)
    out = r[0] if isinstance(r, tuple) else r
    return out.contiguous()


def fa4_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k=None) -> torch.Tensor:
    """``fa4`` in one call on q's device (the runtime's dense path where flash-attn-4 is installed)."""
    with torch.cuda.device(q.device):
        return _fa4(*_fa4_prepare(q, k, v, cu_seqlens_q, cu_seqlens_k))


def flex_block_sparse(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor,
                      block: int = 128) -> torch.Tensor:
    """Block-sparse attention of one document through FlexAttention: q, k, v [S, H, D], keep bool [H, nQB, nKB]
    (query block i attends key block j; sol_attn's mask of one document) -> contiguous [S, H, D]. The kept blocks
    are listed as full blocks (the compiled kernel visits only them and applies no mask inside them); the mask_mod
    says the same per element, which is what eager flex_attention (the CPU) evaluates. Compiled on CUDA."""
    from torch.nn.attention.flex_attention import BlockMask, flex_attention

    S = q.shape[0]
    counts = keep.sum(-1, dtype=torch.int32)[None]                                     # [1, H, nQB]
    order = torch.argsort((~keep).to(torch.int8), dim=-1, stable=True).to(torch.int32)[None]  # kept blocks first

    def mask_mod(b, h, q_idx, kv_idx):
        return keep[h, q_idx // block, kv_idx // block]

    mask = BlockMask.from_kv_blocks(torch.zeros_like(counts), order, counts, order, BLOCK_SIZE=block,
                                    mask_mod=mask_mod, seq_lengths=(S, S))
    q4, k4, v4 = (t.transpose(0, 1).unsqueeze(0) for t in (q, k, v))
    if q.device.type != "cuda":
        o = flex_attention(q4, k4, v4, block_mask=mask)
    else:
        with torch._dynamo.config.patch(fail_on_recompile_limit_hit=True):
            o = _flex_compiled()(q4, k4, v4, block_mask=mask)                         # [1, H, S, D]
    return o[0].transpose(0, 1).contiguous()


def sol_flex(q, k, v, cu_seqlens, tau: float, sink_rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    """sol_attn's (out, mask) with FlexAttention for the sparse part (one document; more raise)."""
    from rsi.refs import sol_attn

    if cu_seqlens.numel() != 2:
        raise ValueError(f"sol_flex serves one document (the refiner's video self-attention), not "
                         f"{cu_seqlens.numel() - 1}")
    mask = sol_attn.selection_mask(q, k, cu_seqlens, tau, sink_rows)
    return flex_block_sparse(q, k, v, mask.bool()), mask


def cudnn_fp8(q, k, v, bounds: list[int]) -> torch.Tensor:
    """attention_fp8 through cuDNN's FP8 SDPA (raises where it cannot run)."""
    from runtime import attention_fp8_cudnn as C

    ok, why = C.available(q.device)
    if not ok:
        raise RuntimeError(f"cudnn_fp8: {why}")
    return C.attention_fp8(q, k, v, bounds)


SOL_BASELINES = (Baseline("sol_flex", sol_flex),)

BASELINES = (
    Baseline("sdpa_cudnn", _sdpa("CUDNN_ATTENTION"), _both_bounds),
    Baseline("sdpa_flash", _sdpa("FLASH_ATTENTION"), _both_bounds),
    Baseline("sdpa_efficient", _sdpa("EFFICIENT_ATTENTION"), _both_bounds),
    Baseline("flex", _flex, _flex_prepare),
    Baseline("fa4", _fa4, _fa4_prepare),
)

FP8_BASELINES = (*BASELINES, Baseline("cudnn_fp8", cudnn_fp8, _bounds))
