"""The report's plots (matplotlib, Agg, PNG bytes): the pipeline stage waterfall, its history, and per op group the
kernel time and % of copy over the nights."""

from __future__ import annotations

import io
import math
from collections.abc import Sequence

from rsi.nightly.extract import STAGES
from rsi.nightly.figure import Figure

Night = tuple[str, dict[str, Figure]]          # (label, figures), oldest first, tonight last


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _colour(route: str, stage: str):
    """One colour per stage of the route, the same in the waterfall and its history (tab20: up to 20 stages)."""
    return _plt().get_cmap("tab20")(STAGES[route].index(stage) % 20)


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80, bbox_inches="tight")
    _plt().close(fig)
    return buf.getvalue()


def _stages(figs: dict[str, Figure], route: str) -> list[tuple[str, float]]:
    return [(s, figs[f"pipeline/{route}/{s}"].median) for s in STAGES[route] if f"pipeline/{route}/{s}" in figs]


def waterfall(figs: dict[str, Figure], route: str) -> bytes | None:
    """Tonight's steady-state request, stage after stage (median per stage), as a waterfall."""
    stages = _stages(figs, route)
    if not stages:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(stages) + 1.2))
    start = 0.0
    for i, (name, sec) in enumerate(stages):
        ax.barh(i, sec, left=start, color=_colour(route, name))
        ax.text(start + sec, i, f" {sec:.3g} s", va="center", fontsize=8)
        start += sec
    ax.set_yticks(range(len(stages)), [s for s, _ in stages])
    ax.invert_yaxis()
    n = len(figs[f"pipeline/{route}/{stages[0][0]}"].samples)
    ax.set_xlabel(f"seconds (median of {n} steady-state request{'s' if n > 1 else ''}; sum {start:.3g} s)")
    ax.set_title(f"{route}: stage waterfall")
    ax.set_xlim(0, start * 1.18)
    return _png(fig)


def waterfall_history(nights: Sequence[Night], route: str) -> bytes | None:
    """Per night, the steady request's stage medians stacked."""
    rows = [(label, dict(_stages(figs, route))) for label, figs in nights]
    rows = [(label, st) for label, st in rows if st]
    if not rows:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 3.2))
    bottom = [0.0] * len(rows)
    for name in STAGES[route]:
        vals = [st.get(name, 0.0) for _, st in rows]
        if any(vals):
            ax.bar(range(len(rows)), vals, bottom=bottom, label=name, color=_colour(route, name))
            bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_xticks(range(len(rows)), [label for label, _ in rows], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("seconds per request")
    ax.set_title(f"{route}: stages per night (tonight last)")
    ax.legend(fontsize=7, ncol=2, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return _png(fig)


def _series(nights: Sequence[Night], keys: list[str], value) -> dict[str, list[float]]:
    return {k: [value(figs[k]) if k in figs else math.nan for _, figs in nights] for k in keys}


def op_history(nights: Sequence[Night], group: str) -> bytes | None:
    """Kernel time (rsi verify and the verified kernel in rsi bench, per bucket) and its % of copy per night; the
    pipeline's own seconds per request for the op group where no kernel was timed (the CPU)."""
    keys = sorted({k for _, figs in nights for k, f in figs.items() if f.group == group})
    kernel = [k for k in keys if k.startswith("verify/") or (k.startswith("bench/") and k.endswith("/verified"))]
    pipe = [k for k in keys if k.startswith("pipeline/")]
    pct = _series(nights, kernel, lambda f: f.meta.get("pct_copy") or math.nan)
    has_pct = any(not math.isnan(x) for v in pct.values() for x in v)
    if not kernel and not pipe:
        return None
    plt = _plt()
    ncols = 2 if has_pct else 1
    fig, axes = plt.subplots(1, ncols, figsize=(5.2 * ncols, 3.0), squeeze=False)
    ax = axes[0][0]
    labels = [label for label, _ in nights]
    x = range(len(nights))
    series = _series(nights, kernel, lambda f: f.median) if kernel else _series(nights, pipe, lambda f: f.median)
    for k, ys in series.items():
        ax.plot(x, ys, marker="o", label=k.split("/", 1)[1][:48])
    ax.set_ylabel("kernel time (us, median)" if kernel else "seconds per request (pipeline)")
    ax.set_title(f"{group}: " + ("kernel time" if kernel else "time in the pipeline (no kernel timed here)"),
                 fontsize=10)
    if has_pct:
        ax2 = axes[0][1]
        for k, ys in pct.items():
            ax2.plot(x, ys, marker="o", label=k.split("/", 1)[1][:48])
        ax2.set_ylabel("% of copy bandwidth")
        ax2.set_title(f"{group}: % of copy", fontsize=10)
    for a in axes[0]:
        a.set_xticks(list(x), labels, rotation=30, ha="right", fontsize=7)
        a.legend(fontsize=6)
    return _png(fig)
