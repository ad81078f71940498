"""The judge keeps its own results per correctness trial (references, oracles, term scales) for the run's next
candidates: the second candidate of a run computes none of them again, and its verdict is the same as a fresh
judge's; a cap of 0 keeps nothing."""

from __future__ import annotations

import pytest

from rsi.contract import Candidate
from rsi.harness import check
from rsi.harness.judge import Judge, JudgeOptions
from rsi.spaces import load_space, template_source

pytestmark = pytest.mark.interpreter
OP = "head_merge"


def _cand(**cfg):
    space = load_space(OP)
    return Candidate(OP, template_source(space.template), {**space.heuristic(), **cfg})


def _count_calls(monkeypatch):
    calls = []
    real = check.term_scales

    def counting(*a, **k):
        calls.append(1)
        return real(*a, **k)
    monkeypatch.setattr(check, "term_scales", counting)
    return calls


@pytest.mark.parametrize("cap_gb,recomputed", [("40", False), ("0", True)])
def test_second_candidate_reuses_the_trials_results(monkeypatch, cap_gb, recomputed):
    monkeypatch.setenv("RSI_JUDGE_CACHE_GB", cap_gb)
    calls = _count_calls(monkeypatch)
    with Judge(JudgeOptions(backend="interpret", seeds=(1, 2, 3, 4, 5))) as j:
        v1 = j.evaluate(_cand())
        first = len(calls)
        v2 = j.evaluate(_cand(num_warps=2 if _cand().config.get("num_warps") != 2 else 4))
    assert v1["status"] == v2["status"] == "accepted", (v1["reason"], v2["reason"])
    assert first == v1["details"]["correctness"]["trials"] > 0
    assert (len(calls) - first == first) if recomputed else (len(calls) == first)
