"""Sol-Attn block-sparse attention over packed documents (approximate class): the refiner's video self-attention
in the runtime's ``--attention sol`` (runtime/attention.py).

Sol-Attn as the Sol-H3 report describes it: per query block, block scores against every key block of the document
from pooled (mean) q and k, the threshold mu + tau * sigma of that query block's scores, attention only to the key
blocks at or above it; the prefix (sink) blocks are always kept; tau follows the schedule 1.0, 1.25, 1.5 over the
three refiner updates (the runtime's concern: tau is an input). Measured in the report on the H200 with
FlexAttention block masks keeping ~27% of the 128 x 128 blocks: 2.98 ms against 6.24 ms for cuDNN dense attention
at the LTX-2 refiner shape (32 heads, 16,128 rows).

Signature: ``reference(q, k, v, cu_seqlens, tau, sink_rows, block=BLOCK)`` -> ``(out, mask)``. q, k, v: [S, H, D]
bf16, any strides (D = 128 in the op group's shapes; reference, selection and oracle take any D, scale
1/sqrt(D)); cu_seqlens: int32 [n_docs + 1] as in rsi.refs.attention (non-decreasing 0 .. S, empty documents
allowed); tau: Python float; sink_rows: Python int. out: contiguous [S, H, D] bf16; mask: contiguous bf16 0/1
[H, QB, KB], QB = cdiv(S, block) + n_docs - 1, KB = cdiv(S, block) (``mask_shape``: sizes only): row g is the
g-th query block counting the documents' blocks one after another, column j that document's key block j; columns
past the document's blocks and rows past the last query block are 0. ``block`` (module constant ``BLOCK`` = 128)
is the selection block for queries and keys, aligned to each document's start (the last block of a document may
be partial); the op group's shapes use 128, the runtime's tiny CPU models pass a smaller one.

Selection (``select_blocks`` -> per document bool [H, nQB, nKB]; ``keep_blocks`` is the rule), in fp64: per
document [a, b) and head, pooled q and k of each block = fp64 sum of its valid rows / their count; score[i, j] =
pooled_q[i] . pooled_k[j] / sqrt(D); per query block i, mu = mean_j score[i, j] and sigma = sqrt(mean_j (score[i, j]
- mu)^2) (population), thr = mu + fp32(tau) * sigma (``tau32``: a Triton kernel receives a Python float as an fp32
scalar; the schedule's values are exact in fp32). Key block j is kept when NOT (score < thr), when it overlaps the
document's first sink_rows rows (j * block < sink_rows), or when it is the row's argmax (the first index of the
maximum), so no query block is empty. A row with a non-finite score (NaN or Inf in a pooled q or k) has a NaN
threshold: every block is kept (dense for that query block), so NaN and Inf propagate as in dense attention.
Why fp64 and why the mask is an output: the selection is a discontinuous function of the scores, so a kernel must
reproduce it on the judge's inputs. In fp32 a reordered sum (a Triton reduction tree against torch's matmul) moves
a score by ~1e-7 of its size and flips a block whose score lies that close to the threshold: ~1e-6 of the pairs,
i.e. about one flip a call at ltx_video (5e5 scores) and several at h3_full (5e6). In fp64 the same reordering moves
it by ~1e-14: a flip has a chance of order 1e-14 per score, never in practice; the template's interpreter-run
(numpy-order) selection and an independent fp64 implementation (index_add pooling, einsum scores) give the
reference's mask bit for bit on every trial of the tests. The one structural tie is harmless: with two key blocks
the larger score sits exactly at mu + 1.0 * sigma, and it is kept anyway as the argmax. Equal scores (all-zero
blocks) are exact in any order: zeros keep every block (sigma = 0). Returning the mask makes the selection
checkable and every verdict's density recordable (``mask_density`` of the candidate's output 1, equal to
``density(*inputs)`` of the judge-side reference), and gives a kernel a place to keep its selection between launches
(the judge allows no scratch memory beyond the outputs).

Attention: per document and query block (the chunk of ``attention``'s reference is the selection block here):
``softmax(q k^T / sqrt(D))`` over the keys of the kept blocks only (-inf elsewhere), fp32, operands made contiguous
first (the bits do not depend on the layout; TF32 off on CUDA), ``p @ v`` in fp32, rounded to bf16 once. With every
block kept it is bitwise ``rsi.refs.attention.reference`` (tests).

Oracle: output 0 the exact op, dense attention in fp64 (``dense_fp64``: rsi.refs.attention.oracle's computation for
any D, bitwise equal to it at D = 128); output 1 the selection itself (the exact op has none; the declared one is
already fp64). Class ``approximate`` (rsi.contract.Approximate): rel-L2 <= 1.0, cosine >= 0.6, max-abs <= 2.0 x
max|oracle| against the exact op, and no lossier than 1.1 x the reference's rel-L2 + 2e-3. Measured on the CPU (the
reference against the fp64 dense oracle, structured inputs below): interpreter shapes over 350 seeds, rel-L2
0.04-0.42 (typically 0.10-0.18), cosine >= 0.908, max-abs fraction <= 1.11; special cases (40 seeds each): large
(one-hot attention) rel-L2 <= 0.60, cosine >= 0.814, fraction <= 1.33; zero_prefix <= 0.52 / 0.871 / 1.38;
nonfinite (finite entries) <= 0.31 / 0.95 / 1.04; zeros 0 (dense). Mid-size: 4,096 rows x 4 heads, 1 document, tau
1.25 (density 0.15-0.16): rel-L2 0.11-0.12; 2,048 x 4, 2 documents, tau 1.5, 512 sink rows (density 0.35-0.39):
0.17-0.19; large there <= 0.39, cosine >= 0.925. The absolute bounds sit ~1.5-1.7x beyond the worst of those
(heavy tails: a short document of a few blocks at tau 1.5 keeps little), so they bind only on broken kernels; the
binding check is the factor: with the mask compared, an honest kernel differs from the reference only by its
attention arithmetic (the template: bf16 P, 1e-3 rel-L2 from the reference, 1.0000x its error against the exact
op), while a cruder selection fails it: keeping only the argmax block, dropping the sink or ignoring documents
(the output alone judged) fails 80-100% of single interpreter trials (30 seeds a shape; the others are trials
where the rule itself kept little more), and a judge run has 15; at the mid-size shapes argmax-only erred 1.9-2.9x
and no-sink 1.9-2.7x the reference. Output 1 under the same class: its reference error is 0, so rel-L2 <= 2e-3
allows at most 4e-6 of the kept pairs to differ (none at the interpreter shapes or ltx_video, <= 7 of ~1.8 M at
h3_full) and the mask is exact in practice.

Inputs (``structured_qkv``): random Gaussian q and k give a flat softmax (every block about equally relevant), where
any sparse rule errs by ~sqrt(1 - density) and the bounds could not tell a sparser kernel from an honest one. The
trials carry the structure video attention has: per head 8 content clusters over segments of 192-512 rows (rows of
one cluster share a unit direction worth a logit of 6 and a value vector), a positional part (a sum of 32 random
cosines of the row distance, logit 3 at distance 0, fading beyond ~100 rows; values get a smooth positional part
too), N(0, 1) noise on q, k and v, and sink rows (the first sink_rows of each document) whose keys are N(0, 2.3^2)
with their own values: peaked logits whose pooled score sits near the mean, so only the sink rule keeps them. Same
values in every layout (rsi.refs.attention.make_inputs' layouts and cu_seqlens, values replaced).

tau and sink_rows (``schedule``): h3_stage1 and h3_full tau 1.0 with 512 sink rows (H3's text rows start the first
document; the sink applies to the start of every document, the pad document is one block anyway), ltx_video tau
1.0 and no sink (the refiner's video self-attention has no text rows; its text is cross-attention); odd shapes
tau 1.0 / 1.25 / 1.5; interpreter shapes 640 rows x 2 heads in 2 documents (tau 1.0, sink 64), 1,024 x 1 in 1
(tau 1.0, no sink), 768 x 1 in 3 (tau 1.5, sink 200: two blocks); drawn shapes TAUS[rows % 3], 512 sink rows with
>= 2 documents. Shapes, layouts and the huge shape as attention's (tau and sink_rows are not dispatch keys).

Special cases: zeros, zero_prefix, large (attention's: q x 1e4, k x 1e-4, v x 1e4) and nonfinite (NaN and +-Inf in
q, k and v). Subnormal is left out: its
q . k underflows to 0 in the fp32 attention (uniform weights over the kept keys), while the fp64 selection still
sees structure and keeps a fraction of the blocks, so the reference errs by ~1 against the exact op (a uniform
average over every key): the case would test the approximation, not the kernel.

FLOPs: 0 (the physics gate skips): the work depends on the selection, which the Shape does not fix; the densest
case is attention's dense count and the sparsest one block per query block (the argmax). ``flops_kind`` "tensor"
for a count added later. Bytes: q and k read whole (the pooling), out and the mask written, cu_seqlens; v is not
counted (only kept blocks are read): a lower bound, and the bandwidth gate never binds.
"""

