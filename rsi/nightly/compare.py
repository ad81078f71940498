"""Figure against figure: the judge's statistics (rsi.search.stats) applied between nightly runs.

A figure of tonight's run and the same figure of a reference run pair by work item (rsi/nightly/figure.py). Per
pair the ratio tonight / reference (> 1: tonight slower); its median and percentile-bootstrap 95% CI come from
``paired_ratio_ci`` (2000 resamples, seed 0), as in the judge. Then, with ``band`` the noise band:

* **slower**: the CI's low end clears ``1 + band`` (``beyond_noise``: the judge's promotion test, with tonight in
  the place of the baseline it has to beat);
* **faster**: the same test on reference / tonight;
* **within noise**: neither (a wide band says the run was too noisy to tell, not that nothing changed);
* **not comparable**: fewer than ``MIN_PAIRS`` pairs, a different setup (sizes, reps), or no band measured. Never a
  pass or a regression by fiat.

The band is the widest of: each run's in-run A/A band (``aa_band`` of the figure's own same-work-twice ratio: the
judge's ``aa``, bench's ``verified_aa``, consecutive pipeline requests), and the between-night band of the history
(``history_band``: how far each earlier night strays from the typical of the others, leave one out). The in-run
band alone misses what changes between processes and days; the report says which bands were measured.

Against the history (the last N nightlies with the figure at the same setup, at least ``MIN_HISTORY``), the
reference is the typical night: per work item the median over those nights.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from rsi.nightly.figure import Figure
from rsi.search.stats import aa_band, beyond_noise, paired_ratio_ci

MIN_HISTORY = 2        # with one earlier night the history is that night: the baseline comparison again


@cache
def min_pairs(level: float = 0.95) -> int:
    """The fewest pairs whose bootstrap CI of the median (``paired_ratio_ci``) can exclude the extreme pair.

    A resample's median involves the smallest ratio when at least ceil(n/2) of its n draws are that ratio
    (X ~ Binomial(n, 1/n)); below this n that happens in more than (1 - level)/2 of the resamples, so the CI always
    reaches the extreme pair and says nothing. 7 at 95%."""
    tail = (1.0 - level) / 2
    n = 2
    while True:
        k0, p = math.ceil(n / 2), 1.0 / n
        if sum(math.comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(k0, n + 1)) < tail:
            return n
        n += 1


MIN_PAIRS = min_pairs()


def aa_of(rows: Sequence[Sequence[float]]) -> tuple[float, float, float] | None:
    """The in-run A/A ratio of repeated work: rows[i + 1][j] against rows[i][j] (request i+1's step j against
    request i's, or step j+1 against step j as rows of one), as ``paired_ratio_ci``; None below ``MIN_PAIRS``
    pairs."""
    later, earlier = [], []
    for a, b in zip(rows[1:], rows[:-1]):
        n = min(len(a), len(b))
        later += list(a[:n])
        earlier += list(b[:n])
    if len(later) < MIN_PAIRS:
        return None
    med, lo, hi = paired_ratio_ci(later, earlier)
    return None if math.isnan(med) else (med, lo, hi)


def band_of(fig: Figure | None) -> float:
    return aa_band(fig.aa[1:]) if fig is not None and fig.aa else float("nan")


def typical(figs: Sequence[Figure]) -> list[float]:
    """Per work item the median over the nights (the common prefix of their samples)."""
    n = min((len(f.samples) for f in figs), default=0)
    return [statistics.median(f.samples[j] for f in figs) for j in range(n)]


def history_band(figs: Sequence[Figure]) -> float:
    """The between-night band: for each night, ``aa_band`` of its paired ratio CI against the typical of the
    other nights; the widest. NaN with fewer than ``MIN_HISTORY`` nights or ``MIN_PAIRS`` pairs."""
    if len(figs) < MIN_HISTORY:
        return float("nan")
    bands = []
    for i, f in enumerate(figs):
        rest = typical([g for k, g in enumerate(figs) if k != i])
        n = min(len(rest), len(f.samples))
        if n < MIN_PAIRS:
            return float("nan")
        _, lo, hi = paired_ratio_ci(f.samples[:n], rest[:n])
        bands.append(aa_band((lo, hi)))
    return max(bands) if all(math.isfinite(b) for b in bands) else float("nan")


@dataclass(frozen=True)
class Comparison:
    key: str
    against: str                    # "baseline" or "history"
    status: str                     # "slower", "faster", "within noise", "not comparable"
    ratio: float                    # median of tonight / reference per pair (> 1: slower)
    ci: tuple[float, float]
    band: float
    band_from: str                  # which bands were measured
    n: int                          # pairs
    ref_median: float
    reason: str = ""

    @property
    def regression(self) -> bool:
        return self.status == "slower"

    def to_json(self) -> dict:
        return {"key": self.key, "against": self.against, "status": self.status, "ratio": self.ratio,
                "ci": list(self.ci), "band": self.band, "band_from": self.band_from, "n": self.n,
                "ref_median": self.ref_median, "reason": self.reason}


NAN2 = (float("nan"), float("nan"))


def compare(cur: Figure, ref_samples: Sequence[float], against: str, bands: dict[str, float],
            ref_setup: str | None = None) -> Comparison:
    """Tonight's figure against reference samples in the same work-item order. ``bands``: name -> band (NaN when
    not measured)."""
    ref_med = statistics.median(ref_samples) if ref_samples else float("nan")

    def nc(reason: str, n: int = 0) -> Comparison:
        return Comparison(cur.key, against, "not comparable", float("nan"), NAN2, float("nan"), "", n, ref_med,
                          reason)

    if ref_setup is not None and ref_setup != cur.setup:
        return nc(f"setup changed: {ref_setup or '-'} -> {cur.setup or '-'}")
    n = min(len(cur.samples), len(ref_samples))
    if n < MIN_PAIRS:
        return nc(f"{n} pair{'s' * (n != 1)} < {MIN_PAIRS}", n)
    measured = {k: b for k, b in bands.items() if math.isfinite(b)}
    if not measured:
        return nc(f"no noise band (no A/A in either run, < {MIN_HISTORY} earlier nights)", n)
    band = max(measured.values())
    band_from = ", ".join(f"{k} {100 * b:.1f}%" for k, b in measured.items())
    ratio, lo, hi = paired_ratio_ci(cur.samples[:n], ref_samples[:n])
    if beyond_noise((lo, hi), band):
        status = "slower"
    elif beyond_noise(paired_ratio_ci(ref_samples[:n], cur.samples[:n])[1:], band):
        status = "faster"
    else:
        status = "within noise"
    return Comparison(cur.key, against, status, ratio, (lo, hi), band, band_from, n, ref_med)


def against_baseline(cur: Figure, base: Figure, hist_band: float) -> Comparison:
    bands = {"A/A tonight": band_of(cur), "A/A baseline": band_of(base), "between nights": hist_band}
    return compare(cur, base.samples, "baseline", bands, base.setup)


def against_history(cur: Figure, history: Sequence[Figure]) -> Comparison | None:
    """None when fewer than ``MIN_HISTORY`` earlier nights have the figure at tonight's setup."""
    same = [f for f in history if f.setup == cur.setup]
    if len(same) < MIN_HISTORY:
        return None
    bands = {"A/A tonight": band_of(cur), "between nights": history_band(same)}
    return compare(cur, typical(same), "history", bands)
