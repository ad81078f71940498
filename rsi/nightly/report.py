"""The nightly's files: ``report.html`` (one self-contained page: plots as data: URIs), ``report.md`` (the same
tables, plots linked from ``plots/``), ``results.csv`` (one row per figure) and ``repro.sh`` (the exact commands and
environment).

Page order: summary, regressions, other findings, verdicts of the locked kernels, what to search next, the pipeline
(waterfall, its history, the stage table), one section per op group (table with history, kernel time and % of copy
over the nights), phases, environment, method.
"""

from __future__ import annotations

import base64
import html
import shlex
import sys
from pathlib import Path

import pandas as pd

from rsi.nightly import plots
from rsi.nightly import tables as T
from rsi.nightly.compare import MIN_HISTORY, MIN_PAIRS
from rsi.nightly.plan import ROUTES

CSS = """body{font-family:system-ui,sans-serif;margin:24px;color:#1b1b1b;max-width:1400px}
table{border-collapse:collapse;font-size:13px;margin:8px 0 16px}th,td{border:1px solid #ccc;padding:3px 6px;
text-align:left;vertical-align:top}th{background:#f0f0f0}.bad{background:#fde2e1;border-left:6px solid #c62828;
padding:10px}.ok{background:#e3f4e4;border-left:6px solid #2e7d32;padding:10px}code{font-size:12px}
img{max-width:100%;border:1px solid #ddd;margin:4px 0}h2{border-bottom:2px solid #333;padding-bottom:2px}"""

METHOD = (f"Each figure keeps every sample in work-item order (judge repetitions, pipeline requests and steps), so "
          f"tonight and a reference pair item by item. Ratio = tonight / reference per pair; its median and "
          f"percentile-bootstrap 95% CI are the judge's (rsi.search.stats.paired_ratio_ci). Slower: the CI's low end"
          f" clears 1 + band; faster: the same on reference / tonight; else within noise (a wide band: too noisy to "
          f"tell). The band is the widest measured of: each run's in-run A/A (the same work timed twice: the judge's"
          f" aa, bench's verified_aa, consecutive requests or steps) and the between-night band of the history "
          f"(leave-one-out over at least {MIN_HISTORY} earlier nights). Fewer than {MIN_PAIRS} pairs (below which "
          f"the bootstrap CI of a median always reaches the extreme pair), a changed setup or no band at all: not "
          f"comparable, never a pass or a regression. The history's reference is the per-item median of the last "
          f"nights at the same setup. Only gating figures (locked kernels, pipeline stages) make a regression; "
          f"eager, torch.compile and copy are context.")


def _groups(rep: T.Report) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """(route -> pipeline stage keys, op group -> keys) in page order."""
    routes = {r: [k for k, f in rep.figures.items() if f.group == f"pipeline/{r}"] for r in ROUTES}
    order = [r["op"] for r in rep.ranking]
    ops = sorted({f.group for f in rep.figures.values() if not f.group.startswith("pipeline/")} |
                 {v["op"] for v in rep.verdicts}, key=lambda g: (order.index(g) if g in order else len(order), g))
    return ({r: ks for r, ks in routes.items() if ks},
            {g: [k for k, f in rep.figures.items() if f.group == g] for g in ops})


def _plots(rep: T.Report) -> dict[str, bytes]:
    nights = rep.nights()
    routes, ops = _groups(rep)
    out = {}
    for r in routes:
        for name, png in ((f"waterfall-{r}", plots.waterfall(rep.figures, r)),
                          (f"history-{r}", plots.waterfall_history(nights, r))):
            if png:
                out[name] = png
    for g in ops:
        png = plots.op_history(nights, g)
        if png:
            out[f"op-{g}"] = png
    return out


def headline(rep: T.Report) -> tuple[str, str]:
    n = sum(f.severity == "regression" for f in rep.findings)
    if rep.code:
        return "bad", f"REGRESSED (exit 1): {n} regression{'s' * (n != 1)}"
    return "ok", "no regression (exit 0)"