from __future__ import annotations

import itertools
import math
import random

import torch

from rsi.contract import Approximate, OpGroup, Shape
from rsi.refs import attention as dense
from rsi.refs.attention_baselines import SOL_BASELINES
from rsi.refs.common import BF16, drawn, generator, randn

OP = "sol_attn"
BLOCK = 128           # selection block (query and key rows), aligned to each document's start
HEAD_DIM = 128        # the op group's shapes; reference, selection and oracle take any head dim
SINK_H3 = 512         # text rows at the start of an H3 document (always-kept prefix)
SCHEMA = ("(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens, float tau, int sink_rows) -> (Tensor, Tensor)")


# ------------------------------------------------------------------------------------------------- selection
def mask_shape(n_rows: int, n_heads: int, n_docs: int, block: int = BLOCK) -> tuple[int, int, int]:
    """[H, QB, KB]: QB = cdiv(S, block) + n_docs - 1 bounds the query blocks of all documents, KB = cdiv(S, block)
    the key blocks of the longest one (sizes only: the fake and a kernel's host code need no cu_seqlens)."""
    nb = -(-n_rows // block)
    return n_heads, nb + max(n_docs - 1, 0), nb


def tau32(tau: float) -> float:
    """tau as the selection uses it: rounded to fp32 (a Triton kernel receives a Python float as an fp32 scalar)."""
    return float(torch.tensor(float(tau), dtype=torch.float32))


def _pooled(x: torch.Tensor, a: int, b: int, block: int) -> torch.Tensor:
    """Rows [a, b) of x [S, H, D] pooled per block of ``block`` rows from a: fp64 [H, nB, D] = sum / row count."""
    n = b - a
    nb = -(-n // block)
    xd = dense._heads_first(x, a, b, torch.float64)                     # [H, n, D]
    padded = xd.new_zeros((xd.shape[0], nb * block, xd.shape[2]))
    padded[:, :n] = xd
    counts = torch.full((nb,), float(block), dtype=torch.float64, device=x.device)
    counts[-1] = n - (nb - 1) * block
    return padded.view(xd.shape[0], nb, block, xd.shape[2]).sum(2) / counts[None, :, None]


def doc_scores(q, k, a: int, b: int, block: int = BLOCK) -> torch.Tensor:
    """fp64 [H, nQB, nKB] block scores of the document [a, b): pooled q . pooled k / sqrt(D)."""
    pq, pk = _pooled(q, a, b, block), _pooled(k, a, b, block)
    return torch.matmul(pq, pk.transpose(1, 2)) / math.sqrt(q.shape[2])


def keep_blocks(s: torch.Tensor, tau: float, sink_rows: int, block: int = BLOCK) -> torch.Tensor:
    """The rule on fp64 scores [..., nKB] (module docstring) -> bool of the same shape."""
    mu = s.mean(-1, keepdim=True)
    sigma = (s - mu).square().mean(-1, keepdim=True).sqrt()
    keep = ~(s < mu + tau32(tau) * sigma)          # non-finite scores make the threshold NaN: every block kept
    keep |= torch.arange(s.shape[-1], device=s.device) * block < sink_rows
    keep.scatter_(-1, s.argmax(-1, keepdim=True), True)
    return keep


def select_blocks(q, k, cu_seqlens, tau: float, sink_rows: int, block: int = BLOCK) -> list[torch.Tensor]:
    """Per document of cu_seqlens: bool [H, nQB, nKB], nQB = nKB = cdiv(n_doc, block) ([H, 0, 0] when empty)."""
    H = q.shape[1]
    out = []
    for a, b in itertools.pairwise(dense._bounds(cu_seqlens)):
        if b <= a:
            out.append(torch.zeros((H, 0, 0), dtype=torch.bool, device=q.device))
        else:
            out.append(keep_blocks(doc_scores(q, k, a, b, block), tau, sink_rows, block))
    return out


def selection_mask(q, k, cu_seqlens, tau: float, sink_rows: int, block: int = BLOCK) -> torch.Tensor:
    """The selection as the op's second output: bf16 0/1 [H, QB, KB] (``mask_shape``); the query blocks of the
    documents one after another, columns past a document's key blocks and rows past the last query block 0."""
    S, H, _ = q.shape
    mask = torch.zeros(mask_shape(S, H, cu_seqlens.shape[0] - 1, block), dtype=BF16, device=q.device)
    g = 0
    for sel in select_blocks(q, k, cu_seqlens, tau, sink_rows, block):
        _, nqb, nkb = sel.shape
        mask[:, g:g + nqb, :nkb] = sel.to(BF16)
        g += nqb
    return mask


def density(q, k, cu_seqlens, tau: float, sink_rows: int, block: int = BLOCK) -> float:
    """Kept (query block, key block) pairs over all pairs within documents, summed over heads (1.0 if none)."""
    sel = select_blocks(q, k, cu_seqlens, tau, sink_rows, block)
    total = sum(s.numel() for s in sel)
    return sum(int(s.sum()) for s in sel) / total if total else 1.0


def mask_density(mask: torch.Tensor, cu_seqlens, block: int = BLOCK) -> float:
    """density() read from the op's second output (what a record or the runtime logs without recomputing)."""
    total = sum((-(-(b - a) // block)) ** 2 for a, b in itertools.pairwise(dense._bounds(cu_seqlens)))
    return float(mask.double().sum()) / (total * mask.shape[0]) if total else 1.0


# ------------------------------------------------------------------------------------------------- attention
def _sparse(q, k, v, cu_seqlens, tau, sink_rows, block, dtype, emit):
    """Per document and query block: emit(a, b, p [H, m, n], v_doc) with p = softmax over the kept key blocks."""
    scale = 1.0 / math.sqrt(q.shape[2])
    for (a, b), sel in zip(itertools.pairwise(dense._bounds(cu_seqlens)),
                           select_blocks(q, k, cu_seqlens, tau, sink_rows, block)):
        if b <= a:
            continue
        kd, vd = dense._heads_first(k, a, b, dtype), dense._heads_first(v, a, b, dtype)
        cols = torch.arange(b - a, device=q.device) // block                  # key row -> its block
        for i, c in enumerate(range(a, b, block)):
            e = min(c + block, b)
            s = torch.matmul(dense._heads_first(q, c, e, dtype), kd.transpose(1, 2)).mul_(scale)
            s.masked_fill_(~sel[:, i, cols][:, None, :], -math.inf)
            emit(c, e, torch.softmax(s, dim=-1), vd)


def reference(q, k, v, cu_seqlens, tau, sink_rows, block: int = BLOCK):
    """q, k, v [S, H, D] bf16, cu_seqlens int32 [n_docs + 1], tau float, sink_rows int -> (out [S, H, D] bf16,
    mask [H, QB, KB] bf16 0/1): fp32 attention over the kept blocks, one rounding; the fp64 selection."""
    S, H, D = q.shape
    out = torch.empty((S, H, D), dtype=BF16, device=q.device)

    def emit(a, b, p, vd):
        out[a:b] = torch.matmul(p, vd).transpose(0, 1).to(BF16)

    with dense._no_tf32():
        _sparse(q, k, v, cu_seqlens, tau, sink_rows, block, torch.float32, emit)
    return out, selection_mask(q, k, cu_seqlens, tau, sink_rows, block)


def dense_fp64(q, k, v, cu_seqlens) -> torch.Tensor:
    """The exact op: dense attention per document in fp64, scale 1/sqrt(D) (rsi.refs.attention.oracle's
    computation, which fixes D = 128; bitwise equal to it there, tests/interp/test_sol_attn.py)."""
    S, H, D = q.shape
    scale = 1.0 / math.sqrt(D)
    out = torch.zeros((S, H, D), dtype=torch.float64, device=q.device)
    for a, b in itertools.pairwise(dense._bounds(cu_seqlens)):
        if b <= a:
            continue
        kd, vd = dense._heads_first(k, a, b, torch.float64), dense._heads_first(v, a, b, torch.float64)
        for c in range(a, b, dense.CHUNK):
            e = min(c + dense.CHUNK, b)
            s = torch.matmul(dense._heads_first(q, c, e, torch.float64), kd.transpose(1, 2)).mul_(scale)
            out[c:e] = torch.matmul(torch.softmax(s, dim=-1), vd).transpose(0, 1)
    return out


def oracle(q, k, v, cu_seqlens, tau, sink_rows, block: int = BLOCK):
    """(the exact dense attention in fp64, the selection as fp64 0/1): the exact op has no selection, so the
    selection's oracle is the declared one (the reference's, computed in fp64 already)."""
    return dense_fp64(q, k, v, cu_seqlens), selection_mask(q, k, cu_seqlens, tau, sink_rows, block).double()


# ------------------------------------------------------------------------------------------------- inputs
N_CLUSTERS = 8            # content clusters per head
SEGMENT = (192, 512)      # rows per same-cluster segment (drawn per head)
CLUSTER_LOGIT = 6.0       # q.k / sqrt(D) between two rows of one cluster (before noise)
LOCAL_LOGIT = 3.0         # q.k / sqrt(D) between a row and itself from the positional part
LOCAL_WIDTH = 96.0        # rows: the positional part's correlation falls to ~0 beyond ~this distance
N_FREQ = 32               # positional frequencies (2 * N_FREQ feature dims)
SINK_K = 2.3              # std of the sink rows' keys (no cluster, no position)
V_CLUSTER, V_LOCAL, V_SINK = 1.0, 0.5, 1.0


def structured_qkv(S: int, H: int, D: int, cu: list[int], sink_rows: int, seed: int, device):
    """q, k, v [S, H, D] bf16 with the structure of video attention (module docstring)."""
    q = randn((S, H, D), seed, device, torch.float32)
    k = randn((S, H, D), seed + 1, device, torch.float32)
    v = randn((S, H, D), seed + 2, device, torch.float32)
    g = generator(seed + 3, device)
    pos = torch.cat([torch.arange(b - a, device=device, dtype=torch.float32)
                     for a, b in itertools.pairwise(cu)])                               # [S] row within document
    # clusters: segments of seglen rows (per head, random phase) take a random cluster each
    lo, hi = SEGMENT
    centers = torch.nn.functional.normalize(torch.randn((H, N_CLUSTERS, D), generator=g, device=device), dim=-1)
    values = torch.randn((H, N_CLUSTERS, D), generator=g, device=device) * V_CLUSTER
    seglen = torch.randint(lo, hi + 1, (H, 1), generator=g, device=device).float()
    phase = torch.rand((H, 1), generator=g, device=device) * seglen
    seg = ((pos[None, :] + phase) / seglen).floor().long()                            # [H, S]
    n_seg = (max((b - a for a, b in itertools.pairwise(cu)), default=0) + hi) // lo + 1
    cid = torch.randint(0, N_CLUSTERS, (H, n_seg), generator=g, device=device).gather(1, seg)[:, :, None]
    c = centers.gather(1, cid.expand(H, S, D)) * math.sqrt(CLUSTER_LOGIT * math.sqrt(D))
    q.add_(c.transpose(0, 1))
    k.add_(c.transpose(0, 1))
    v.add_(values.gather(1, cid.expand(H, S, D)).transpose(0, 1))
    # positional part: sum of N_FREQ random cosines of the row distance, on 2 * N_FREQ random signed dims
    omega = torch.rand((H, N_FREQ), generator=g, device=device) * (math.pi / LOCAL_WIDTH)
    shift = torch.rand((H, N_FREQ), generator=g, device=device) * (2 * math.pi)
    dims = torch.rand((H, D), generator=g, device=device).argsort(-1)[:, :2 * N_FREQ]   # [H, 2F] distinct dims
    sign = torch.randint(0, 2, (H, 2 * N_FREQ), generator=g, device=device).float() * 2 - 1
    vproj = torch.randn((H, 2 * N_FREQ, D), generator=g, device=device) * V_LOCAL
    ang = pos[None, :, None] * omega[:, None, :] + shift[:, None, :]                   # [H, S, F]
    feat = torch.cat([ang.cos(), ang.sin()], -1) / math.sqrt(N_FREQ)                  # [H, S, 2F], |feat| = 1
    qk_pos = torch.zeros((H, S, D), device=device)
    qk_pos.scatter_(2, dims[:, None, :].expand(H, S, 2 * N_FREQ), feat * sign[:, None, :])
    qk_pos = qk_pos.mul_(math.sqrt(LOCAL_LOGIT * math.sqrt(D))).transpose(0, 1)
    q.add_(qk_pos)
    k.add_(qk_pos)
    v.add_(torch.matmul(feat, vproj).transpose(0, 1))
    # sink rows: keys of large random norm (peaked logits, pooled score near the mean), values their own
    for a, b in itertools.pairwise(cu):
        e = min(a + sink_rows, b)
        if e > a:
            k[a:e] = randn((e - a, H, D), seed + 4 + a, device, torch.float32, SINK_K)
            v[a:e] = randn((e - a, H, D), seed + 5 + a, device, torch.float32, V_SINK)
    return q.to(BF16), k.to(BF16), v.to(BF16)


SCHEDULE = {   # shape name -> (tau, sink_rows)
    "h3_stage1": (1.0, SINK_H3), "h3_full": (1.0, SINK_H3), "ltx_video": (1.0, 0),
    "one_row": (1.0, SINK_H3), "three_docs": (1.25, SINK_H3), "odd_ltx": (1.5, 0),
    "interp_two_docs": (1.0, 64), "interp_one_doc": (1.0, 0), "interp_three_docs": (1.5, 200),
    "huge": (1.25, SINK_H3),
}
TAUS = (1.0, 1.25, 1.5)   # the refiner's per-step schedule


def schedule(shape: Shape) -> tuple[float, int]:
    """(tau, sink_rows) of a trial: fixed per named shape; a drawn shape takes TAUS[rows % 3] and H3's 512 text
    rows when it has >= 2 documents (H3 packs [text | video | ...] + a pad document), else 0 (LTX video)."""
    if shape.name in SCHEDULE:
        return SCHEDULE[shape.name]
    return TAUS[shape.dims["rows"] % 3], SINK_H3 if shape.dims["docs"] >= 2 else 0


def make_inputs(shape: Shape, seed: int, device, layout: int = 0):
    """q, k, v in attention's layouts (rsi.refs.attention.make_inputs, values replaced by ``structured_qkv``),
    its cu_seqlens, then tau and sink_rows from ``schedule``."""
    S, H = shape.dims["rows"], shape.dims["heads"]
    tau, sink = schedule(shape)
    q, k, v, cu_t, _cu_k = dense.make_inputs(shape, seed, device, layout=layout)   # one cu_seqlens here
    sq, sk, sv = structured_qkv(S, H, HEAD_DIM, dense.doc_bounds(shape, seed), sink, seed, device)
    q.copy_(sq)
    k.copy_(sk)
    v.copy_(sv)
    return q, k, v, cu_t, tau, sink


def dims_of(args: tuple) -> dict[str, int]:
    """q: [S, H, D], cu_seqlens: [n_docs + 1] -> rows, heads, docs (tau and sink_rows are not dispatch keys: a kernel
    serves every step of the schedule)."""
    return dense.self_dims_of(args)


def fake(q, k, v, cu_seqlens, tau, sink_rows):
    return q.new_empty(q.shape), q.new_empty(mask_shape(q.shape[0], q.shape[1], cu_seqlens.shape[0] - 1),
                                             dtype=BF16)


def bytes_moved(shape: Shape) -> int:
    """q and k read whole (the pooling), out and the mask written, cu_seqlens; v not counted: only kept blocks are
    read and the rule may keep one block per query block (a lower bound)."""
    S, H, n = shape.dims["rows"], shape.dims["heads"], shape.dims["docs"]
    _, qb, kb = mask_shape(S, H, n)
    return 6 * S * H * HEAD_DIM + 2 * H * qb * kb + 4 * (n + 1)


def flops(shape: Shape) -> int:
    """0: the work depends on the selection, which the Shape does not fix (docstring); the FLOP/s gate skips."""
    return 0


def sample_shapes(rng: random.Random, backend: str, n: int) -> list[Shape]:
    return drawn(rng, backend, n, dense.sample_self_dims)


def _shape(name: str, rows: int, heads: int, docs: int) -> Shape:
    return Shape(name, {"rows": rows, "heads": heads, "docs": docs})


SPECIALS = tuple(sc for sc in dense.SPECIAL_CASES if sc.name != "subnormal")

OP_GROUP = OpGroup(
    name=OP,
    reference=reference,
    oracle=oracle,
    make_inputs=make_inputs,
    tolerance=Approximate(max_rel_l2=1.0, min_cosine=0.6, max_abs_frac=2.0, factor=1.1, floor_rel_l2=2e-3),
    baselines=SOL_BASELINES,
    reference_timed=False,  # fp32/fp64 reference ~0.1-1 s per call; the incumbents bind
    heavy_shapes=("h3_full",),   # seeds and refill only there; specials and layouts at the other shapes
    shapes=(
        _shape("h3_stage1", 10304, dense.H3_HEADS, 2),   # 10,250 used rows (512 text first) + pad document
        _shape("h3_full", 38272, dense.H3_HEADS, 2),     # 38,248 used rows + pad document
        _shape("ltx_video", 16128, dense.LTX_HEADS, 1),  # LTX-2 refiner video self-attention (Sol-H3's 2.98 ms)
    ),
    odd_shapes=(_shape("one_row", 1, dense.H3_HEADS, 1), _shape("three_docs", 1001, dense.H3_HEADS, 3),
                _shape("odd_ltx", 4099, dense.LTX_HEADS, 1)),
    interp_shapes=(_shape("interp_two_docs", 640, 2, 2), _shape("interp_one_doc", 1024, 1, 1),
                   _shape("interp_three_docs", 768, 1, 3)),
    special_cases=SPECIALS,
    bytes_moved=bytes_moved,
    flops=flops,
    flops_kind="tensor",
    noncontiguous_inputs=("v",),
    special_inputs=(),
    input_names=("q", "k", "v", "cu_seqlens", "tau", "sink_rows"),
    template="sol_attn",
    notes="Sol-Attn block-sparse attention (approximate class): per document of cu_seqlens, 128-row blocks from the "
          "document start; per (query block, head) keep the key blocks whose fp64 pooled score reaches mu + "
          "fp32(tau) * sigma of the block's scores (NaN threshold: all), the blocks overlapping the first sink_rows "
          "rows and the argmax (first) block; softmax over the kept keys only (fp32, one bf16 rounding). Outputs "
          "(out [S, H, 128] bf16, mask [H, cdiv(S,128) + n_docs - 1, cdiv(S,128)] bf16 0/1). Judged against the "
          "exact dense attention (fp64) and, output 1, the reference's fp64 selection: rel-L2 <= 2e-3, i.e. the "
          "mask is exact up to 4e-6 of the kept pairs. Density of a verdict: rsi.refs.sol_attn.mask_density(mask, "
          "cu_seqlens) of the candidate's output 1 (== density(*inputs), the judge-side reference's). Inputs with "
          "cluster + locality + sink structure (random q/k give flat attention); the subnormal case is left out "
          "(fp32 logits underflow to a uniform softmax the fp64 selection cannot see); FLOPs 0 (selection-dependent)",
    n_layouts=3,
    sample_shapes=sample_shapes,
    huge_shapes=(_shape("huge", 100352, dense.H3_HEADS, 48),),
    dims_of=dims_of,
    fake=fake,
    schema=SCHEMA,
)
