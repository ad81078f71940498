"""The report's tables as pandas DataFrames, shared by report.html, report.md and results.csv."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from rsi.nightly.compare import Comparison
from rsi.nightly.figure import Figure
from rsi.nightly.findings import Finding
from rsi.nightly.history import NightlyRun

HISTORY_COLUMNS = 5              # earlier nights shown beside each figure


@dataclass
class Report:
    out: Path
    state: dict[str, Any]
    figures: dict[str, Figure]
    comps: list[Comparison]
    findings: list[Finding]
    verdicts: list[dict[str, Any]]
    ranking: list[dict[str, Any]]
    phases: list[dict[str, Any]]
    base: NightlyRun | None
    history: list[NightlyRun]                  # newest first
    code: int
    notes: list[str] = field(default_factory=list)

    def comp(self, key: str, against: str) -> Comparison | None:
        return next((c for c in self.comps if c.key == key and c.against == against), None)

    def nights(self) -> list[tuple[str, dict[str, Figure]]]:
        """(label, figures) oldest first, the baseline included when it is not in the history, tonight last."""
        runs = list(reversed(self.history))
        if self.base is not None and all(r.id != self.base.id for r in runs):
            runs.insert(0, self.base)
        return [(night_label(r.id), r.figures) for r in runs] + [("tonight", self.figures)]


def night_label(run_id: str) -> str:
    """``20260102-030405-ab12cd`` -> ``01-02 03:04``."""
    try:
        d, t = run_id.split("-")[:2]
        return f"{d[4:6]}-{d[6:8]} {t[:2]}:{t[2:4]}"
    except (ValueError, IndexError):
        return run_id[:12]


def num(x: float | None, digits: int = 4) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    return f"{x:.{digits}g}"


def status_text(c: Comparison | None) -> str:
    if c is None:
        return "-"
    if c.status == "not comparable":
        return f"not comparable ({c.reason})"
    return f"{c.status}: {c.ratio:.3f}x [{c.ci[0]:.3f}, {c.ci[1]:.3f}], band {100 * c.band:.1f}%"


def findings(rep: Report, severities: tuple[str, ...]) -> pd.DataFrame:
    rows = [{"severity": f.severity, "kind": f.kind, "what": f.what, "detail": f.detail} for f in rep.findings
            if f.severity in severities]
    return pd.DataFrame(rows, columns=["severity", "kind", "what", "detail"])


def verdicts(rep: Report) -> pd.DataFrame:
    old = {(v["target"], v["op"]): v["status"] for v in (rep.base.summary.get("verdicts", []) if rep.base else [])}
    return pd.DataFrame([{"target": v["target"], "op": v["op"], "kernel": v["kernel"], "verdict": v["status"],
                          "timed": "yes" if v["timed"] else "no (correctness only)",
                          "baseline": old.get((v["target"], v["op"]), "-"), "reason": v["reason"]}
                         for v in rep.verdicts],
                        columns=["target", "op", "kernel", "verdict", "timed", "baseline", "reason"])


def ranking(rep: Report) -> pd.DataFrame:
    return pd.DataFrame([{"rank": i + 1, "op group": r["op"], "seconds per request": num(r["seconds"]),
                          "share of request": f"{100 * r['share']:.1f}%" if math.isfinite(r["share"]) else "-",
                          "fraction of limit": f"{100 * r['fraction']:.0f}%" if math.isfinite(r["fraction"]) else
                          "unknown", "headroom s": num(r["headroom_s"]), "limit": r["limit"],
                          "kernels": ", ".join(r["kernels"]), "searchable": "yes" if r["searchable"] else "no"}
                         for i, r in enumerate(rep.ranking)],
                        columns=["rank", "op group", "seconds per request", "share of request", "fraction of limit",
                                 "headroom s", "limit", "kernels", "searchable"])


def figure_table(rep: Report, keys: list[str]) -> pd.DataFrame:
    """One row per figure: tonight, the baseline and the history's verdicts, and the last nights' medians."""
    nights = rep.nights()[:-1][-HISTORY_COLUMNS:]
    rows = []
    for k in keys:
        f = rep.figures[k]
        b = rep.base.figures.get(k) if rep.base else None
        row = {"figure": f.label, "unit": f.unit, "n": len(f.samples), "median": num(f.median),
               "p20-p80": f"{num(f.quantile(0.2))}-{num(f.quantile(0.8))}",
               "baseline": num(b.median) if b else "-", "vs baseline": status_text(rep.comp(k, "baseline")),
               "vs history": status_text(rep.comp(k, "history"))}
        for label, figs in nights:
            row[label] = num(figs[k].median) if k in figs else "-"
        rows.append(row)
    return pd.DataFrame(rows)


def results(rep: Report) -> pd.DataFrame:
    """results.csv: one row per figure of tonight."""
    rows = []
    for k, f in rep.figures.items():
        row: dict[str, Any] = {"run_id": rep.state["run_id"], "key": k, "group": f.group, "label": f.label,
                               "unit": f.unit, "gates": f.gates, "setup": f.setup, "n": len(f.samples),
                               "median": f.median, "p20": f.quantile(0.2), "p80": f.quantile(0.8),
                               "aa_lo": f.aa[1] if f.aa else None, "aa_hi": f.aa[2] if f.aa else None,
                               "pct_copy": f.meta.get("pct_copy"), "kernel": f.meta.get("kernel")}
        for against in ("baseline", "history"):
            c = rep.comp(k, against)
            row |= {f"{against}_status": c.status if c else None, f"{against}_median": c.ref_median if c else None,
                    f"{against}_ratio": c.ratio if c else None, f"{against}_ci_lo": c.ci[0] if c else None,
                    f"{against}_ci_hi": c.ci[1] if c else None, f"{against}_band": c.band if c else None,
                    f"{against}_reason": c.reason if c else None}
        rows.append(row)
    return pd.DataFrame(rows)


def phases(rep: Report) -> pd.DataFrame:
    return pd.DataFrame([{"phase": p["name"], "status": p["status"], "exit": p.get("rc"),
                          "seconds": num(p.get("wall_s"), 3), "log": p.get("log", ""),
                          "note": (p.get("error") or "")[:300]} for p in rep.phases],
                        columns=["phase", "status", "exit", "seconds", "log", "note"])


def environment(rep: Report) -> pd.DataFrame:
    env, lock = rep.state.get("env", {}), rep.state.get("lock", {})
    rows = [{"key": k, "value": str(v)} for k, v in env.items()]
    rows += [{"key": "lock sha256", "value": str(lock.get("sha256"))}, {"key": "lock read from",
                                                                        "value": str(lock.get("from"))}]
    rows += [{"key": f"${k}", "value": v} for k, v in rep.state.get("repro_env", {}).items()]
    return pd.DataFrame(rows, columns=["key", "value"])