def counts(rep: T.Report) -> list[str]:
    st = rep.state
    base = (f"baseline {rep.base.id} ({rep.base.where})" if rep.base else "no baseline (first nightly of this "
            "target, or --baseline none)")
    by: dict[str, int] = {}
    for c in rep.comps:
        if c.against == "baseline":
            by[c.status] = by.get(c.status, 0) + 1
    sev = {s: sum(f.severity == s for f in rep.findings) for s in ("regression", "change", "improvement", "note")}
    ph = {s: sum(p["status"] == s for p in rep.phases) for s in ("ok", "failed", "skipped")}
    env = st.get("env", {})
    return [f"run {st['run_id']} in {rep.out}" + (f" (resumed {st['resumed']}x)" if st.get("resumed") else ""),
            (f"machine: {env.get('gpu_name') or 'CPU (no GPU)'}, torch {env.get('torch')}, Triton {env.get('triton')}, "
            f"rsi {str(env.get('rsi_commit'))[:12]}{' (dirty)' if env.get('rsi_dirty') else ''}, lock sha256 "
            f"{str(st.get('lock', {}).get('sha256'))[:12]}"),
            base + f"; {len(rep.history)} earlier nights in the history",
            "findings: " + ", ".join(f"{v} {k}{'s' * (v != 1)}" for k, v in sev.items()),
            f"{len(rep.figures)} figures; against the baseline: " + (", ".join(f"{v} {k}" for k, v in by.items())
                                                                    or "none compared"),
            "phases: " + ", ".join(f"{v} {k}" for k, v in ph.items()), *rep.notes]


def _tbl(df: pd.DataFrame) -> str:
    return df.to_html(index=False, escape=True, border=0, na_rep="-") if len(df) else "<p>none</p>"


def _no_verify(rep: T.Report) -> str:
    return "" if any(p["kind"] == "verify" for p in rep.phases) else "rsi verify did not run tonight (--phases)"


def _verify_html(rep: T.Report) -> str:
    return f"<p>{_no_verify(rep)}</p>" if _no_verify(rep) else _tbl(T.verdicts(rep))


def _img(png: bytes | None, alt: str) -> str:
    if not png:
        return ""
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode()}">'


def render_html(rep: T.Report, pngs: dict[str, bytes]) -> str:
    cls, head = headline(rep)
    routes, ops = _groups(rep)
    e = html.escape
    p = [(f"<!doctype html><html><head><meta charset='utf-8'><title>rsi nightly {e(rep.state['run_id'])}</title>"
         f"<style>{CSS}</style></head><body>"),
         f"<h1>rsi nightly {e(rep.state['run_id'])}</h1>",
         f"<section id='summary'><h2>Summary</h2><div class='{cls}'><b>{e(head)}</b></div><ul>"
         + "".join(f"<li>{e(x)}</li>" for x in counts(rep)) + "</ul></section>",
         f"<section id='regressions'><h2>Regressions</h2>{_tbl(T.findings(rep, ('regression',)))}</section>",
         ("<section id='findings'><h2>Changes, improvements, notes</h2>"
         f"{_tbl(T.findings(rep, ('change', 'improvement', 'note')))}</section>"),
         f"<section id='verify'><h2>Locked kernels (rsi verify)</h2>{_verify_html(rep)}</section>",
         ("<section id='next'><h2>What to search next</h2><p>Ranked by headroom = pipeline time x (1 - fraction of "
         "the physical limit reached); <code>rsi search --op-group next</code> searches the first searchable one."
         f"</p>{_tbl(T.ranking(rep))}</section>"),
         "<section id='pipeline'><h2>Pipeline</h2>"]
    for r, keys in routes.items():
        p.append(f"<h3 id='pipeline-{r}'>{e(r)}</h3>" + _img(pngs.get(f"waterfall-{r}"), f"{r} waterfall")
                 + _img(pngs.get(f"history-{r}"), f"{r} history") + _tbl(T.figure_table(rep, keys)))
    if not routes:
        p.append("<p>no pipeline phase ran</p>")
    p.append("</section><section id='op-groups'><h2>Op groups</h2>")
    for g, keys in ops.items():
        p.append(f"<h3 id='op-{e(g)}'>{e(g)}</h3>" + _img(pngs.get(f"op-{g}"), f"{g} over time")
                 + (_tbl(T.figure_table(rep, keys)) if keys else "<p>no timed figure on this machine</p>"))
    p += ["</section>", f"<section id='phases'><h2>Phases</h2>{_tbl(T.phases(rep))}</section>",
          f"<section id='environment'><h2>Environment</h2>{_tbl(T.environment(rep))}</section>",
          f"<section id='method'><h2>Method</h2><p>{e(METHOD)}</p></section></body></html>"]
    return "\n".join(p)


