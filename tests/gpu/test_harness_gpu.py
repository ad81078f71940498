"""The harness on a real GPU: a template is accepted and timed; a side-stream cheat that slips past the static
checks is still rejected by the run-time gates. Skipped without CUDA."""

from __future__ import annotations

import pytest

from rsi.harness.evaluate import evaluate
from rsi.spaces import template_source
from tests.adversarial import cheats

pytestmark = pytest.mark.gpu

FAST = {"warmup": 3, "reps": 10, "input_sets": 2, "liger": False}


def _job(source, config=None, skip_static=False):
    return {"candidate": {"op": "swiglu", "source": source, "config": config or {}}, "backend": "cuda",
            "timing": FAST, "skip_static": skip_static}


def test_swiglu_template_accepted_and_timed():
    v = evaluate(_job(template_source("swiglu"), {"FLAT": 1, "BLOCK_F": 1024, "num_warps": 4}), {})
    assert v["status"] == "accepted", v["reason"]
    assert {r["bucket"] for r in v["timings"]} == {"stage1", "per_rank", "full"}
    for r in v["timings"]:
        assert 0 < r["pct_copy"] <= 105 and r["p20_us"] <= r["p50_us"] <= r["p80_us"]
        assert {"eager", "compile"} <= set(r["baselines"])


def test_side_stream_cheat_rejected_at_run_time():
    v = evaluate(_job(cheats.SIDE_STREAM, skip_static=True), {})
    assert v["status"] == "rejected"
    assert v["stage"] in ("physics", "correctness"), v


def test_determinism_run_twice_bitwise():
    import torch

    from rsi.contract import Candidate
    from rsi.harness.evaluate import load_candidate
    from rsi.refs import get_op_group

    g = get_op_group("swiglu")
    fn = load_candidate(Candidate("swiglu", template_source("swiglu"), {"FLAT": 1, "BLOCK_F": 1024}), "/tmp")
    for shape in (*g.shapes, *g.odd_shapes):
        (x,) = g.make_inputs(shape, 0, "cuda")
        a, b = fn(x), fn(x)
        assert torch.equal(a.view(torch.int16), b.view(torch.int16))
