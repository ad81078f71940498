"""Every cheating candidate is rejected, each for its own reason (fail-closed contract, DESIGN.md).

Static cheats are rejected before any code runs; the run-time variants are judged with the static checks
switched off (``skip_static``, a test-only switch) to prove the run-time defence stands on its own.
Run with TRITON_INTERPRET=1 (the README's test command sets it).
"""

from __future__ import annotations

import pytest

from rsi.contract import Candidate
from rsi.harness.evaluate import evaluate
from rsi.harness.sandbox import Sandbox
from tests.adversarial import cheats

pytestmark = pytest.mark.interpreter


def judge(source: str, skip_static: bool = False) -> dict:
    job = {"candidate": {"op": "swiglu", "source": source, "config": {}}, "backend": "interpret",
           "skip_static": skip_static}
    return evaluate(job, {})


def judge_isolated(source: str, skip_static: bool = True, timeout_s: float = 120.0) -> dict:
    cand = Candidate("swiglu", source)
    with Sandbox("interpret", timeout_s=timeout_s) as sb:
        return sb.evaluate({"candidate": {"op": "swiglu", "source": source, "config": {}}, "backend": "interpret",
                            "skip_static": skip_static}, cand.hash)


def test_honest_candidate_is_accepted():
    v = judge(cheats.HONEST)
    assert v["status"] == "accepted", v["reason"]


@pytest.mark.parametrize("name, stage, words", [
    ("CACHED_STATIC", "static", "module-level value"),
    ("SIDE_STREAM", "static", "stream"),
    ("TRY_FALLBACK", "static", "try/except"),
    ("CALLS_REFERENCE", "static", "may not call the reference"),
    ("SHAPE_SPECIAL_STATIC", "static", "special-casing shapes"),
    ("PATCHES_TIMER_STATIC", "static", "elapsed_time"),
])
def test_static_cheats_rejected(name, stage, words):
    v = judge(getattr(cheats, name))
    assert v["status"] == "rejected"
    assert v["stage"] == stage, v
    assert words in v["reason"], v["reason"]


@pytest.mark.parametrize("name, skip_static, words", [
    ("CACHED_RUNTIME", True, "reuses the buffer of an earlier call"),
    ("MUTATES_INPUT", False, "input 0 was modified"),
    ("SHAPE_SPECIAL_RUNTIME", False, "shape odd"),
    ("LOW_PRECISION", False, "error"),
    ("SKIPS_ZEROS", False, "case zero"),  # unwritten output: garbage differs call to call
    ("RETURNS_VIEW", False, "aliases input 0"),
    ("NONDETERMINISTIC", True, "non-deterministic"),
])
def test_runtime_cheats_rejected(name, skip_static, words):
    v = judge(getattr(cheats, name), skip_static=skip_static)
    assert v["status"] == "rejected"
    assert v["stage"] == "correctness", v
    assert words in v["reason"], v["reason"]


def test_low_precision_reports_error_against_bounds():
    v = judge(cheats.LOW_PRECISION)
    err = v["details"]["error"]
    assert err["max_abs"] > err["max_abs_bound"] or err["rel_l2"] > err["rel_l2_bound"]


def test_timer_patch_caught_by_tamper_guard():
    v = judge_isolated(cheats.PATCHES_TIMER_RUNTIME)
    assert v["status"] == "rejected"
    assert "tampered with the harness" in v["reason"] and "time.perf_counter" in v["reason"]


def test_crash_rejects_only_that_candidate():
    cand = Candidate("swiglu", cheats.CRASHES)
    ok = Candidate("swiglu", cheats.HONEST)
    with Sandbox("interpret", timeout_s=120) as sb:
        v = sb.evaluate({"candidate": {"op": "swiglu", "source": cheats.CRASHES}, "backend": "interpret",
                         "skip_static": True}, cand.hash)
        assert v["status"] == "rejected" and v["stage"] == "crash"
        assert "exit code 7" in v["reason"]
        v2 = sb.evaluate({"candidate": {"op": "swiglu", "source": cheats.HONEST}, "backend": "interpret"}, ok.hash)
        assert v2["status"] == "accepted", v2["reason"]


def test_hang_times_out():
    v = judge_isolated(cheats.HANGS, timeout_s=8)
    assert v["status"] == "rejected" and v["stage"] == "timeout"
