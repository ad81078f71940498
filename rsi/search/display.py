"""Live rich table of candidates during a search, and the closing summary."""

from __future__ import annotations

import sys
from typing import Any, Self

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from rsi.contract import Candidate

_STYLE = {"accepted": "green", "rejected": "red"}


class SearchDisplay:
    def __init__(self, opts, run_id: str, buckets: tuple[str, ...], quiet: bool = False, max_rows: int = 25):
        self.opts, self.run_id, self.buckets, self.quiet, self.max_rows = opts, run_id, buckets, quiet, max_rows
        self.console = Console(stderr=False)
        self.rows: list[tuple] = []
        self.notes: list[str] = []
        self.current = ""
        self.live: Live | None = None

    def __enter__(self) -> Self:
        if not self.quiet and self.console.is_terminal:
            self.live = Live(self._render(), console=self.console, refresh_per_second=4, transient=False)
            self.live.__enter__()
        elif not self.quiet:
            self.console.print(f"[bold]rsi search[/] run {self.run_id}: op {self.opts.op}, backend {self.opts.backend}, "
                               f"target {self.opts.target or 'interpreter'}" + (" (PROXY)" if self.opts.proxy else ""))
        return self

    def __exit__(self, *exc) -> None:
        if self.live is not None:
            self.live.update(self._render())
            self.live.__exit__(*exc)

    def _render(self):
        t = Table(title=f"rsi search {self.opts.op} - run {self.run_id}" + (" (PROXY)" if self.opts.proxy else ""),
                  expand=False)
        for col in ("#", "candidate", "config", "verdict", "stage", *[f"{b} us" for b in self.buckets],
                    "vs compile", "reason"):
            t.add_column(col, overflow="fold")
        for r in self.rows[-self.max_rows:]:
            t.add_row(*r)
        parts: list[Any] = [t]
        if self.current:
            parts.append(Text(self.current, style="yellow"))
        for n in self.notes[-5:]:
            parts.append(Text(n, style="cyan"))
        return Group(*parts)

    def _refresh(self, line: str | None = None) -> None:
        if self.live is not None:
            self.live.update(self._render())
        elif not self.quiet and line:
            self.console.print(line, highlight=False)

    def start(self, seq: int, cand: Candidate) -> None:
        self.current = f"judging #{seq} {cand.hash[:10]} {dict(cand.config)} ..."
        self._refresh()

    def add(self, seq: int, verdict: dict, cand: Candidate, resumed: bool = False) -> None:
        times = {r["bucket"]: r for r in verdict.get("timings", [])}
        cells = []
        for b in self.buckets:
            r = times.get(b)
            cells.append(f"{r['p50_us']:.1f}" if r else ("n/m" if verdict["status"] == "accepted" else "-"))
        comp = [r["baselines"]["compile"]["speedup"] for r in times.values() if "compile" in r["baselines"]]
        vs = f"{min(comp):.3f}x" if comp else "-"
        status = verdict["status"] + (" (resumed)" if resumed else "")
        row = (str(seq), verdict["candidate"][:10], _short(cand.config), Text(status, style=_STYLE.get(verdict["status"], "")),
               verdict["stage"], *cells, vs, verdict["reason"][:90])
        self.rows.append(row)
        self.current = ""
        self._refresh(f"#{seq} {verdict['candidate'][:10]} {_short(cand.config)} {status} [{verdict['stage']}] "
                      f"{' '.join(cells)} vs compile {vs} - {verdict['reason'][:120]}")

    def note(self, text: str) -> None:
        self.notes.append(text)
        self._refresh(text)


def _short(config) -> str:
    return ",".join(f"{k}={v}" for k, v in dict(config).items()) if config else ""


def print_summary(summary: dict, console: Console | None = None) -> None:
    console = console or Console()
    console.print(f"\n[bold]Summary[/] run {summary['run_id']} ({summary['op']}, {summary['backend']}, "
                  f"target {summary['target'] or 'interpreter'}{', PROXY' if summary.get('proxy') else ''}): "
                  f"{summary['candidates']} candidates, {summary['accepted']} accepted, rejected by stage "
                  f"{summary['rejected_by_stage'] or '{}'}")
    best = summary.get("best")
    if not best:
        console.print("No candidate was accepted.")
    else:
        console.print(f"Best candidate {best['candidate'][:12]} config {_short(best['config'])}")
        if isinstance(best["per_shape"], str):
            console.print(f"  {best['per_shape']}")
        else:
            t = Table()
            keys = [k for k in best["per_shape"][0] if k.startswith("vs_")]
            for c in ("bucket", "p50 us", "% copy", *keys):
                t.add_column(c)
            for r in best["per_shape"]:
                t.add_row(r["bucket"], f"{r['p50_us']:.1f}", f"{r['pct_copy']:.1f}", *[f"{r[k]:.3f}x" for k in keys])
            console.print(t)
    for p in summary.get("promoted", []):
        console.print(f"Promoted {p['candidate'][:12]} -> {p['record']}/record.json"
                      + (" (locked)" if p["locked"] else " (proxy: not locked)"))
    if not summary.get("promoted"):
        console.print("Nothing promoted" + (" (interpreter runs never promote)" if summary["backend"] != "cuda" else ""))
    sys.stdout.flush()
