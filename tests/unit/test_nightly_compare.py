"""rsi nightly's statistics on recorded histories: known noise is not flagged, known regressions are, the history's
between-night band absorbs night-to-night drift, and too few samples or no band are never a verdict."""

import random

import pytest

from rsi.nightly.compare import (
    MIN_PAIRS,
    aa_of,
    against_baseline,
    against_history,
    history_band,
    min_pairs,
    typical,
)
from rsi.nightly.figure import Figure
from rsi.search.stats import paired_ratio_ci

ITEMS = [1.0 + 0.1 * (r % 3) for r in range(30)]     # input set r % 3: its own speed, the same in every run


def night(true_us: float, seed: int, noise: float = 0.02, setup: str = "reps=30", reps: int = 30) -> Figure:
    """A judge-like figure: the kernel timed twice per repetition (a, b) in one loop; samples a, A/A b vs a."""
    rng = random.Random(seed)
    a = [true_us * ITEMS[r % 30] * rng.lognormvariate(0, noise) for r in range(reps)]
    b = [true_us * ITEMS[r % 30] * rng.lognormvariate(0, noise) for r in range(reps)]
    return Figure("verify/op/b", "op", "op b", "us", tuple(a), paired_ratio_ci(b, a), True, setup)


def test_min_pairs_is_where_the_bootstrap_ci_stops_reaching_the_extreme_pair():
    assert MIN_PAIRS == min_pairs(0.95)
    for n in (MIN_PAIRS - 1, MIN_PAIRS):
        ratios = [1.0 + 0.01 * k for k in range(n)]          # distinct ratios; cand = 1 so base/cand = ratio
        _, lo, _ = paired_ratio_ci(ratios, [1.0] * n)
        assert (lo < ratios[1]) == (n < MIN_PAIRS)         # below MIN_PAIRS the low end involves the smallest
    assert min_pairs(0.99) > MIN_PAIRS


def test_known_noise_is_not_a_regression():
    verdicts = [against_baseline(night(100.0, 2 * s + 1), night(100.0, 2 * s), float("nan")).status
                for s in range(10)]
    assert "slower" not in verdicts and "not comparable" not in verdicts


@pytest.mark.parametrize("factor,expected", [(1.15, "slower"), (0.85, "faster")])
def test_known_change_beyond_noise_is_found(factor, expected):
    for s in range(5):
        c = against_baseline(night(100.0 * factor, 2 * s + 1), night(100.0, 2 * s), float("nan"))
        assert c.status == expected and c.n == 30
        assert c.ci[0] <= c.ratio <= c.ci[1] and (c.ratio > 1) == (factor > 1)
        assert "A/A tonight" in c.band_from and "A/A baseline" in c.band_from


def test_between_night_drift_is_absorbed_by_the_history_band():
    shifts = [1.06, 0.95, 1.04, 0.94]                       # the machine's night-to-night drift, in-run noise 1%
    hist = [night(100.0 * f, 10 + k, noise=0.01) for k, f in enumerate(shifts)]
    tonight = night(100.0 * 1.05, 99, noise=0.01)
    base = hist[-1]
    alone = against_baseline(tonight, base, float("nan"))   # the in-run band alone: 1.05/0.94 looks like a slowdown
    assert alone.status == "slower"
    band = history_band(hist)
    assert band > 0.08
    with_history = against_baseline(tonight, base, band)
    assert with_history.status == "within noise" and "between nights" in with_history.band_from
    assert against_history(tonight, hist).status == "within noise"
    worse = against_history(night(100.0 * 1.4, 98, noise=0.01), hist)
    assert worse.status == "slower" and worse.against == "history"
    assert worse.ref_median == pytest.approx(sorted(typical(hist))[15], rel=0.05)


def test_too_few_samples_never_decide():
    few = night(100.0, 1, reps=MIN_PAIRS - 1)
    ten_x = night(1000.0, 2, reps=MIN_PAIRS - 1)
    c = against_baseline(ten_x, few, float("nan"))
    assert c.status == "not comparable" and "pairs" in c.reason
    assert against_history(ten_x, [few, night(100.0, 3, reps=MIN_PAIRS - 1)]).status == "not comparable"


def test_no_band_and_changed_setup_are_not_comparable():
    cur, base = night(300.0, 1), night(100.0, 2)
    blind = Figure(cur.key, cur.group, cur.label, cur.unit, cur.samples, None, True, cur.setup)
    blind_base = Figure(base.key, base.group, base.label, base.unit, base.samples, None, True, base.setup)
    c = against_baseline(blind, blind_base, float("nan"))
    assert c.status == "not comparable" and "no noise band" in c.reason
    c = against_baseline(night(300.0, 1, setup="reps=40"), base, float("nan"))
    assert c.status == "not comparable" and "setup changed" in c.reason
    assert against_history(cur, [base]) is None              # one earlier night: the baseline comparison again


def test_aa_of_pairs_repeated_work():
    assert aa_of([[1.0] * 3, [1.0] * 3]) is None             # 3 pairs < MIN_PAIRS
    rows = [[1.0, 2.0, 3.0, 4.0], [1.1, 2.2, 3.3, 4.4], [1.21, 2.42, 3.63, 4.84]]   # each request 10% slower
    med, lo, hi = aa_of(rows)
    assert med == pytest.approx(1.1) and lo == pytest.approx(1.1) and hi == pytest.approx(1.1)
