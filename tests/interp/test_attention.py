"""attention under the Triton interpreter: the reference and oracle against an independent fp64 computation (one
masked softmax over the whole packed sequence), the runtime's sdpa_documents inside the class, the template at
several configs on every layout and special case, empty documents, cross-attention (other key rows and key
documents, an empty key document), and broken variants (a document that sees another's keys, keys bounded by the
query documents, a missing rescale, a wrong scale, fp8 probabilities) rejected. The heuristic config passes the
real harness in tests/adversarial/test_every_op_group.py."""

from __future__ import annotations

import math

import pytest
import torch

from rsi.contract import Shape
from rsi.harness import check
from rsi.refs import get_op_group
from rsi.spaces import load_space, template_source
from tests.interp.ltx_helpers import module

pytestmark = pytest.mark.interpreter
OP = "attention"
SMALL = [
    {"BLOCK_M": 16, "BLOCK_N": 16, "num_warps": 4, "num_stages": 1, "EXP2": 1, "SPLIT": 1},
    {"BLOCK_M": 32, "BLOCK_N": 16, "num_warps": 4, "num_stages": 2, "EXP2": 0, "SPLIT": 0},
    # the TMA kernel (layouts 0 and 1; layout 2's odd offsets take the pointer kernel)
    {"BLOCK_M": 32, "BLOCK_N": 16, "num_warps": 4, "num_stages": 2, "EXP2": 1, "SPLIT": 1, "TMA": 1},
]
TMA = SMALL[2]


def _independent(q, k, v, cu, cu_k=None):
    """fp64 softmax attention over the whole sequence with a (same document) mask: no chunks, no per-document loop;
    a query row without keys gets zeros. Returns (out, sum_j p_ij |v_jd|)."""
    cu_k = cu if cu_k is None else cu_k
    doc_q = torch.bucketize(torch.arange(q.shape[0]), torch.tensor(cu[1:]), right=True)
    doc_k = torch.bucketize(torch.arange(k.shape[0]), torch.tensor(cu_k[1:]), right=True)
    same = doc_q[:, None] == doc_k[None, :]
    qd, kd, vd = (t.double().transpose(0, 1) for t in (q, k, v))       # [H, S, D]
    s = (qd @ kd.transpose(1, 2)) / math.sqrt(128)
    p = torch.softmax(s.masked_fill(~same, -math.inf), dim=-1)
    p = torch.where(same.any(1)[None, :, None], p, 0.0)
    return (p @ vd).transpose(0, 1), (p @ vd.abs()).transpose(0, 1)


def _judge(out, inputs):
    g = get_op_group(OP)
    ref, orc, (term,) = g.reference(*inputs), g.oracle(*inputs), g.term_scale(*inputs)
    assert out.shape == ref.shape and out.dtype == ref.dtype and out.is_contiguous()
    return check.compare(out, ref, orc, g.tolerance, term_scale=term)


@pytest.mark.parametrize("shape", get_op_group(OP).interp_shapes, ids=lambda s: s.name)
def test_reference_against_independent_fp64(shape):
    g = get_op_group(OP)
    for lay in range(g.n_layouts):
        q, k, v, cu, cu_k = inputs = g.make_inputs(shape, 5, "cpu", layout=lay)
        assert k.shape[0] == (shape.dims["kv_rows"] or shape.dims["rows"]) and cu_k[-1] == k.shape[0]
        want, want_term = _independent(q, k, v, cu.tolist(), cu_k.tolist())
        assert torch.allclose(g.oracle(*inputs), want, rtol=0, atol=1e-12)
        assert torch.allclose(g.term_scale(*inputs)[0], want_term, rtol=0, atol=1e-12)
        ref = g.reference(*inputs)
        err = (ref.double() - want).abs()
        # fp32 math rounded once: within one bf16 ulp of the exact value, and mostly its correct rounding
        assert bool((err <= check.ulp_bf16(want)).all())
        assert (ref == want.to(torch.bfloat16)).float().mean() > 0.98


