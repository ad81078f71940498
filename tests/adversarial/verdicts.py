"""Assertions on judge verdicts shared by the adversarial tests."""

from __future__ import annotations

# the failures a compare reports for an output left unwritten (random arena bytes): whichever shows first
GARBAGE = ("NaN pattern", "Inf pattern", "max-abs error", "relative-L2", "cosine", "per-element", "non-determin",
           "not bitwise equal")


def expect_rejected(v: dict, stage, words) -> None:
    """Rejected at ``stage`` (a name or a tuple of names) with a reason containing any of ``words``."""
    stages = (stage,) if isinstance(stage, str) else tuple(stage)
    words = (words,) if isinstance(words, str) else tuple(words)
    assert v["status"] == "rejected", f"ACCEPTED: {v['reason']}"
    assert v["stage"] in stages, f"stage {v['stage']!r} (expected {stages}): {v['reason']}"
    assert any(w in v["reason"] for w in words), f"reason lacks {words}: {v['reason']}"


def expect_accepted(v: dict) -> None:
    assert v["status"] == "accepted", f"{v['stage']}: {v['reason']}"
