"""``rsi show``: runs, candidates and verdicts from the store as tables.

Sources, configs, verdict reasons and transcripts hold text a model or a server wrote: all of it is printed as
plain :class:`rich.text.Text`, never as markup.
"""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from rsi.search.display import approximate_label, echo, plain
from rsi.store import Store


def _store(a) -> Store:
    path = Path(a.root) / a.db
    if not path.exists():
        raise FileNotFoundError(f"no database at {path}: run `rsi search` first, or pass --root/--db")
    return Store(path, a.root)


def show(a, console: Console) -> int:
    if a.ops:
        from rsi.refs import get_op_group, op_names

        t = Table(title="op groups")
        for c in ("op", "tolerance", "shapes", "non-contiguous inputs"):
            t.add_column(c, overflow="fold")
        for name in op_names():
            g = get_op_group(name)
            t.add_row(*map(plain, (name, json.dumps(g.tolerance.describe()), ", ".join(s.key() for s in g.shapes),
                                   ", ".join(g.noncontiguous_inputs) or "-")))
        console.print(t)
        return 0
    store = _store(a)
    # a run whose process is gone from this host is `interrupted`, not `running` forever (--dry-run: shown, not written)
    dead = set(store.reap_dead_runs(write=not getattr(a, "dry_run", False)))

    def status(r) -> str:
        return "interrupted" if r.id in dead else r.status

    if a.candidate:
        row = store.conn.execute("SELECT hash FROM rsi_candidates WHERE hash LIKE ?", (a.candidate + "%",)).fetchone()
        if row is None:
            raise FileNotFoundError(f"no candidate with hash prefix {a.candidate}")
        cand = store.load_candidate(row["hash"])
        echo(console, plain(cand.hash, "bold"), f" op {cand.op} origin {cand.origin} parent {cand.parent}")
        echo(console, f"config {dict(cand.config)}")
        for e in store.conn.execute("SELECT run_id, seq, status, stage, reason FROM rsi_evaluations WHERE candidate=?",
                                    (cand.hash,)):
            echo(console, f"  run {e['run_id']} #{e['seq']}: {e['status']} [{e['stage']}] {e['reason']}")
        echo(console, cand.source)
        return 0
    if a.run:
        run = store.get_run(a.run)
        if run is None:
            raise FileNotFoundError(f"no run {a.run}; `rsi show` lists runs")
        t = Table(title=plain(f"run {run.id}: {run.op} on {run.backend} ({run.gpu or 'interpreter'}), {status(run)}"))
        for c in ("#", "candidate", "config", "verdict", "stage", "objective", "reason"):
            t.add_column(c, overflow="fold")
        for e in store.evaluations(run.id):
            cfg = store.load_candidate(e["candidate"]).config
            label = approximate_label(e["verdict"].get("tolerance", {}))
            verdict = e["status"] + (f" ({label})" if label else "")
            t.add_row(*map(plain, (e["seq"], e["candidate"][:10], json.dumps(dict(cfg)), verdict, e["stage"],
                                   f"{e['objective']:.3f}" if e["objective"] is not None else "-", e["reason"][:100])))
        console.print(t)
        from rsi.llm.transcript import render_conversation

        render_conversation(store, run, console)  # prints nothing for runs without a transcript
        return 0
    t = Table(title="runs")
    runs = store.runs(a.limit)
    # `--resume RUN` needs the whole id: the run column is never wrapped, folded or cut, whatever the width
    t.add_column("run", no_wrap=True, min_width=max((len(r.id) for r in runs), default=3))
    for c in ("op", "backend", "target", "proposer", "status", "candidates", "accepted", "promoted"):
        t.add_column(c)
    for r in runs:
        ev = store.evaluations(r.id)
        t.add_row(*map(plain, (r.id, r.op, r.backend, (r.gpu or "-") + (" (proxy)" if r.proxy else ""), r.proposer,
                               status(r), len(ev), sum(e["status"] == "accepted" for e in ev),
                               len(store.promotions(r.id)))))
    console.print(t)
    return 0