def test_documents_do_not_talk():
    """The pad document's outputs depend on its own rows only; an empty document is allowed."""
    g = get_op_group(OP)
    q, k, v, cu, _ = g.make_inputs(Shape("s", {"rows": 90, "heads": 2, "docs": 2}), 3, "cpu")
    for bounds in ([0, 60, 90], [0, 0, 60, 90, 90]):
        cu = torch.tensor(bounds, dtype=torch.int32)
        out = g.reference(q, k, v, cu, cu)
        k2, v2 = k.clone(), v.clone()
        k2[:60], v2[:60] = 0, 1
        assert torch.equal(g.reference(q, k2, v2, cu, cu)[60:], out[60:])
        want, _ = _independent(q, k, v, bounds)
        assert torch.allclose(out.double(), want, atol=2e-2)


def test_drawn_shapes_round_trip():
    """Every drawn shape (both backends, many seeds) is what dims_of reads back from its inputs, cross-attention draws
    included, and the GPU's drawn key counts are the buckets' (0 or 1,024)."""
    import random

    g = get_op_group(OP)
    kinds = set()
    for seed in range(40):
        for backend in ("interpret", "cuda"):
            for s in g.sample_shapes(random.Random(seed), backend, 4):
                assert g.dims_of(g.make_inputs(s, 0, "meta")) == s.dims, s
                kinds.add((backend, bool(s.dims["kv_rows"])))
                if backend == "cuda":
                    assert s.dims["kv_rows"] in (0, 1024)
    assert len(kinds) == 4


def test_cross_attention_key_documents():
    """Query document i sees key rows [cu_k[i], cu_k[i+1]) only; a query document without keys outputs zeros."""
    g = get_op_group(OP)
    q, k, v, _, _ = g.make_inputs(Shape("s", {"rows": 50, "heads": 2, "docs": 2, "kv_rows": 30}), 3, "cpu")
    cu, cu_k = torch.tensor([0, 20, 50], dtype=torch.int32), torch.tensor([0, 0, 30], dtype=torch.int32)
    out = g.reference(q, k, v, cu, cu_k)
    assert torch.equal(out[:20], torch.zeros_like(out[:20]))
    want, _ = _independent(q, k, v, cu.tolist(), cu_k.tolist())
    assert torch.allclose(out.double(), want, atol=2e-2)
    cu_k = torch.tensor([0, 10, 30], dtype=torch.int32)
    k2 = k.clone()
    k2[:10] = 0
    assert torch.equal(g.reference(q, k2, v, cu, cu_k)[20:], g.reference(q, k, v, cu, cu_k)[20:])


def test_runtime_sdpa_documents_is_inside_the_class():
    """The runtime's current attention (runtime/layers.py sdpa_documents, SDPA per document) passes the class."""
    from runtime.layers import sdpa_documents

    g = get_op_group(OP)
    q, k, v, cu, cu_k = g.make_inputs(g.interp_shapes[0], 2, "cpu")
    out = sdpa_documents(q, k, v, cu.tolist()).view(q.shape)
    ok, stats, why = _judge(out, (q, k, v, cu, cu_k))
    assert ok, (why, stats)


@pytest.mark.parametrize("config", SMALL,
                         ids=lambda c: f"m{c['BLOCK_M']}n{c['BLOCK_N']}e{c['EXP2']}s{c['SPLIT']}t{c.get('TMA', 0)}")
