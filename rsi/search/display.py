"""Live rich table of candidates during a search, and the closing summary.

Everything shown here may hold text that a model, an agent or a server wrote (verdict reasons quote candidate
source and compiler errors, configs come from a reply's ``TUNABLE``, stop reasons quote server errors), so nothing
is ever printed as rich markup: cells and lines are :class:`rich.text.Text` (see :func:`plain`).
"""

from __future__ import annotations

import sys
from typing import Any, Self

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from rsi.contract import Candidate

_STYLE = {"accepted": "green", "rejected": "red"}


def plain(text: object, style: str = "") -> Text:
    """Untrusted text as it is: no markup (``[/bold]`` neither crashes nor vanishes), no emoji codes."""
    return Text(str(text), style=style)


def approximate_label(tolerance: dict) -> str:
    """"" for an exact class (bitwise, tolerance); for the approximate class "approximate" and, where the verdict or
    record observed them, its worst relative-L2 error and cosine against the exact op (rsi.contract.Approximate)."""
    if (tolerance or {}).get("class") != "approximate":
        return ""
    obs = tolerance.get("observed") or {}
    if "rel_l2" in obs and "cosine" in obs:
        return f"approximate: rel_l2 {obs['rel_l2']:.2e}, cosine {obs['cosine']:.5f} vs the exact op"
    return "approximate"


def echo(console: Console, *parts: object, style: str = "") -> None:
    """Print untrusted text verbatim (the parts are joined without a separator)."""
    console.print(Text.assemble(*[p if isinstance(p, Text) else str(p) for p in parts], style=style),
                  highlight=False)


class SearchDisplay:
    """``incumbents``: the op group's declared baselines (OpGroup.baselines); where there are any, the speed-up column
    is against the fastest of them instead of torch.compile."""

    def __init__(self, opts, run_id: str, buckets: tuple[str, ...], quiet: bool = False, max_rows: int = 25,
                 incumbents: tuple[str, ...] = ()):
        self.opts, self.run_id, self.buckets, self.quiet, self.max_rows = opts, run_id, buckets, quiet, max_rows
        self.incumbents = tuple(incumbents)
        self.vs_name = "incumbent" if self.incumbents else "compile"
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
            echo(self.console, plain("rsi search", "bold"), f" run {self.run_id}: op {self.opts.op}, backend "
                f"{self.opts.backend}, target {self.opts.target or 'interpreter'}" + (" (PROXY)" if self.opts.proxy
                                                                                       else ""))
        return self

    def __exit__(self, *exc) -> None:
        if self.live is not None:
            self.live.update(self._render())
            self.live.__exit__(*exc)

    def _render(self):
        t = Table(title=plain(f"rsi search {self.opts.op} - run {self.run_id}" + (" (PROXY)" if self.opts.proxy
                                                                                  else "")), expand=False)
        for col in ("#", "candidate", "config", "verdict", "stage", *[f"{b} us" for b in self.buckets],
                    f"vs {self.vs_name}", "late", "reason"):
            t.add_column(plain(col), overflow="fold")
        for r in self.rows[-self.max_rows:]:
            t.add_row(*[c if isinstance(c, Text) else plain(c) for c in r])
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
            echo(self.console, line)

    def start(self, seq: int, cand: Candidate) -> None:
        self.current = f"judging #{seq} {cand.hash[:10]} {dict(cand.config)} ..."
        self._refresh()

    def add(self, seq: int, verdict: dict, cand: Candidate, resumed: bool = False) -> None:
        times = {r["bucket"]: r for r in verdict.get("timings", [])}
        cells = []
        for b in self.buckets:
            r = times.get(b)
            cells.append(f"{r['p50_us']:.1f}" if r else ("n/m" if verdict["status"] == "accepted" else "-"))
        names = self.incumbents or ("compile",)
        comp = [r["baselines"][n]["speedup"] for r in times.values() for n in names if n in r["baselines"]]
        vs = f"{min(comp):.3f}x" if comp else "-"
        late = _late(times.values())
        label = approximate_label(verdict.get("tolerance", {}))
        status = verdict["status"] + (" (resumed)" if resumed else "") + (f" ({label})" if label else "")
        row = (str(seq), verdict["candidate"][:10], _short(cand.config), Text(status, style=_STYLE.get(verdict["status"], "")),
               verdict["stage"], *cells, vs, late or "-", verdict["reason"][:90])
        self.rows.append(row)
        self.current = ""
        self._refresh(f"#{seq} {verdict['candidate'][:10]} {_short(cand.config)} {status} [{verdict['stage']}] "
                      f"{' '.join(cells)} vs {self.vs_name} {vs}" + (f" late {late}" if late else "")
                      + f" - {verdict['reason'][:120]}")

    def note(self, text: str) -> None:
        self.notes.append(text)
        self._refresh(text)


def _late(rows) -> str:
    """The candidate's late timed calls over all buckets as "late/timed" (rsi.harness.timing.timed_call: the GPU had
    caught up with the host, so host time may be inside those intervals); "" where none were timed."""
    rows = [r for r in rows if "n" in r]
    return f"{sum(int(r.get('late', 0)) for r in rows)}/{sum(int(r['n']) for r in rows)}" if rows else ""


def _short(config) -> str:
    return ",".join(f"{k}={v}" for k, v in dict(config).items()) if config else ""


def print_summary(summary: dict, console: Console | None = None) -> None:
    console = console or Console()
    echo(console, "\n", plain("Summary", "bold"),
         f" run {summary['run_id']} ({summary['op']}, {summary['backend']}, target {summary['target'] or 'interpreter'}"
         f"{', PROXY' if summary.get('proxy') else ''}): {summary['candidates']} candidates, {summary['accepted']} "
         f"accepted, rejected by stage {summary['rejected_by_stage'] or '{}'}")
    best = summary.get("best")
    if not best:
        echo(console, "No candidate was accepted.")
    else:
        echo(console, f"Best candidate {best['candidate'][:12]} config {_short(best['config'])}"
             + (f" ({best['approximate']})" if best.get("approximate") else ""))
        if isinstance(best["per_shape"], str):
            echo(console, f"  {best['per_shape']}")
        else:
            t = Table()
            keys = [k for k in best["per_shape"][0] if k.startswith("vs_")]
            for c in ("bucket", "p50 us", "% copy", *keys, "late"):
                t.add_column(plain(c))
            for r in best["per_shape"]:
                t.add_row(plain(r["bucket"]), f"{r['p50_us']:.1f}", f"{r['pct_copy']:.1f}",
                          *[f"{r[k]:.3f}x" for k in keys], _late([r]) or "-")
            console.print(t)
    for p in summary.get("promoted", []):
        echo(console, f"Promoted {p['candidate'][:12]} -> {p['record']}/record.json"
             + (" (locked)" if p["locked"] else " (proxy: not locked)"))
    if not summary.get("promoted"):
        echo(console, "Nothing promoted" + (" (interpreter runs never promote)" if summary["backend"] != "cuda" else ""))
    prop = summary.get("proposer") or {}
    if prop.get("stop_reason"):  # LLM, agent and replay proposers: why the proposer stopped
        echo(console, f"Proposer stopped: {prop['stop_reason']}")
    spent = prop.get("spent")
    if spent:
        echo(console, f"Proposer spent: {spent.get('calls', 0)} calls ({spent.get('failed_calls', 0)} failed, "
                      f"{spent.get('cached', 0)} cached), {spent.get('input_tokens', 0)}+"
                      f"{spent.get('output_tokens', 0)} tokens, ${spent.get('cost_usd', 0.0):.4f}")
    sys.stdout.flush()
