"""The promotion rule end to end: verdict rows are built from synthetic per-repetition timing samples through the
real statistics (rsi.search.stats.paired_ratio_ci), then judged by rsi.search.promote.decide. Breaking the ratio
direction, the median, the bootstrap, the A/A band, the CI's low end, the parity rule or the objective's sign fails
a test here."""

from __future__ import annotations

import math
import random
import statistics
from types import SimpleNamespace

import pytest

from rsi.search.promote import PARITY_MIN, build_record, decide
from rsi.search.propose import objective_of
from rsi.search.stats import paired_ratio_ci

N = 40


def _times(mean_us: float, noise: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [mean_us * (1.0 + rng.gauss(0.0, noise)) for _ in range(N)]


def _entry(base_us: list[float], cand_us: list[float], pct_copy: float) -> dict:
    """A baseline entry as the harness writes it: p50 of the baseline, median paired ratio base/cand and its CI."""
    med, lo, hi = paired_ratio_ci(base_us, cand_us)
    return {"p50_us": statistics.median(base_us), "speedup": med, "ci95": [lo, hi], "pct_copy": pct_copy}


def _row(bucket: str = "a", *, cand: float = 100.0, eager: float = 310.0, compile: float = 120.0,
         comp_pct: float = 59.0, best: float | None = None, aa: float | None = 100.0, copy: float | None = None,
         noise: float = 0.005, comp_noise: float | None = None, seed: int = 0) -> dict:
    """One bucket's timing row. Times are the true means in us of each implementation; ``aa`` is the mean of the
    candidate's second timing in the same loop (None: no A/A measurement)."""
    c = _times(cand, noise, seed)
    base = {"eager": _entry(_times(eager, noise, seed + 1), c, 30.0),
            "compile": _entry(_times(compile, comp_noise if comp_noise is not None else noise, seed + 2), c,
                              comp_pct)}
    if best is not None:
        base["best"] = _entry(_times(best, noise, seed + 3), c, 90.0)
    if aa is not None:
        base["aa"] = _entry(_times(aa, noise, seed + 4), c, 0.0)
    if copy is not None:
        base["copy"] = _entry(_times(copy, noise, seed + 5), c, 94.0)
    p50 = statistics.median(c)
    return {"shape": {"name": bucket, "dims": {"rows": 10, "ffn": 20}}, "bucket": bucket, "method": "m",
            "warmup": 5, "iters": N, "p20_us": p50 * 0.99, "p50_us": p50, "p80_us": p50 * 1.01, "gbps": 3000.0,
            "pct_copy": 70.0, "copy_gbps": 4200.0, "baselines": base}


def _verdict(*rows) -> dict:
    return {"status": "accepted", "timings": list(rows), "tolerance": {"class": "tolerance"},
            "details": {"correctness": {"trials": 60}}}


# ------------------------------------------------------------------------------------------------ the basic rule
def test_faster_than_compile_and_eager_beyond_noise_is_promoted():
    d = decide(_verdict(_row("a", compile=110.0), _row("b", compile=108.0, seed=10)), ("a", "b"), False)
    assert d.promote, d.reason()
    assert "torch.compile" in d.per_bucket["a"] and "A/A band" in d.per_bucket["a"]
    assert set(d.aa_band) == {"a", "b"} and all(0.0 <= v < 0.01 for v in d.aa_band.values())


def test_slower_than_compile_is_refused():
    d = decide(_verdict(_row("a", compile=90.0)), ("a",), False)
    assert not d.promote and "beyond noise" in d.per_bucket["a"]


def test_ci_low_end_must_clear_not_the_high_end():
    # torch.compile ~1% slower than the candidate but noisy (3%): the CI straddles 1 + the (narrow) A/A band
    row = _row("a", compile=101.0, comp_noise=0.03, aa=100.0, seed=3)
    lo, hi = row["baselines"]["compile"]["ci95"]
    d = decide(_verdict(row), ("a",), False)
    assert lo < 1.0 + d.aa_band["a"] < hi
    assert not d.promote and "beyond noise" in d.per_bucket["a"]


def test_a_few_slow_baseline_repetitions_do_not_make_a_win():
    """torch.compile as fast as the candidate, but 6 of 40 of its repetitions hit a 10x hiccup: the median of the
    paired ratios (and of the bootstrap resamples) stays ~1, a mean would call it a 2x win."""
    row = _row("a", compile=100.0)
    c = _times(100.0, 0.005, 0)
    comp = _times(100.0, 0.005, 2)
    for k in range(0, N, 7):  # repetitions 0, 7, ..., 35
        comp[k] *= 10.0
    row["baselines"]["compile"] = _entry(comp, c, 59.0)
    assert row["baselines"]["compile"]["speedup"] < 1.01
    d = decide(_verdict(row), ("a",), False)
    assert not d.promote and "beyond noise" in d.per_bucket["a"]


def test_every_claimed_bucket_must_pass_and_exist():
    d = decide(_verdict(_row("a", compile=110.0)), ("a", "b"), False)
    assert not d.promote and d.per_bucket["b"] == "bucket not timed"
    d = decide(_verdict(_row("a", compile=110.0), _row("b", compile=90.0, seed=5)), ("a", "b"), False)
    assert not d.promote and "beyond noise" in d.per_bucket["b"]


def test_rejected_never_promoted():
    assert not decide({"status": "rejected", "timings": []}, ("a",), False).promote
    assert not decide({"status": "accepted", "timings": []}, ("a",), False).promote


# ------------------------------------------------------------------------------------------------ the A/A band
def test_a_win_inside_the_aa_band_is_not_promoted():
    """The measured failure: a 3% win whose CI clears 1, in a run where the candidate timed twice differs by 5%."""
    row = _row("a", compile=103.0, aa=105.0)
    lo = row["baselines"]["compile"]["ci95"][0]
    d = decide(_verdict(row), ("a",), False)
    band = d.aa_band["a"]
    assert 1.0 < lo < 1.0 + band, (lo, band)  # beats torch.compile "beyond 1" but not beyond the A/A noise
    assert not d.promote and "beyond noise" in d.per_bucket["a"] and f"A/A band {band:.3f}" in d.per_bucket["a"]
    # the same win in a quiet run (A/A ratio ~1) is promoted: the band made the difference
    assert decide(_verdict(_row("a", compile=103.0, aa=100.0)), ("a",), False).promote


def test_eager_check_uses_the_band():
    row = _row("a", eager=103.0, compile=150.0, aa=105.0)
    assert row["baselines"]["eager"]["ci95"][0] > 1.0
    d = decide(_verdict(row), ("a",), False)
    assert not d.promote and "eager" in d.per_bucket["a"]


def test_incumbent_check_uses_the_band():
    row = _row("a", compile=150.0, best=103.0, aa=105.0)
    assert row["baselines"]["best"]["ci95"][0] > 1.0
    d = decide(_verdict(row), ("a",), True)
    assert not d.promote and "verified kernel" in d.per_bucket["a"]
    assert decide(_verdict(_row("a", compile=150.0, best=110.0, aa=100.0)), ("a",), True).promote
    no_best = decide(_verdict(_row("a", compile=150.0, aa=100.0)), ("a",), True)
    assert not no_best.promote and "not timed" in no_best.per_bucket["a"]


def test_no_aa_measurement_is_never_promoted():
    d = decide(_verdict(_row("a", compile=200.0, aa=None)), ("a",), False)
    assert not d.promote and d.per_bucket["a"] == "no A/A measurement" and "a" not in d.aa_band
    row = _row("a", compile=200.0)
    row["baselines"]["aa"]["ci95"] = [float("nan"), float("nan")]
    d = decide(_verdict(row), ("a",), False)
    assert not d.promote and "no A/A measurement" in d.per_bucket["a"]


# ------------------------------------------------------------------------------------------------ parity at ceiling
def test_parity_at_the_copy_ceiling():
    row = _row("a", compile=100.0, comp_pct=99.0)
    med, (lo, hi) = row["baselines"]["compile"]["speedup"], row["baselines"]["compile"]["ci95"]
    assert med >= PARITY_MIN and lo <= 1.0 <= hi
    d = decide(_verdict(row), ("a",), False)
    assert d.promote and "parity" in d.per_bucket["a"] and "A/A band" in d.per_bucket["a"]
    # below the ceiling the same timing is not enough
    assert not decide(_verdict(_row("a", compile=100.0, comp_pct=80.0)), ("a",), False).promote


def test_parity_needs_the_ci_to_reach_1():
    row = _row("a", compile=98.7, comp_pct=99.0, noise=0.001)  # 1.3% behind torch.compile, tightly measured
    med, hi = row["baselines"]["compile"]["speedup"], row["baselines"]["compile"]["ci95"][1]
    assert med >= PARITY_MIN and hi < 1.0
    d = decide(_verdict(row), ("a",), False)
    assert not d.promote and "parity needs" in d.per_bucket["a"]


def test_parity_needs_the_median():
    # the H200 run-1 case: 2.6% behind torch.compile at the ceiling, noisy enough for the CI to reach 1
    row = _row("a", compile=97.4, comp_pct=100.0, comp_noise=0.1, seed=2)
    med, hi = row["baselines"]["compile"]["speedup"], row["baselines"]["compile"]["ci95"][1]
    assert med < PARITY_MIN and hi >= 1.0
    assert not decide(_verdict(row), ("a",), False).promote


def test_parity_needs_the_aa_band():
    d = decide(_verdict(_row("a", compile=100.0, comp_pct=99.0, aa=None)), ("a",), False)
    assert not d.promote and d.per_bucket["a"] == "no A/A measurement"


def test_ceiling_is_the_same_bytes_copy_where_that_is_lower():
    # torch.compile at 92% of the large-buffer copy but as fast as a copy of the op's own bytes (H200 run 5, w4)
    d = decide(_verdict(_row("a", compile=100.0, comp_pct=92.0, copy=98.0)), ("a",), False)
    assert d.promote and "same bytes" in d.per_bucket["a"]
    # torch.compile at 81% of the same-bytes copy: not at the ceiling
    d = decide(_verdict(_row("a", compile=100.0, comp_pct=92.0, copy=81.0)), ("a",), False)
    assert not d.promote and "beyond noise" in d.per_bucket["a"]


# ------------------------------------------------------------------------------------------------ the record
def test_record_carries_the_band_per_bucket():
    v = _verdict(_row("a", compile=110.0), _row("b", compile=110.0, aa=101.0, seed=20))
    d = decide(v, ("a", "b"), False)
    assert d.promote
    cand = SimpleNamespace(op="swiglu", hash="h" * 64, source="src", config={"B": 1}, parent=None)
    space = SimpleNamespace(op="swiglu", buckets=("a", "b"), sha256="s" * 64)
    rec = build_record(cand=cand, op_group=None, verdict=v, decision=d, env={}, space=space, run_id="r",
                       reference_sha="x", proxy=False, seed=0, proposer="offline")
    bands = rec["promotion"]["aa_band"]
    assert set(bands) == {"a", "b"} and bands["a"] < 0.01 and 0.005 < bands["b"] < 0.03
    assert rec["promotion"]["per_bucket"] == d.per_bucket
    assert rec["timings"][0]["vs"]["aa"]["ci95"] == v["timings"][0]["baselines"]["aa"]["ci95"]


# ------------------------------------------------------------------------------------------------ the objective
def test_objective_is_candidate_over_fastest_competitor_lower_is_better():
    fast = _verdict(_row("a", cand=90.0, eager=300.0, compile=100.0), _row("b", cand=90.0, eager=300.0,
                                                                           compile=100.0, seed=3))
    slow = _verdict(_row("a", cand=110.0, eager=300.0, compile=100.0))
    f, s = objective_of(fast, "cuda"), objective_of(slow, "cuda")
    assert f == pytest.approx(0.9, rel=0.01) and s == pytest.approx(1.1, rel=0.01)
    assert f < 1.0 < s
    # geometric mean over buckets
    mixed = _verdict(_row("a", cand=50.0, compile=100.0, eager=300.0),
                     _row("b", cand=200.0, compile=100.0, eager=300.0, seed=4))
    assert objective_of(mixed, "cuda") == pytest.approx(1.0, rel=0.01)
    # the current best counts, the candidate's own A/A timing and the copy do not
    with_best = _row("a", cand=90.0, compile=100.0, best=80.0, copy=50.0, aa=90.0)
    assert objective_of(_verdict(with_best), "cuda") == pytest.approx(90.0 / 80.0, rel=0.01)
    # a declared incumbent (attention's SDPA backends) is a competitor when named, an unknown entry is not
    row = _row("a", cand=90.0, compile=100.0)
    row["baselines"]["sdpa_cudnn"] = dict(row["baselines"]["compile"], p50_us=60.0)
    assert objective_of(_verdict(row), "cuda") == pytest.approx(0.9, rel=0.01)
    assert objective_of(_verdict(row), "cuda", ("sdpa_cudnn",)) == pytest.approx(1.5, rel=0.01)
    # only the template's buckets count where given (a template that claims a subset, rsi.spaces)
    two = _verdict(_row("a", cand=100.0, compile=200.0), _row("b", cand=100.0, compile=50.0, seed=3))
    assert objective_of(two, "cuda", buckets=("a",)) == pytest.approx(0.5, rel=0.01)
    assert objective_of(two, "cuda") == pytest.approx(1.0, rel=0.02)


def test_objective_failures():
    assert objective_of({"status": "rejected"}, "cuda") is None
    assert objective_of(_verdict(_row("a")), "interpret") == 1.0
    row = _row("a")
    row["p50_us"] = 0.0
    assert objective_of(_verdict(row), "cuda") is None
    row = _row("a")
    row["baselines"]["compile"]["p50_us"] = math.nan
    assert objective_of(_verdict(row), "cuda") is None


# ------------------------------------------------------------------------------------------------ incumbents
INCUMBENTS = ("sdpa_cudnn", "sdpa_flash", "sdpa_efficient", "flex")


def _with_incumbents(row: dict, seed: int = 30, **means: float) -> dict:
    """Add incumbent entries (true mean us per name) to a row made by _row with its defaults (candidate 100 us,
    seed 0, noise 0.005), paired with the same candidate times as its other entries."""
    c = _times(100.0, 0.005, 0)
    for k, (name, mean) in enumerate(means.items()):
        row["baselines"][name] = _entry(_times(mean, 0.005, seed + k), c, 10.0)
    return row


def test_faster_than_compile_but_not_than_an_incumbent_is_refused():
    row = _with_incumbents(_row("a", compile=150.0), sdpa_cudnn=95.0, sdpa_flash=140.0, flex=120.0)
    assert decide(_verdict(row), ("a",), False).promote  # today's rule alone would promote it
    d = decide(_verdict(row), ("a",), False, INCUMBENTS)
    assert not d.promote
    why = d.per_bucket["a"]
    assert "incumbent sdpa_cudnn" in why and "fastest incumbent sdpa_cudnn 0.9" in why and "beyond noise" in why
    assert "sdpa_cudnn" in d.rule and "flex" in d.rule


def test_an_incumbent_inside_the_band_is_not_beaten():
    # 3% faster than cuDNN, in a run whose A/A band is 5%: the same rule as for torch.compile
    row = _with_incumbents(_row("a", compile=150.0, aa=105.0), sdpa_cudnn=103.0, flex=130.0)
    assert row["baselines"]["sdpa_cudnn"]["ci95"][0] > 1.0
    d = decide(_verdict(row), ("a",), False, INCUMBENTS)
    assert not d.promote and "incumbent sdpa_cudnn" in d.per_bucket["a"]


def test_faster_than_every_incumbent_is_promoted():
    rows = [_with_incumbents(_row("a", compile=150.0), sdpa_cudnn=110.0, sdpa_flash=140.0, flex=125.0),
            _with_incumbents(_row("b", compile=150.0), sdpa_cudnn=130.0, flex=112.0)]  # flash and efficient dropped
    d = decide(_verdict(*rows), ("a", "b"), False, INCUMBENTS)
    assert d.promote, d.reason()
    assert "the fastest incumbent sdpa_cudnn" in d.per_bucket["a"] and "3 of 4 timed" in d.per_bucket["a"]
    assert "the fastest incumbent flex" in d.per_bucket["b"] and "2 of 4 timed" in d.per_bucket["b"]
    assert "torch.compile" in d.per_bucket["a"]  # today's rule still applies and is still stated
    # with a locked kernel: it must be beaten too, and the incumbents as well
    locked = _with_incumbents(_row("a", compile=150.0, best=104.0, aa=105.0), sdpa_cudnn=130.0)
    d = decide(_verdict(locked), ("a",), True, INCUMBENTS)
    assert not d.promote and "verified kernel" in d.per_bucket["a"]


def test_no_incumbent_timed_is_not_promoted():
    rows = [_with_incumbents(_row("a", compile=150.0), sdpa_cudnn=130.0), _row("b", compile=150.0, seed=5)]
    d = decide(_verdict(*rows), ("a", "b"), False, INCUMBENTS)
    assert not d.promote and d.per_bucket["b"].startswith("no incumbent timed") and "sdpa_cudnn" in d.per_bucket["a"]
    # an incumbent without a usable ratio counts as timed and unbeaten (fail closed)
    row = _with_incumbents(_row("a", compile=150.0), sdpa_cudnn=130.0, flex=125.0)
    row["baselines"]["flex"]["ci95"] = [math.nan, math.nan]
    row["baselines"]["flex"]["speedup"] = math.nan
    d = decide(_verdict(row), ("a",), False, INCUMBENTS)
    assert not d.promote and "incumbent flex" in d.per_bucket["a"]


def test_parity_at_the_ceiling_never_applies_to_an_incumbent():
    # torch.compile at the copy ceiling (parity accepted for it) and an incumbent at parity: not promoted
    row = _with_incumbents(_row("a", compile=100.0, comp_pct=99.0), sdpa_cudnn=100.0)
    assert decide(_verdict(row), ("a",), False).promote
    d = decide(_verdict(row), ("a",), False, INCUMBENTS)
    assert not d.promote and "incumbent sdpa_cudnn" in d.per_bucket["a"]


def test_record_keeps_every_incumbent():
    row = _with_incumbents(_row("a", compile=150.0), sdpa_cudnn=110.0, flex=125.0)
    v = _verdict(row)
    v["details"]["incumbents"] = {"a": {"sdpa_cudnn": {"timed": True, "error": {"rel_l2": 0.003}},
                                        "sdpa_efficient": {"timed": False, "reason": "raised RuntimeError: no"}}}
    d = decide(v, ("a",), False, INCUMBENTS)
    assert d.promote
    cand = SimpleNamespace(op="attention", hash="h" * 64, source="src", config={"B": 1}, parent=None)
    space = SimpleNamespace(op="attention", buckets=("a",), sha256="s" * 64)
    rec = build_record(cand=cand, op_group=None, verdict=v, decision=d, env={}, space=space, run_id="r",
                       reference_sha="x", proxy=False, seed=0, proposer="offline")
    assert {"sdpa_cudnn", "flex", "compile", "eager", "aa"} <= set(rec["timings"][0]["vs"])
    assert rec["timings"][0]["vs"]["sdpa_cudnn"]["ci95"] == row["baselines"]["sdpa_cudnn"]["ci95"]
    assert rec["incumbents"] == v["details"]["incumbents"] and "sdpa_cudnn" in rec["promotion"]["rule"]


def _untimed_reference(row: dict) -> dict:
    """The row of an op group whose reference is not timed (OpGroup.reference_timed False): no eager, no compile."""
    del row["baselines"]["eager"], row["baselines"]["compile"]
    return row


def test_an_untimed_reference_leaves_the_incumbents_to_decide():
    fast = _untimed_reference(_with_incumbents(_row("a"), sdpa_cudnn=110.0, flex=125.0))
    d = decide(_verdict(fast), ("a",), False, INCUMBENTS)
    assert d.promote, d.reason()
    assert "reference not timed" in d.per_bucket["a"] and "fastest incumbent sdpa_cudnn" in d.per_bucket["a"]
    slow = _untimed_reference(_with_incumbents(_row("a"), sdpa_cudnn=97.0))
    d = decide(_verdict(slow), ("a",), False, INCUMBENTS)
    assert not d.promote and "incumbent sdpa_cudnn" in d.per_bucket["a"]
    # a locked kernel still has to be beaten
    locked = _untimed_reference(_with_incumbents(_row("a", best=103.0, aa=105.0), sdpa_cudnn=130.0))
    d = decide(_verdict(locked), ("a",), True, INCUMBENTS)
    assert not d.promote and "verified kernel" in d.per_bucket["a"]
    # an op group without incumbents never skips eager: fail closed
    d = decide(_verdict(_untimed_reference(_row("a"))), ("a",), False)
    assert not d.promote and d.per_bucket["a"] == "eager not timed"


def test_record_of_an_untimed_reference():
    row = _untimed_reference(_with_incumbents(_row("a"), sdpa_cudnn=110.0))
    v = _verdict(row)
    d = decide(v, ("a",), False, INCUMBENTS)
    cand = SimpleNamespace(op="attention", hash="h" * 64, source="src", config={"B": 1}, parent=None)
    space = SimpleNamespace(op="attention", buckets=("a",), sha256="s" * 64)
    rec = build_record(cand=cand, op_group=None, verdict=v, decision=d, env={}, space=space, run_id="r",
                       reference_sha="x", proxy=False, seed=0, proposer="offline")
    t = rec["timings"][0]
    assert t["ref_p50_us"] is None and t["speedup"] is None and "eager" not in t["vs"] and "sdpa_cudnn" in t["vs"]


def test_record_names_the_exact_command(monkeypatch):
    """A promotion's record carries the command line that produced it (rsi search passes its own argv)."""
    v = _verdict(_row("a", compile=110.0), _row("b", compile=110.0, aa=101.0, seed=20))
    d = decide(v, ("a", "b"), False)
    cand = SimpleNamespace(op="swiglu", hash="h" * 64, source="src", config={"B": 1}, parent=None)
    space = SimpleNamespace(op="swiglu", buckets=("a", "b"), sha256="s" * 64)
    cmd = "rsi search --op-group swiglu --gpu h200 --budget '3,2m'"
    rec = build_record(cand=cand, op_group=None, verdict=v, decision=d, env={}, space=space, run_id="r",
                       reference_sha="x", proxy=False, seed=0, proposer="offline", command=cmd)
    assert rec["command"] == cmd
    from rsi import cli
    from rsi.search import loop

    seen = {}

    def fake(opts):
        seen["opts"] = opts
        raise loop.SearchError("stopped by the test")

    monkeypatch.setattr(loop, "run_search", fake)
    monkeypatch.setattr(cli.sys, "argv", ["rsi", "search", "--op-group", "swiglu", "--budget", "1,0.1m"])
    cli.main(["search", "--op-group", "swiglu", "--budget", "1,0.1m"])
    assert seen["opts"].command == "rsi search --op-group swiglu --budget 1,0.1m"
