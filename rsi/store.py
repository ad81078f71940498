"""One SQLite database (WAL) per workspace, plus content-addressed candidate folders.

Tables (prefixed ``rsi_`` so that Optuna's own tables share the file): runs, candidates, evaluations (verdicts
with reasons and measurements as JSON), measurements (one row per candidate x shape x implementation), memory
(proposer memory: slow->fast pairs, failure signatures), promotions, run owners (the process, pid and host, that
started or last resumed each run). Every write is its own transaction, so a SIGKILL loses at most the candidate
that was being judged, which ``--resume`` judges again; a killed run stays ``running`` in the table until
:meth:`Store.reap_dead_runs` (called by ``rsi show`` and ``--resume``) finds its owner gone from this host and
marks it ``interrupted``.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rsi.contract import Candidate, canonical_json

SCHEMA = """
CREATE TABLE IF NOT EXISTS rsi_runs (
  id TEXT PRIMARY KEY, op TEXT NOT NULL, gpu TEXT, backend TEXT NOT NULL, proposer TEXT NOT NULL,
  status TEXT NOT NULL, started_at REAL NOT NULL, finished_at REAL, args_json TEXT, env_json TEXT,
  summary_json TEXT, proxy INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS rsi_candidates (
  hash TEXT PRIMARY KEY, op TEXT NOT NULL, origin TEXT, parent TEXT, config_json TEXT NOT NULL,
  source_sha256 TEXT NOT NULL, path TEXT NOT NULL, created_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS rsi_evaluations (
  id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, seq INTEGER NOT NULL, candidate TEXT NOT NULL,
  status TEXT NOT NULL, stage TEXT NOT NULL, reason TEXT NOT NULL, verdict_json TEXT NOT NULL,
  objective REAL, created_at REAL NOT NULL, UNIQUE(run_id, seq));
CREATE TABLE IF NOT EXISTS rsi_measurements (
  id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, candidate TEXT NOT NULL, shape TEXT NOT NULL,
  impl TEXT NOT NULL, p20_us REAL, p50_us REAL, p80_us REAL, gbps REAL, pct_copy REAL);
CREATE TABLE IF NOT EXISTS rsi_memory (
  id INTEGER PRIMARY KEY AUTOINCREMENT, op TEXT NOT NULL, kind TEXT NOT NULL, key TEXT NOT NULL,
  value_json TEXT NOT NULL, run_id TEXT, created_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS rsi_promotions (
  id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, op TEXT NOT NULL, gpu TEXT NOT NULL,
  candidate TEXT NOT NULL, record_path TEXT NOT NULL, locked INTEGER NOT NULL, created_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS rsi_run_owners (
  run_id TEXT PRIMARY KEY, host TEXT NOT NULL, pid INTEGER NOT NULL, proc_start TEXT, claimed_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS rsi_eval_run ON rsi_evaluations(run_id);
CREATE INDEX IF NOT EXISTS rsi_mem_op ON rsi_memory(op, kind);
"""


@dataclass(frozen=True)
class Run:
    id: str
    op: str
    gpu: str | None
    backend: str
    proposer: str
    status: str
    started_at: float
    finished_at: float | None
    args: dict
    env: dict
    summary: dict
    proxy: bool


class Store:
    def __init__(self, db_path: str | os.PathLike, root: str | os.PathLike = "."):
        self.db_path = Path(db_path)
        self.root = Path(root)
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(str(self.db_path), timeout=30, isolation_level=None)
        self.conn.row_factory = sqlite3.Row
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.executescript(SCHEMA)

    @property
    def url(self) -> str:
        """SQLAlchemy URL of the same database file (Optuna's study lives here too)."""
        return f"sqlite:///{self.db_path.resolve()}"

    def close(self) -> None:
        self.conn.close()

    # ---------------------------------------------------------------------------------------------- runs
    def create_run(self, op: str, gpu: str | None, backend: str, proposer: str, args: dict, env: dict,
                   proxy: bool = False) -> str:
        run_id = time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]
        self.conn.execute("INSERT INTO rsi_runs (id, op, gpu, backend, proposer, status, started_at, finished_at, "
                          "args_json, env_json, summary_json, proxy) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                          (run_id, op, gpu, backend, proposer, "running", time.time(), None,
                           json.dumps(args), json.dumps(env), "{}", int(proxy)))
        self.claim_run(run_id)
        return run_id

    def update_run_args(self, run_id: str, args: dict) -> None:
        self.conn.execute("UPDATE rsi_runs SET args_json=? WHERE id=?", (json.dumps(args), run_id))

    def finish_run(self, run_id: str, status: str, summary: dict) -> None:
        self.conn.execute("UPDATE rsi_runs SET status=?, finished_at=?, summary_json=? WHERE id=?",
                          (status, time.time(), json.dumps(summary), run_id))

    def mark_running(self, run_id: str) -> None:
        self.conn.execute("UPDATE rsi_runs SET status='running', finished_at=NULL WHERE id=?", (run_id,))
        self.claim_run(run_id)

    # ------------------------------------------------------------------------------------------ run owners
    def claim_run(self, run_id: str) -> None:
        """Record this process (pid, host, start time) as the run's owner."""
        pid = os.getpid()
        self.conn.execute("INSERT OR REPLACE INTO rsi_run_owners VALUES (?,?,?,?,?)",
                          (run_id, socket.gethostname(), pid, _proc_start(pid), time.time()))

    def run_owner(self, run_id: str) -> dict | None:
        row = self.conn.execute("SELECT host, pid, proc_start FROM rsi_run_owners WHERE run_id=?",
                                (run_id,)).fetchone()
        return dict(row) if row else None

    def owner_alive(self, run_id: str) -> bool | None:
        """Whether the process that owns the run still runs: None where that cannot be told (no owner recorded, or
        another host)."""
        owner = self.run_owner(run_id)
        if owner is None or owner["host"] != socket.gethostname():
            return None
        return _alive(owner["pid"], owner["proc_start"])

    def reap_dead_runs(self, write: bool = True) -> list[str]:
        """Mark ``interrupted`` every ``running`` run whose owner, on this host, is gone (killed, crashed); with
        ``write=False`` only say which."""
        reaped = []
        for (run_id,) in self.conn.execute("SELECT id FROM rsi_runs WHERE status='running'").fetchall():
            if self.owner_alive(run_id) is False:
                if write:
                    self.conn.execute("UPDATE rsi_runs SET status='interrupted' WHERE id=? AND status='running'",
                                      (run_id,))
                reaped.append(run_id)
        return reaped

    def running_elsewhere(self, run_id: str) -> dict | None:
        """The owner of a ``running`` run that another live process on this host holds, else None."""
        run = self.get_run(run_id)
        if run is None or run.status != "running" or self.owner_alive(run_id) is not True:
            return None
        owner = self.run_owner(run_id)
        return owner if owner["pid"] != os.getpid() else None

    def _run(self, row: sqlite3.Row) -> Run:
        return Run(row["id"], row["op"], row["gpu"], row["backend"], row["proposer"], row["status"],
                   row["started_at"], row["finished_at"], json.loads(row["args_json"] or "{}"),
                   json.loads(row["env_json"] or "{}"), json.loads(row["summary_json"] or "{}"), bool(row["proxy"]))

    def get_run(self, run_id: str) -> Run | None:
        row = self.conn.execute("SELECT * FROM rsi_runs WHERE id=?", (run_id,)).fetchone()
        return self._run(row) if row else None

    def latest_unfinished(self, op: str | None = None) -> Run | None:
        """The newest ``running`` or ``interrupted`` run, skipping runs another live process on this host holds."""
        q = "SELECT * FROM rsi_runs WHERE status IN ('running','interrupted')"
        args: tuple = ()
        if op:
            q += " AND op=?"
            args = (op,)
        for row in self.conn.execute(q + " ORDER BY started_at DESC", args).fetchall():
            if self.running_elsewhere(row["id"]) is None:
                return self._run(row)
        return None

    def runs(self, limit: int = 20) -> list[Run]:
        rows = self.conn.execute("SELECT * FROM rsi_runs ORDER BY started_at DESC LIMIT ?", (limit,)).fetchall()
        return [self._run(r) for r in rows]

    # ------------------------------------------------------------------------------------- candidates
    def candidate_dir(self, cand: Candidate) -> Path:
        return self.root / "candidates" / cand.op / cand.hash[:2] / cand.hash

    def save_candidate(self, cand: Candidate) -> Path:
        """Write-once: the folder and row are created the first time and never modified afterwards."""
        d = self.candidate_dir(cand)
        if not (d / "candidate.json").exists():
            d.mkdir(parents=True, exist_ok=True)
            _write_once(d / "kernel.py", cand.source)
            _write_once(d / "candidate.json", json.dumps(cand.to_json(), indent=2, sort_keys=True) + "\n")
        self.conn.execute("INSERT OR IGNORE INTO rsi_candidates VALUES (?,?,?,?,?,?,?,?)",
                          (cand.hash, cand.op, cand.origin, cand.parent, canonical_json(dict(cand.config)),
                           cand.to_json()["source_sha256"], str(d), time.time()))
        return d

    def load_candidate(self, cand_hash: str) -> Candidate:
        row = self.conn.execute("SELECT * FROM rsi_candidates WHERE hash=?", (cand_hash,)).fetchone()
        if row is None:
            raise KeyError(f"candidate {cand_hash} is not in the store")
        source = (Path(row["path"]) / "kernel.py").read_text()
        return Candidate(op=row["op"], source=source, config=json.loads(row["config_json"]), parent=row["parent"],
                         origin=row["origin"] or "offline")

    # ------------------------------------------------------------------------------------ evaluations
    def record_evaluation(self, run_id: str, seq: int, verdict: dict, objective: float | None) -> None:
        with self.conn:  # one transaction: the verdict and its measurements land together or not at all
            self.conn.execute("BEGIN")
            self.conn.execute(
                "INSERT OR REPLACE INTO rsi_evaluations (run_id, seq, candidate, status, stage, reason, verdict_json,"
                " objective, created_at) VALUES (?,?,?,?,?,?,?,?,?)",
                (run_id, seq, verdict["candidate"], verdict["status"], verdict["stage"], verdict["reason"],
                 json.dumps(verdict), objective, time.time()))
            for row in verdict.get("timings", []):
                impls = {"candidate": row, **row.get("baselines", {})}
                for impl, t in impls.items():
                    self.conn.execute(
                        "INSERT INTO rsi_measurements (run_id, candidate, shape, impl, p20_us, p50_us, p80_us, gbps,"
                        " pct_copy) VALUES (?,?,?,?,?,?,?,?,?)",
                        (run_id, verdict["candidate"], row["bucket"], impl, t.get("p20_us"), t.get("p50_us"),
                         t.get("p80_us"), t.get("gbps"), t.get("pct_copy")))
        row = self.conn.execute("SELECT path FROM rsi_candidates WHERE hash=?", (verdict["candidate"],)).fetchone()
        if row is not None:
            vpath = Path(row["path"]) / f"verdict-{run_id}.json"
            if not vpath.exists():
                _write_once(vpath, json.dumps({k: verdict[k] for k in ("status", "stage", "reason", "tolerance")},
                                              indent=2, sort_keys=True) + "\n")

    def evaluations(self, run_id: str) -> list[dict[str, Any]]:
        rows = self.conn.execute("SELECT * FROM rsi_evaluations WHERE run_id=? ORDER BY seq", (run_id,)).fetchall()
        return [dict(r) | {"verdict": json.loads(r["verdict_json"])} for r in rows]

    def find_verdict(self, cand_hash: str, backend: str) -> dict | None:
        """An earlier verdict for the same candidate on the same backend (duplicates are not judged twice)."""
        row = self.conn.execute(
            "SELECT e.verdict_json FROM rsi_evaluations e JOIN rsi_runs r ON e.run_id=r.id "
            "WHERE e.candidate=? AND r.backend=? ORDER BY e.id DESC LIMIT 1", (cand_hash, backend)).fetchone()
        return json.loads(row["verdict_json"]) if row else None

    # ----------------------------------------------------------------------------------------- memory
    def remember(self, op: str, kind: str, key: str, value: dict, run_id: str | None = None) -> None:
        self.conn.execute("INSERT INTO rsi_memory (op, kind, key, value_json, run_id, created_at) VALUES (?,?,?,?,?,?)",
                          (op, kind, key, json.dumps(value), run_id, time.time()))

    def recall(self, kind: str, op: str | None = None, limit: int = 20) -> list[dict]:
        q, args = "SELECT * FROM rsi_memory WHERE kind=?", [kind]
        if op:
            q += " AND op=?"
            args.append(op)
        rows = self.conn.execute(q + " ORDER BY id DESC LIMIT ?", (*args, limit)).fetchall()
        return [{"op": r["op"], "key": r["key"], **json.loads(r["value_json"])} for r in rows]

    # ------------------------------------------------------------------------------------- promotions
    def record_promotion(self, run_id: str, op: str, gpu: str, cand_hash: str, record_path: str, locked: bool) -> None:
        self.conn.execute("INSERT INTO rsi_promotions (run_id, op, gpu, candidate, record_path, locked, created_at) "
                          "VALUES (?,?,?,?,?,?,?)", (run_id, op, gpu, cand_hash, record_path, int(locked), time.time()))

    def promotions(self, run_id: str | None = None) -> list[dict]:
        q, args = "SELECT * FROM rsi_promotions", ()
        if run_id:
            q, args = q + " WHERE run_id=?", (run_id,)
        return [dict(r) for r in self.conn.execute(q + " ORDER BY id", args).fetchall()]

    def iter_table(self, table: str) -> Iterator[dict]:
        if not table.startswith("rsi_"):
            raise ValueError("only rsi_ tables")
        for r in self.conn.execute(f"SELECT * FROM {table}"):
            yield dict(r)


def _proc_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux), which tells a reused pid apart; None elsewhere."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat[stat.rindex(")") + 2:].split()[19]
    except (OSError, ValueError, IndexError):
        return None


def _alive(pid: int, proc_start: str | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, another user's
    except OSError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2:].split()
        state, started = fields[0], fields[19]
    except (OSError, ValueError, IndexError):
        return True  # no /proc: the pid exists, take it as alive
    if state in ("Z", "X"):  # a zombie has exited
        return False
    return proc_start is None or started == proc_start  # a different start time: the pid was reused


def _write_once(path: Path, text: str) -> None:
    """Create the file atomically; never overwrite (content-addressed folders are write-once)."""
    if path.exists():
        return
    tmp = path.with_suffix(path.suffix + f".tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)
