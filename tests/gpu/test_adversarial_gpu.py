"""GPU-only cheats (tests/adversarial/cheats.py, section "GPU only"): what the interpreter cannot show. Skipped without
CUDA.

* timing divergence: correct whenever checked in the correctness phase, skipping the work once timed (by frame
  inspection, or after more calls on one input set than the correctness phase ever makes) -> the secret sample of
  timed outputs the judge compares;
* work on a side stream -> the physics gate (events see nothing) or the timed-output check;
* a forged CUDA-event time (the producer reports 90% of the truth) -> must not buy a speed-up;
* an out-of-bounds store -> the guard band;
* int32 index arithmetic at a > 2**31-element shape: tests/gpu/test_huge_gpu.py;
* a split reduction by fp32 atomics -> non-deterministic from call to call.

The static check is switched off (``skip_static``) where the cheat needs full Python, as in tests/adversarial.
"""

from __future__ import annotations

import pytest

from rsi.contract import Candidate
from rsi.harness.judge import Judge, JudgeOptions
from tests.adversarial import cheats
from tests.adversarial.verdicts import expect_rejected

pytestmark = pytest.mark.gpu

FAST = {"warmup": 3, "reps": 12, "input_sets": 2}


def _judge(**kw) -> Judge:
    return Judge(JudgeOptions(backend="cuda", timing=dict(FAST), **kw))


@pytest.fixture(scope="module")
def timed():
    with _judge() as j:
        yield j


@pytest.fixture(scope="module")
def timed_runtime():
    with _judge(skip_static=True) as j:
        yield j


@pytest.fixture(scope="module")
def untimed():
    with _judge(measure=False) as j:
        yield j


def evaluate(j: Judge, source: str, op: str = "swiglu") -> dict:
    return j.evaluate(Candidate(op, source, {}, origin="offline"))


def test_honest_swiglu_accepted_and_timed(timed):
    """The control: the honest K-style swiglu passes correctness, timing and physics, and some timed calls were
    compared."""
    v = evaluate(timed, cheats.HONEST)
    assert v["status"] == "accepted", v["reason"]
    assert v["timings"] and v["details"]["timed_outputs_checked"] >= len(v["timings"])


def test_skips_work_only_when_timed(timed_runtime):
    v = evaluate(timed_runtime, cheats.GPU_TIMED_ONLY_SKIP)
    expect_rejected(v, "timing", "behaves differently when timed")


def test_skips_work_after_the_correctness_phase(timed_runtime):
    """Correct for the first 6 calls on each input set (all the correctness phase makes), then skipping: the
    sampled timed-output checks catch it (about 30 skipping calls, each checked with probability 1/4)."""
    v = evaluate(timed_runtime, cheats.GPU_COUNT_SKIP)
    expect_rejected(v, "timing", "behaves differently when timed")


def test_side_stream(timed_runtime):
    v = evaluate(timed_runtime, cheats.GPU_SIDE_STREAM)
    expect_rejected(v, ("physics", "timing"), ("bandwidth", "hidden", "wall", "behaves differently when timed"))


@pytest.mark.xfail(strict=True, reason="known limit (README, contract): with the allow-list bypassed (skip_static), "
                   "a producer can under-report its own event time inside the judge's wall-clock bound; the static "
                   "check is what keeps candidates away from the timer (H200 run 13 accepted this cheat)")
def test_forged_event_time(timed_runtime):
    """The producer reports 90% of the true event time (a forged 10% speed-up under the copy ceiling). Today only
    the allow-list stops this; the test turns into a failure (strict xfail) once the judge catches it itself."""
    v = evaluate(timed_runtime, cheats.GPU_FORGED_EVENT_TIME)
    expect_rejected(v, ("physics", "timing", "protocol"), ("time", "wall", "event"))


def test_out_of_bounds_store(untimed):
    for name in ("WRITE_PAST_END", "WRITE_BEFORE_START"):
        v = evaluate(untimed, getattr(cheats, name))
        expect_rejected(v, "correctness", "outside the outputs")


def test_atomic_split_reduction_nondeterministic(untimed):
    v = evaluate(untimed, cheats.GPU_ATOMIC_SPLIT_MODULATE, op="modulate")
    expect_rejected(v, "correctness", "non-deterministic")