def test_template_every_layout_and_special_case(config):
    """Two documents + an odd pad document at tile sizes that straddle the document boundary, every layout, every
    special case; the other interpreter shapes (one document, three documents) at the plain seed."""
    g = get_op_group(OP)
    mod = module(OP)
    two = g.interp_shapes[0]
    for lay in range(g.n_layouts):
        plain = g.make_inputs(two, 1, "cpu", layout=lay)
        assert plain[3][-1] - plain[3][-2] not in (0, 64) and (plain[3][-2] % 16) != 0    # odd pad, boundary mid-tile
        for sc in (None, *g.special_cases):
            inputs = plain if sc is None else sc.apply(plain, ())
            ok, stats, why = _judge(mod.launch(*inputs, **config), inputs)
            assert ok, (lay, sc and sc.name, why)
            if sc is None:   # bf16 P: a little above the fp32 reference's own error, well inside 2x
                assert stats["rel_l2"] <= 1.5 * stats["ref_rel_l2"] and stats["elem_worst_ratio"] < 0.5, stats
    for shape in g.interp_shapes[1:]:
        inputs = g.make_inputs(shape, 2, "cpu")
        ok, _, why = _judge(mod.launch(*inputs, **config), inputs)
        assert ok, (shape.name, why)


def test_heuristic_with_empty_documents():
    g = get_op_group(OP)
    q, k, v, _, _ = g.make_inputs(Shape("s", {"rows": 150, "heads": 2, "docs": 2}), 4, "cpu")
    mod = module(OP)
    for bounds, k_bounds in (([0, 150, 150], None), ([0, 0, 37, 37, 150], None),
                             ([0, 70, 150], [0, 0, 150]), ([0, 70, 150, 150], [0, 150, 150, 150])):
        cu = torch.tensor(bounds, dtype=torch.int32)
        inputs = (q, k, v, cu, cu if k_bounds is None else torch.tensor(k_bounds, dtype=torch.int32))
        for config in (load_space(OP).heuristic(), SMALL[0], TMA):
            ok, _, why = _judge(mod.launch(*inputs, **config), inputs)
            assert ok, (bounds, k_bounds, why)


@pytest.mark.parametrize("config", SMALL,
                         ids=lambda c: f"m{c['BLOCK_M']}n{c['BLOCK_N']}e{c['EXP2']}s{c['SPLIT']}t{c.get('TMA', 0)}")
def test_template_cross_attention(config):
    """The cross-attention shapes (other key rows, key documents of their own) on every layout, their special cases
    on layout 0."""
    g = get_op_group(OP)
    mod = module(OP)
    for shape in (s for s in g.interp_shapes if s.dims["kv_rows"]):
        for lay in range(g.n_layouts):
            plain = g.make_inputs(shape, 3, "cpu", layout=lay)
            for sc in (None, *(g.special_cases if lay == 0 else ())):
                inputs = plain if sc is None else sc.apply(plain, ())
                ok, _, why = _judge(mod.launch(*inputs, **config), inputs)
                assert ok, (shape.name, lay, sc and sc.name, why)


@pytest.mark.parametrize("old,new,configs", [
    # the pad document (and every later one) attends to the keys of the documents before it (SPLIT 1, SPLIT 0)
    ("v_base = v_ptr + h * stride_vh + k_start.to(tl.int64) * stride_vs\n        n_k = k_end - k_start",
     ("v_base = v_ptr + h * stride_vh + k_start.to(tl.int64) * stride_vs\n        n_k = k_end - k_start\n"
      "        k_base = k_ptr + h * stride_kh\n        v_base = v_ptr + h * stride_vh\n        n_k = k_end"), SMALL[:2]),
    # the masked tail reads 16 rows (one key block of SMALL) into the next document
    ("kv_ok = (n0 + offs_n) < end", "kv_ok = (n0 + offs_n) < end + 16", SMALL[:2]),
    # no rescale of the accumulator when the running max grows
    ("acc = acc * alpha[:, None]", "acc = acc + 0.0", SMALL),
    # log2(e) not folded into the scale on the exp2 path
    ("qk_scale = SM_SCALE * LOG2E if EXP2 else SM_SCALE", "qk_scale = SM_SCALE", [SMALL[0]]),
    # fp8 (e4m3) probabilities in the PV product
    ("return p.to(tl.bfloat16), acc", "return p.to(tl.float8e4nv).to(tl.bfloat16), acc", SMALL),
    # TMA kernel: the keys past the document's end (zero rows from the descriptor) not masked
    ("s = tl.where((n0 + tl.arange(0, BLOCK_N) < n_kdoc)[None, :], s, float(\"-inf\"))", "pass", [TMA]),
    # TMA kernel: the mask lets 16 zero key rows past the document's end into the softmax
    ("< n_kdoc)[None, :], s, float(\"-inf\"))", "< n_kdoc + 16)[None, :], s, float(\"-inf\"))", [TMA]),
    # TMA kernel: q's descriptor starts at row 0, not at the document's first row
    ("qd = tl.make_tensor_descriptor(q_ptr + h * stride_qh + rows0 * stride_qs,",
     "qd = tl.make_tensor_descriptor(q_ptr + h * stride_qh,", [TMA]),
], ids=["keys_from_row_0", "tail_mask_leaks", "no_rescale", "exp2_without_log2e", "fp8_p",
        "tma_tail_unmasked", "tma_tail_mask_leaks", "tma_q_from_row_0"])
