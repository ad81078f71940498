"""The op groups' incumbents (OpGroup.baselines) before they are timed: attention's SDPA backends and FlexAttention
computed on the CPU agree with the attention reference under its class (documents, an empty pad document, the
production strides, cross-attention with key documents of their own and a query document without keys), a
baseline that attends across documents fails that check, and the judge drops a baseline
that raises or fails, with its reason, vetting once per shape."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from rsi.contract import Baseline, Bitwise, OpGroup, Shape
from rsi.harness import check, incumbents
from rsi.harness.judge import Judge, JudgeOptions
from rsi.refs import attention as A


def _inputs(rows: int, heads: int, bounds: list[int], k_bounds: list[int] | None = None, seed: int = 5) -> tuple:
    """Production layout (v a view of a fused qkv buffer) with the given document bounds (key documents: k_bounds,
    default the query documents)."""
    kv_rows = k_bounds[-1] if k_bounds else 0
    dims = {"rows": rows, "heads": heads, "docs": len(bounds) - 1, "kv_rows": kv_rows}
    q, k, v, _, _ = A.make_inputs(Shape("t", dims), seed, "cpu")
    return q, k, v, *(torch.tensor(b, dtype=torch.int32) for b in (bounds, k_bounds or bounds))


CASES = {
    "two_docs_empty_pad": (150, 2, [0, 150, 150]),          # the pad document is empty
    "three_docs_pad": (97, 2, [0, 30, 70, 97]),
    "three_docs_empty_middle": (80, 3, [0, 41, 41, 80]),
    "cross_one_doc": (90, 2, [0, 90], [0, 37]),             # the refiner's text cross-attention, small
    "cross_docs_no_keys": (80, 2, [0, 30, 80], [0, 0, 45]),  # query document 0 faces an empty key document
}


@pytest.mark.parametrize("case", list(CASES))
def test_attention_baselines_agree_with_the_reference(case):
    inputs = _inputs(*CASES[case])
    ref = A.reference(*inputs)
    passed, report = incumbents.vet(A.OP_GROUP, A.OP_GROUP.tolerance, inputs)
    assert set(report) == {"sdpa_cudnn", "sdpa_flash", "sdpa_efficient", "flex", "fa4"}
    # on the CPU SDPA's flash backend (PyTorch's CPU flash kernel) and compiled FlexAttention run and pass
    assert {b.name for b in passed} >= {"sdpa_flash", "flex"}
    for name, r in report.items():
        assert r["timed"] == (name in {b.name for b in passed})
        assert r["timed"] or r["reason"].startswith("raised ")   # cuDNN / memory-efficient: no CPU kernel
    for b in passed:  # the same outputs as vet judged, independently compared here
        out = b.fn(*b.args(inputs))
        assert out.shape == ref.shape and out.is_contiguous() and out.dtype == torch.bfloat16
        ok, st, why = check.compare(out, ref, A.oracle(*inputs), A.OP_GROUP.tolerance,
                                    term_scale=A.term_scale(*inputs)[0])
        assert ok, (b.name, why)
        assert st["rel_l2"] < 3 * st["ref_rel_l2"]
        assert report[b.name]["error"]["rel_l2"] == pytest.approx(st["rel_l2"])


def _whole_sequence(q, k, v, bounds, k_bounds):
    """SDPA over all rows at once: ignores the documents (cross-talk)."""
    o = F.scaled_dot_product_attention(*(t.transpose(0, 1).unsqueeze(0) for t in (q, k, v)))
    return o[0].transpose(0, 1).contiguous()


def test_a_baseline_that_ignores_the_documents_fails_the_check():
    flash = next(b for b in A.OP_GROUP.baselines if b.name == "sdpa_flash")
    op = replace(A.OP_GROUP, baselines=(flash, Baseline("cross_talk", _whole_sequence, flash.prepare)))
    passed, report = incumbents.vet(op, op.tolerance, _inputs(*CASES["three_docs_pad"]))
    assert [b.name for b in passed] == ["sdpa_flash"]
    assert not report["cross_talk"]["timed"] and "fails the tolerance check" in report["cross_talk"]["reason"]


# ------------------------------------------------------------------------------------------ the judge's step
def _double(x):
    return x * 2


def _op(*baselines: Baseline) -> OpGroup:
    shape = Shape("s", {"rows": 8})

    def make_inputs(s, seed, device, layout=0):
        return (torch.randn(s.dims["rows"], 16, generator=torch.Generator().manual_seed(seed)).to(torch.bfloat16),)

    return OpGroup(name="double_test", reference=_double, oracle=lambda x: x.double() * 2, make_inputs=make_inputs,
                   tolerance=Bitwise(), shapes=(shape,), odd_shapes=(), interp_shapes=(shape,), special_cases=(),
                   bytes_moved=lambda s: 4 * 16 * s.dims["rows"], baselines=baselines)


def test_judge_drops_a_baseline_that_raises_or_fails_and_says_why():
    calls = {"vet": 0, "prepare": 0}

    def unsupported(x):
        raise RuntimeError("No available kernel. Aborting execution.")

    def prepare_fails_later(x):
        calls["prepare"] += 1
        if calls["prepare"] == 3:  # vet's set, then the first timing set; the second timing set raises
            raise torch.cuda.OutOfMemoryError("CUDA out of memory")
        return (x,)

    op = _op(Baseline("good", _double), Baseline("unsupported", unsupported),
             Baseline("wrong", lambda x: x * 2 + 1), Baseline("late", _double, prepare_fails_later))
    shape = op.shapes[0]
    private = [op.make_inputs(shape, s, "cpu") for s in (1, 2)]
    refs = [check.as_tuple(op.reference(*s)) for s in private]
    real_vet = incumbents.vet

    def counting_vet(*a, **k):
        calls["vet"] += 1
        return real_vet(*a, **k)

    with Judge(JudgeOptions(backend="interpret")) as j:
        mp = pytest.MonkeyPatch()
        mp.setattr(incumbents, "vet", counting_vet)
        try:
            entries = j._incumbents(op, shape, private, refs, flush=lambda: None)
            again = j._incumbents(op, shape, private, refs, flush=lambda: None)
        finally:
            mp.undo()
        report = j._vetted[(op.name, shape.key())][1]
    assert [e.name for e in entries] == ["good"] and [e.name for e in again] == ["good"]
    assert calls["vet"] == 1                          # vetted once per shape and judge
    assert entries[0].sets == [private[0], private[1]]
    assert report["good"]["timed"] and report["good"]["error"] == {"bitwise": 1.0}
    assert not report["unsupported"]["timed"] and "RuntimeError: No available kernel" in report["unsupported"]["reason"]
    assert not report["wrong"]["timed"] and "fails the bitwise check: not bitwise equal" in report["wrong"]["reason"]
    assert not report["late"]["timed"] and "prepare raised OutOfMemoryError" in report["late"]["reason"]


@pytest.mark.parametrize("name", ["compile", "aa", "best", "candidate", "copy"])
def test_baseline_names_cannot_shadow_the_loops_own(name):
    with pytest.raises(ValueError, match="baseline names"):
        _op(Baseline(name, _double))
    with pytest.raises(ValueError, match="baseline names"):
        _op(Baseline("x", _double), Baseline("x", _double))
