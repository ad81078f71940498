"""The promotion statistics: paired ratios, their bootstrap CI, the A/A noise band and the beyond-noise test.

Pure Python (no torch), so that the rule is unit-tested end to end on synthetic samples
(``tests/unit/test_stats.py``, ``tests/unit/test_promote.py``).

* ``paired_ratio_ci``: per repetition r the ratio base[r] / cand[r] (> 1: the candidate is faster), the median of
  those ratios, and a percentile-bootstrap 95% CI of that median. Repetitions are paired because the harness times
  the implementations interleaved in the same loop: a slow repetition (clock dip, a neighbour on the host) slows
  both sides of a pair.
* ``aa_band``: the candidate timed twice in the same loop gives an A/A ratio (its second timing over its first);
  its CI says how far apart two timings of the *same* kernel land in this run. The half-width of that noise,
  ``max(0, 1 - lo, hi - 1)``, is the band a real speed-up must clear.
* ``beyond_noise``: a baseline is beaten beyond noise when the low end of its CI exceeds ``1 + band``.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence

NAN3 = (float("nan"), float("nan"), float("nan"))


def _usable(x: float) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


def paired_ratios(base_us: Sequence[float], cand_us: Sequence[float]) -> list[float]:
    """base[r] / cand[r] for every repetition r where both times are finite and positive (others dropped).

    The two sequences must be the same length: they are the same repetitions of one interleaved loop."""
    if len(base_us) != len(cand_us):
        raise ValueError(f"paired samples of different lengths ({len(base_us)} base, {len(cand_us)} candidate)")
    return [b / c for b, c in zip(base_us, cand_us) if _usable(b) and _usable(c)]


def paired_ratio_ci(base_us: Sequence[float], cand_us: Sequence[float], n_boot: int = 2000,
                    seed: int = 0) -> tuple[float, float, float]:
    """(median, lo, hi): the median of the paired ratios base/cand (> 1: candidate faster) and the percentile
    bootstrap 95% CI of that median (``n_boot`` resamples with replacement, fixed ``seed``). NaN triple when no
    usable pair is left."""
    ratios = paired_ratios(base_us, cand_us)
    if not ratios or n_boot < 1:
        return NAN3
    rng = random.Random(seed)
    n = len(ratios)
    meds = sorted(statistics.median(rng.choices(ratios, k=n)) for _ in range(n_boot))
    lo_k = min(n_boot - 1, int(0.025 * n_boot))
    hi_k = max(lo_k, int(0.975 * n_boot) - 1)
    return statistics.median(ratios), meds[lo_k], meds[hi_k]


def aa_band(aa_ci: Sequence[float]) -> float:
    """Half-width of the A/A noise from the A/A ratio's 95% CI (lo, hi): ``max(0, 1 - lo, hi - 1)``.

    NaN when the CI is missing or not finite: then the noise is unknown and nothing may be promoted on it."""
    try:
        lo, hi = float(aa_ci[0]), float(aa_ci[1])
    except (TypeError, ValueError, IndexError):
        return float("nan")
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return float("nan")
    return max(0.0, 1.0 - lo, hi - 1.0)


def beyond_noise(ci95: Sequence[float], band: float) -> bool:
    """Whether a baseline is beaten beyond noise: the CI's low end clears ``1 + band``. False (fail closed) for an
    unknown band or a non-finite CI."""
    lo = float(ci95[0])
    return math.isfinite(band) and band >= 0 and math.isfinite(lo) and lo > 1.0 + band