def test_broken_variants_fail(old, new, configs):
    src = template_source(OP)
    assert old in src
    mod = module(OP, src.replace(old, new))
    g = get_op_group(OP)
    inputs = g.make_inputs(g.interp_shapes[0], 1, "cpu")
    for config in configs:
        ok, _, _ = _judge(mod.launch(*inputs, **config), inputs)
        assert not ok, config


# query rows 0..19 face an empty key document, rows 20..49 key rows 10..29 of 30 (another count than the queries')
CROSS_BOUNDS = ([0, 20, 50], [0, 0, 30]), ([0, 20, 50], [0, 10, 30])


@pytest.mark.parametrize("old,new,configs", [
    # the keys bounded by the query documents (a kernel that assumes self-attention)
    ("k_start = tl.load(cuk_ptr + doc * stride_cuk)\n    k_end = tl.load(cuk_ptr + (doc + 1) * stride_cuk)",
     "k_start = start\n    k_end = end", SMALL[:2]),
    ("k_start = tl.load(cuk_ptr + doc * stride_cuk)\n    n_kdoc", "k_start = start\n    n_kdoc", [TMA]),
    # no guard for a query document without keys: 0 / 0
    (("out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]     # no keys: acc is 0, the output 0\n"
      "        o_off = q_rows[:, None] * (n_heads * HEAD_DIM) + h * HEAD_DIM + offs_d[None, :]\n"
      "        tl.store(o_ptr + o_off, out.to(tl.bfloat16), mask=q_ok"),
     ("out = acc / l_i[:, None]\n"
      "        o_off = q_rows[:, None] * (n_heads * HEAD_DIM) + h * HEAD_DIM + offs_d[None, :]\n"
      "        tl.store(o_ptr + o_off, out.to(tl.bfloat16), mask=q_ok"), SMALL[:2]),
    # TMA kernel: K's descriptor starts at the query document's first row
    ("k_ptr + h * stride_kh + krows0 * stride_ks", "k_ptr + h * stride_kh + rows0 * stride_ks", [TMA]),
], ids=["keys_from_query_documents", "tma_keys_from_query_documents", "no_keys_divides_by_zero",
        "tma_k_from_query_row"])
def test_broken_cross_variants_fail(old, new, configs):
    src = template_source(OP)
    assert old in src
    mod = module(OP, src.replace(old, new))
    g = get_op_group(OP)
    q, k, v, _, _ = g.make_inputs(Shape("s", {"rows": 50, "heads": 2, "docs": 2, "kv_rows": 30}), 2, "cpu")
    for config in configs:
        results = []
        for bounds, k_bounds in CROSS_BOUNDS:
            inputs = (q, k, v, torch.tensor(bounds, dtype=torch.int32), torch.tensor(k_bounds, dtype=torch.int32))
            results.append(_judge(mod.launch(*inputs, **config), inputs)[0])
        assert not all(results), config
