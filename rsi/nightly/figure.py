"""A figure: one measured quantity of a nightly run with every sample behind it.

Samples are kept in work-item order (repetition r of the judge's interleaved loop runs the same input set in every
run; request i, step j of the pipeline does the same work in every run), so two runs' figures pair item by item,
as the judge pairs repetitions (rsi/nightly/compare.py). ``aa`` is the figure's own A/A measurement from the same
run: the same work timed twice (the judge's ``aa`` entry, bench's ``verified_aa``, or consecutive pipeline
requests), as (median, lo, hi) of the paired ratio; None where the run has none.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Figure:
    key: str                                # unique in a run: "verify/modulate/stage1", "pipeline/two-stage/stage1"
    group: str                              # report section: an op group's name, or "pipeline/<route>"
    label: str                              # what a person reads in a table
    unit: str                               # "us" or "s"
    samples: tuple[float, ...]              # every sample, in work-item order
    aa: tuple[float, float, float] | None = None   # in-run A/A ratio (median, lo, hi)
    gates: bool = True                      # a slowdown beyond noise is a regression (False: context only)
    setup: str = ""                         # what was measured (sizes, reps); different setups are not compared
    meta: dict[str, Any] = field(default_factory=dict)   # pct_copy, kernel, calls per request, op, dims, ...

    def usable(self) -> list[float]:
        return [x for x in self.samples if isinstance(x, (int, float)) and math.isfinite(x) and x > 0]

    @property
    def median(self) -> float:
        xs = self.usable()
        return statistics.median(xs) if xs else float("nan")

    def quantile(self, q: float) -> float:
        xs = sorted(self.usable())
        return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["samples"], d["aa"] = list(self.samples), list(self.aa) if self.aa else None
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Figure:
        aa = d.get("aa")
        return cls(key=d["key"], group=d["group"], label=d["label"], unit=d["unit"],
                   samples=tuple(float(x) for x in d["samples"]), aa=tuple(aa) if aa else None,
                   gates=bool(d.get("gates", True)), setup=d.get("setup", ""), meta=dict(d.get("meta") or {}))