def _md(df: pd.DataFrame) -> str:
    if not len(df):
        return "none\n"
    cell = lambda v: str(v).replace("|", "\\|").replace("\n", " ")
    lines = ["| " + " | ".join(cell(c) for c in df.columns) + " |", "|" + "---|" * len(df.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines) + "\n"


def render_md(rep: T.Report, pngs: dict[str, bytes]) -> str:
    _, head = headline(rep)
    routes, ops = _groups(rep)
    out = [f"# rsi nightly {rep.state['run_id']}\n", f"**{head}**\n", *[f"- {x}" for x in counts(rep)], "",
           "## Regressions\n", _md(T.findings(rep, ("regression",))),
           "## Changes, improvements, notes\n", _md(T.findings(rep, ("change", "improvement", "note"))),
           "## Locked kernels (rsi verify)\n", _no_verify(rep) + "\n" if _no_verify(rep) else _md(T.verdicts(rep)),
           "## What to search next\n", _md(T.ranking(rep)), "## Pipeline\n"]
    for r, keys in routes.items():
        out += [f"### {r}\n"] + [f"![{n}](plots/{n}.png)\n" for n in (f"waterfall-{r}", f"history-{r}")
                                 if n in pngs] + [_md(T.figure_table(rep, keys))]
    out.append("## Op groups\n")
    for g, keys in ops.items():
        out += [f"### {g}\n"] + ([f"![{g}](plots/op-{g}.png)\n"] if f"op-{g}" in pngs else []) + \
               [_md(T.figure_table(rep, keys)) if keys else "no timed figure on this machine\n"]
    out += ["## Phases\n", _md(T.phases(rep)), "## Environment\n", _md(T.environment(rep)), "## Method\n", METHOD]
    return "\n".join(out) + "\n"


def render_repro(rep: T.Report) -> str:
    st, env = rep.state, rep.state.get("env", {})
    out, py = str(rep.out), sys.executable

    def word(a: str) -> str:
        if a == py:
            return '"$PY"'
        if a == out or a.startswith(out + "/"):
            return '"$OUT"' + shlex.quote(a[len(out):]) if a != out else '"$OUT"'
        return shlex.quote(a)

    argv = list(st.get("argv", []))
    if "--out" in argv:
        argv[argv.index("--out") + 1] = out
    else:
        argv += ["--out", out]
    lines = ["#!/usr/bin/env bash",
             (f"# rsi nightly {st['run_id']}: {env.get('gpu_name') or 'CPU, no GPU'} on {env.get('host')}; torch "
             f"{env.get('torch')}, Triton {env.get('triton')}, CUDA {env.get('cuda')}, driver {env.get('driver') or '-'}"
             f", Python {env.get('python')}"),
             (f"# rsi commit {env.get('rsi_commit')}{' (dirty)' if env.get('rsi_dirty') else ''}; "
             f"verified_kernels/LOCK.json sha256 {st.get('lock', {}).get('sha256')}"),
             ("# Run from the repository root at that commit. A nightly resumes the phases already done in OUT: set "
             "OUT to a new folder for a fresh run."), "set -euo pipefail"]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in st.get("repro_env", {}).items()]
    lines += ["PY=${PY:-python}", f"OUT=${{OUT:-{shlex.quote(out)}}}", "# the nightly:",
              '"$PY" -m rsi ' + " ".join(word(a) for a in argv),
              "# the phases it ran (each can be run alone):"]
    lines += ["# " + " ".join(word(a) for a in p["command"]) for p in rep.phases if p["status"] != "skipped"]
    return "\n".join(lines) + "\n"


def write_all(rep: T.Report) -> dict[str, Path]:
    pngs = _plots(rep)
    d = rep.out / "plots"
    d.mkdir(parents=True, exist_ok=True)
    for name, png in pngs.items():
        (d / f"{name}.png").write_bytes(png)
    files = {"html": rep.out / "report.html", "md": rep.out / "report.md", "csv": rep.out / "results.csv",
             "repro": rep.out / "repro.sh"}
    files["html"].write_text(render_html(rep, pngs))
    files["md"].write_text(render_md(rep, pngs))
    T.results(rep).to_csv(files["csv"], index=False)
    files["repro"].write_text(render_repro(rep))
    files["repro"].chmod(0o755)
    return files
