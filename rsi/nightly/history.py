"""Nightly runs in the SQLite store (``.rsi/rsi.db``, rsi/store.py).

A nightly is a row of ``rsi_runs`` (op ``nightly``, proposer ``nightly``, the target in ``gpu``, the environment in
``env_json``, the verdict, findings, ranking and lock in ``summary_json``; ``running`` until it finishes, then
``finished``; a killed one is reaped to ``interrupted`` like a search). Its figures, with every sample, go to
``rsi_nightly_figures``. The baseline and the history are the newest ``finished`` nightlies of the same target
(NULL: the CPU) before the current one. A baseline may also be a nightly's output folder (its ``figures.json`` and
``state.json``), so that a report copied from another machine can serve.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rsi.nightly.figure import Figure
from rsi.store import Store

SCHEMA = """
CREATE TABLE IF NOT EXISTS rsi_nightly_figures (
  run_id TEXT NOT NULL, key TEXT NOT NULL, figure_json TEXT NOT NULL, PRIMARY KEY (run_id, key));
"""
OP = "nightly"


@dataclass(frozen=True)
class NightlyRun:
    id: str
    started_at: float
    env: dict[str, Any]
    summary: dict[str, Any]
    figures: dict[str, Figure]
    where: str                       # "store" or the folder it was read from


def open_store(db: Path, root: str | Path) -> Store:
    store = Store(db, root)
    store.conn.executescript(SCHEMA)
    return store


def save_figures(store: Store, run_id: str, figs: list[Figure]) -> None:
    with store.conn:
        store.conn.execute("BEGIN")
        store.conn.execute("DELETE FROM rsi_nightly_figures WHERE run_id=?", (run_id,))
        store.conn.executemany("INSERT INTO rsi_nightly_figures VALUES (?,?,?)",
                               [(run_id, f.key, json.dumps(f.to_json())) for f in figs])


def load_figures(store: Store, run_id: str) -> dict[str, Figure]:
    rows = store.conn.execute("SELECT figure_json FROM rsi_nightly_figures WHERE run_id=?", (run_id,)).fetchall()
    return {f.key: f for f in (Figure.from_json(json.loads(r[0])) for r in rows)}


def _load(store: Store, run_id: str) -> NightlyRun | None:
    run = store.get_run(run_id)
    if run is None or run.op != OP:
        return None
    return NightlyRun(run.id, run.started_at, run.env, run.summary, load_figures(store, run.id), "store")


def earlier(store: Store, gpu: str | None, before: str, limit: int) -> list[NightlyRun]:
    """The newest finished nightlies of target ``gpu`` other than ``before``, newest first."""
    rows = store.conn.execute("SELECT id FROM rsi_runs WHERE op=? AND status='finished' AND gpu IS ? AND id<>? "
                              "ORDER BY started_at DESC LIMIT ?", (OP, gpu, before, limit)).fetchall()
    return [r for r in (_load(store, row[0]) for row in rows) if r is not None]


def from_folder(path: Path) -> NightlyRun:
    state = json.loads((path / "state.json").read_text())
    figs = json.loads((path / "figures.json").read_text())
    summary = json.loads((path / "summary.json").read_text()) if (path / "summary.json").exists() else {}
    return NightlyRun(state["run_id"], state["started_at"], state.get("env", {}), summary,
                      {f["key"]: Figure.from_json(f) for f in figs}, str(path))


class BaselineError(ValueError):
    """--baseline names nothing usable; the message says what was looked for."""


def baseline(store: Store, spec: str, gpu: str | None, current: str) -> NightlyRun | None:
    """``last`` (the newest earlier finished nightly of this target, None if there is none), ``none``, a nightly
    run id in the store, or a nightly output folder."""
    if spec == "none":
        return None
    if spec == "last":
        runs = earlier(store, gpu, current, 1)
        return runs[0] if runs else None
    p = Path(spec)
    if (p / "figures.json").exists() and (p / "state.json").exists():
        return from_folder(p)
    run = _load(store, spec)
    if run is None:
        raise BaselineError(f"--baseline {spec}: neither a nightly run id in {store.db_path} nor a nightly output "
                            "folder (with figures.json and state.json); use last, none, a run id from `rsi show` or "
                            "a folder")
    return run


def latest_ranking(store: Store, gpu: str | None) -> tuple[str, list[dict[str, Any]]] | None:
    """(run id, ranking) of the newest finished nightly with a ranking, of target ``gpu`` when given."""
    q, args = "SELECT id, summary_json FROM rsi_runs WHERE op=? AND status='finished'", [OP]
    if gpu is not None:
        q += " AND gpu=?"
        args.append(gpu)
    for rid, summary in store.conn.execute(q + " ORDER BY started_at DESC", args).fetchall():
        ranking = json.loads(summary or "{}").get("next") or []
        if ranking:
            return rid, ranking
    return None
