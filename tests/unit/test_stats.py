"""The promotion statistics (rsi.search.stats) on synthetic timing samples: each property below fails a test when
broken (ratio direction, median not mean, a bootstrap that resamples, the A/A band, the CI's low end)."""

from __future__ import annotations

import math
import random

import pytest

from rsi.search.stats import aa_band, beyond_noise, paired_ratio_ci, paired_ratios


def _times(mean_us: float, n: int = 40, noise: float = 0.01, seed: int = 0) -> list[float]:
    rng = random.Random(seed)
    return [mean_us * (1.0 + rng.gauss(0.0, noise)) for _ in range(n)]


def test_ratio_is_base_over_candidate():
    base, cand = _times(100.0, seed=1), _times(90.0, seed=2)
    med, lo, hi = paired_ratio_ci(base, cand)
    assert 1.09 < med < 1.13 and 1.0 < lo <= med <= hi  # candidate faster -> ratio > 1
    med_r, _, hi_r = paired_ratio_ci(cand, base)
    assert 0.88 < med_r < 0.92 and hi_r < 1.0
    assert paired_ratios([100.0, 50.0], [50.0, 100.0]) == [2.0, 0.5]


def test_point_estimate_and_ci_are_medians_not_means():
    # 15 repetitions agree (ratio 1), 4 are 10x outliers: the median ignores them, a mean would not (~2.9)
    base = [100.0] * 15 + [1000.0] * 4
    cand = [100.0] * 19
    med, lo, hi = paired_ratio_ci(base, cand)
    assert med == 1.0 and lo == 1.0 and hi == 1.0


def test_bootstrap_resamples_and_covers():
    base, cand = _times(100.0, noise=0.02, seed=3), _times(100.0, noise=0.02, seed=4)
    med, lo, hi = paired_ratio_ci(base, cand)
    assert lo < med < hi, "the CI must not collapse to the median"
    assert 0.004 < hi - lo < 0.05
    # a 95% CI of the median covers the true median (1.0) for most independent data sets
    covered = 0
    for k in range(30):
        _, lo_k, hi_k = paired_ratio_ci(_times(100.0, noise=0.02, seed=100 + k),
                                        _times(100.0, noise=0.02, seed=200 + k), n_boot=400)
        covered += lo_k <= 1.0 <= hi_k
    assert covered >= 24


def test_seeded_and_deterministic():
    base, cand = _times(100.0, seed=5), _times(95.0, seed=6)
    assert paired_ratio_ci(base, cand) == paired_ratio_ci(base, cand)
    assert paired_ratio_ci(base, cand, seed=1)[0] == paired_ratio_ci(base, cand, seed=2)[0]


def test_unusable_pairs_dropped_and_empty_is_nan():
    base = [100.0, 0.0, float("nan"), 100.0, float("inf"), 100.0]
    cand = [50.0, 50.0, 50.0, -1.0, 50.0, float("nan")]
    assert paired_ratios(base, cand) == [2.0]
    assert paired_ratio_ci(base, cand) == (2.0, 2.0, 2.0)
    assert all(math.isnan(x) for x in paired_ratio_ci([], []))
    assert all(math.isnan(x) for x in paired_ratio_ci([0.0, -1.0], [1.0, 1.0]))
    with pytest.raises(ValueError, match="different lengths"):
        paired_ratio_ci([1.0, 2.0], [1.0])


def test_aa_band_is_the_half_width_of_the_aa_noise():
    assert aa_band((0.98, 1.01)) == pytest.approx(0.02)
    assert aa_band((1.01, 1.03)) == pytest.approx(0.03)   # a systematic A/A offset counts in full
    assert aa_band((0.97, 0.995)) == pytest.approx(0.03)
    assert aa_band((0.999, 1.001)) == pytest.approx(0.001)
    assert aa_band((1.0, 1.0)) == 0.0
    assert math.isnan(aa_band((float("nan"), 1.0))) and math.isnan(aa_band(None))


def test_beyond_noise_uses_the_ci_low_end_and_the_band():
    assert beyond_noise((1.03, 1.05), 0.02)
    assert not beyond_noise((1.015, 1.2), 0.02)    # clears 1 but not the A/A band
    assert not beyond_noise((0.99, 1.10), 0.0)     # high end over 1, low end not
    assert beyond_noise((1.001, 1.01), 0.0)
    assert not beyond_noise((1.5, 1.6), float("nan"))
    assert not beyond_noise((float("nan"), 1.6), 0.0)


def test_end_to_end_aa_band_from_samples():
    """The candidate timed twice in one loop, its second timing 4% off the first (the run-6 kind of A/A gap): a
    3% win over a baseline has a CI clearing 1 but not the band; a 15% win clears both."""
    cand = _times(100.0, noise=0.005, seed=7)
    _, aa_lo, aa_hi = paired_ratio_ci(_times(104.0, noise=0.005, seed=8), cand)
    band = aa_band((aa_lo, aa_hi))
    assert 0.03 < band < 0.06
    _, lo, _ = paired_ratio_ci(_times(103.0, noise=0.005, seed=9), cand)
    assert lo > 1.0 and not beyond_noise((lo, 2.0), band)
    _, lo, _ = paired_ratio_ci(_times(115.0, noise=0.005, seed=10), cand)
    assert beyond_noise((lo, 2.0), band)
    # same-loop A/A without an offset: a narrow band, the 3% win counts
    _, aa_lo, aa_hi = paired_ratio_ci(_times(100.0, noise=0.005, seed=11), cand)
    _, lo, hi = paired_ratio_ci(_times(103.0, noise=0.005, seed=9), cand)
    assert beyond_noise((lo, hi), aa_band((aa_lo, aa_hi)))
