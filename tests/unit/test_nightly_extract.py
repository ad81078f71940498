"""Figures from the JSON that rsi verify --out, rsi bench --out and rsi run-pipeline --json write (recorded shapes of
those files; GPU runs are the only ones with timings)."""

import json

import pytest

from rsi.nightly.compare import MIN_PAIRS
from rsi.nightly.extract import figures, verdicts


def test_verify_figures_keep_the_judges_samples_and_aa():
    out = {"results": [
        {"target": "h200", "op": "modulate", "kernel": "modulate-abc", "status": "accepted", "reason": "ok",
         "timings": [{"bucket": "stage1", "p50_us": 66.0, "pct_copy": 78.0, "vs": {"aa": [1.0, 0.99, 1.01]},
                      "samples_us": {"candidate": [66.0 + k % 3 for k in range(30)], "aa": [66.0] * 30}}]},
        {"target": "h200", "op": "swiglu", "kernel": "swiglu-def", "status": "rejected", "reason": "[physics] x",
         "timings": []}]}
    figs = figures("verify", "verify:modulate", out)
    assert [f.key for f in figs] == ["verify/modulate/stage1"]
    f = figs[0]
    assert len(f.samples) == 30 and f.aa == (1.0, 0.99, 1.01) and f.gates and f.meta["pct_copy"] == 78.0
    assert f.setup == "reps=30" and f.group == "modulate"
    v = verdicts(out)
    assert [(x["op"], x["status"], x["timed"]) for x in v] == [("modulate", "accepted", True),
                                                               ("swiglu", "rejected", False)]


def test_bench_figures_gate_only_the_verified_kernel():
    n = 20
    row = {"op": "swiglu", "bucket": "stage1", "dims": {"rows": 10250, "ffn": 14336},
           "impls": {k: {"p50_us": 200.0, "pct_copy": 99.0} for k in ("eager", "compile", "verified", "copy")},
           "verified_kernel": "swiglu-x",
           "samples_us": {"eager": [700.0] * n, "compile": [206.0] * n, "copy": [210.0] * n,
                          "verified": [206.0 + 0.1 * (k % 4) for k in range(n)],
                          "verified_aa": [206.0 + 0.1 * ((k + 1) % 4) for k in range(n)]}}
    figs = {f.key: f for f in figures("bench", "bench:swiglu", {"rows": [row], "copy": {"gbps": 4200.0}})}
    assert set(figs) == {f"bench/swiglu/stage1/{k}" for k in ("eager", "compile", "verified", "copy")}
    assert [k for k, f in figs.items() if f.gates] == ["bench/swiglu/stage1/verified"]
    aa = figs["bench/swiglu/stage1/verified"].aa
    assert aa is not None and 0.99 < aa[1] <= aa[0] <= aa[2] < 1.01     # verified_aa / verified, per repetition
    assert all(f.aa == aa for f in figs.values())            # the row's A/A band serves every implementation


def _request(scale: float) -> dict:
    return {"text": 0.001, "text_refiner": 0.01 * scale, "stage1": 0.4 * scale, "upscale": 0.02, "adapt": 0.02,
            "stage2_text": 0.001, "stage2_prepare": 0.01, "stage2": 0.3 * scale, "decode_video": 0.1,
            "decode_audio": 0.2, "mux": 0.05, "request_total": 1.1 * scale, "request_total_no_mux": 1.0 * scale,
            "request_wall": 1.12 * scale, "stage2_context_hit": True,
            "stage1_steps": [0.1 * scale] * 4, "stage2_steps": [0.1 * scale] * 3,
            "attention": {"seconds": {"stage1": 0.05 * scale, "stage2": 0.04 * scale}},
            "ops": [{"op": "swiglu", "dims": {"rows": 9792, "ffn": 512}, "kernel": "reference", "calls": 26,
                     "seconds": 0.03 * scale}]}


def test_pipeline_figures_take_the_steady_state_and_pair_requests():
    reqs = [_request(3.0)] + [_request(1.0 + 0.01 * i) for i in range(8)]   # a cold first request, 8 steady
    res = {"request": {"config": "tiny", "width": 128, "height": 64, "duration_s": 0.5, "kernels": "verified",
                       "attention": "dense"},
           "schedule": {"steps": 4}, "device": "cpu",
           "timings_s": {"build_dit": 0.2, "warmup": {"seconds": 2.0}, "requests": reqs, **reqs[-1]}}
    figs = {f.key: f for f in figures("pipeline", "pipeline:two-stage", res)}
    resumed = figures("pipeline", "pipeline:two-stage", json.loads(json.dumps(res, sort_keys=True)))
    assert [f.key for f in resumed] == list(figs)           # a phase record read back names the same figures
    st1 = figs["pipeline/two-stage/stage1"]
    assert len(st1.samples) == 8 and max(st1.samples) < 1.0 and st1.aa is not None    # first request excluded
    assert st1.setup.startswith("tiny 128x64 0.5s two-stage steps=4")
    step = figs["pipeline/two-stage/stage1 step"]
    assert len(step.samples) == 32 and step.meta["layout"] == [4] * 8
    assert step.aa[0] == pytest.approx(1.0, abs=0.02)        # request i+1's step j against request i's
    assert figs["pipeline/two-stage/first request total"].samples == pytest.approx((3.3,))
    assert figs["pipeline/two-stage/warm-up"].meta["once"] and len(figs["pipeline/two-stage/build_dit"].samples) == 1
    op = figs["pipeline/two-stage/op/swiglu/ffn=512,rows=9792"]
    assert op.group == "swiglu" and op.meta["calls"] == 26 and len(op.samples) == 8
    assert len(figs["pipeline/two-stage/attention stage2"].samples) == 8
    assert len(figs["pipeline/two-stage/request_total"].samples) >= MIN_PAIRS
