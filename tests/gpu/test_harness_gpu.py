"""The two-process judge on a real GPU: a template is accepted and timed with every timing field the gates and the
promotion rule read; every locked kernel is judged on a shape above 2^31 elements where its op group has one.
Skipped without CUDA. GPU cheats are in tests/gpu/test_adversarial_gpu.py."""

from __future__ import annotations

import pytest

from rsi.contract import Candidate
from rsi.harness.judge import Judge, JudgeOptions
from rsi.refs import get_op_group, op_names
from rsi.spaces import load_space, template_source

pytestmark = pytest.mark.gpu

FAST = {"warmup": 3, "reps": 10, "input_sets": 2}


@pytest.fixture(scope="module")
def judge():
    with Judge(JudgeOptions(backend="cuda", timing=FAST, drawn_shapes=1)) as j:
        yield j


def test_swiglu_template_accepted_and_timed(judge):
    v = judge.evaluate(Candidate("swiglu", template_source("swiglu"), {"FLAT": 1, "BLOCK_F": 1024, "num_warps": 4}))
    assert v["status"] == "accepted", v["reason"]
    assert {r["bucket"] for r in v["timings"]} == {"stage1", "per_rank", "full"}
    for r in v["timings"]:
        assert 0 < r["pct_copy"] <= 105 and r["p20_us"] <= r["p50_us"] <= r["p80_us"]
        assert {"eager", "compile", "copy", "aa"} <= set(r["baselines"])
        assert r["wall_min_ratio"] >= 1.0 and r["timed_outputs_checked"] >= 1
    assert v["details"]["correctness"]["calls_per_trial"] == 3


@pytest.mark.parametrize("op", [o for o in op_names() if getattr(get_op_group(o), "huge_shapes", ())])
def test_huge_shape_above_2_31_elements(op):
    """int32 address overflow shows only above 2^31 elements: the op group's template (64-bit indexing where
    needed) passes a trial there."""
    g = get_op_group(op)
    space = load_space(op)
    opts = JudgeOptions(backend="cuda", timing=FAST, drawn_shapes=0, huge=True, measure=False)
    with Judge(opts) as j:
        v = j.evaluate(Candidate(op, template_source(space.template), space.heuristic()))
    assert v["status"] == "accepted", v["reason"]
    assert any(h.key() in v["details"]["correctness"]["shapes"] for h in g.huge_shapes)
