"""Transcripts: every LLM or agent run writes one JSON line per event; ``--proposer replay`` reads one back.

Records (``type``): ``header``; ``resume``; ``call`` (prompt, reply, usage, cost, cache hit, parse result, spending
so far); ``call_error``; ``proposal`` and ``verdict`` (each judged candidate: from a reply or from tuning); ``stats``
(which origin produced the best); ``stop``. A resumed run appends: a ``call`` with a sequence number already seen
supersedes the earlier one (its candidate was never judged). The file's path is registered in the run's database
(table ``rsi_llm_transcripts``) so that ``rsi show --run ID`` finds it. Known secrets are scrubbed from every line.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from rsi.store import Run, Store

SCHEMA = """
CREATE TABLE IF NOT EXISTS rsi_llm_transcripts (
  run_id TEXT PRIMARY KEY, path TEXT NOT NULL, proposer TEXT NOT NULL, created_at REAL NOT NULL);
"""


def default_path(root: str | os.PathLike, run_id: str) -> Path:
    return Path(root) / ".rsi" / "transcripts" / f"{run_id}.jsonl"


def transcript_path(conn: sqlite3.Connection, root: str | os.PathLike, run_id: str, op: str,
                    requested: str | None) -> tuple[Path, bool]:
    """(path, resumed): a resumed run appends to the file it registered; a new run writes a new file, at
    ``requested`` ({op} and {run} expand) or under ``root/.rsi/transcripts/``."""
    from rsi.llm.clients import ConfigError

    known = lookup(conn, run_id)
    if known is not None:
        return known, True
    if not requested:
        return default_path(root, run_id), False
    path = Path(requested.replace("{op}", op).replace("{run}", run_id))
    if path.exists() and path.stat().st_size > 0:  # one file per run: a resume must not read another run's lines
        raise ConfigError(f"--transcript {path} already holds a transcript; give a new path ({{op}} and {{run}} "
                          f"expand to the op group and the run id)")
    return path, False


def register(conn: sqlite3.Connection, run_id: str, path: Path, proposer: str) -> None:
    conn.executescript(SCHEMA)
    conn.execute("INSERT OR REPLACE INTO rsi_llm_transcripts VALUES (?,?,?,?)",
                 (run_id, str(Path(path).resolve()), proposer, time.time()))


def lookup(conn: sqlite3.Connection, run_id: str) -> Path | None:
    conn.executescript(SCHEMA)
    row = conn.execute("SELECT path FROM rsi_llm_transcripts WHERE run_id=?", (run_id,)).fetchone()
    return Path(row[0]) if row else None


class TranscriptWriter:
    def __init__(self, path: Path, secrets: Iterable[str] = ()):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.secrets = tuple(secrets)

    def write(self, record: dict[str, Any]) -> None:
        from rsi.llm.clients import known_secrets

        line = json.dumps(record, sort_keys=True, default=str)
        # a secret as it appears inside a JSON string (json.dumps escapes quotes and backslashes)
        for s in known_secrets(os.environ, self.secrets):
            line = line.replace(json.dumps(s)[1:-1], "[redacted]")
        with open(self.path, "a") as f:  # one line per event, flushed at once: a killed run loses nothing
            f.write(line + "\n")


def read_transcript(path: str | os.PathLike) -> list[dict[str, Any]]:
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"no transcript at {p}")
    lines = p.read_text().splitlines()
    out = []
    for n, line in enumerate(lines, 1):
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                if n == len(lines):
                    break  # a line cut short by a kill: everything before it stands
                raise ValueError(f"{p}:{n} is not JSON") from None
    return out


def calls_by_seq(records: Iterable[dict]) -> dict[int, dict]:
    """Each call's latest record (a resumed run's re-asked call supersedes the unjudged original)."""
    out: dict[int, dict] = {}
    for r in records:
        if r.get("type") == "call":
            out[r["seq"]] = r
    return dict(sorted(out.items()))


def last_of(records: Iterable[dict], kind: str) -> dict | None:
    found = None
    for r in records:
        if r.get("type") == kind:
            found = r
    return found


# ------------------------------------------------------------------------------------------------------- rsi show
def render_conversation(store: Store, run: Run, console: Console) -> None:
    """The run's conversation with its proposer: prompt sizes, reply verdicts, spending so far. Prints nothing for
    runs without a transcript (offline runs)."""
    from rsi.search.display import echo, plain  # every cell is model or server text: never markup

    path = lookup(store.conn, run.id)
    if path is None:
        return
    if not path.exists():
        echo(console, f"conversation: transcript {path} is missing (moved or deleted)")
        return
    records = read_transcript(path)
    header = next((r for r in records if r.get("type") == "header"), {})
    verdicts: dict[str, dict] = {}
    tuned: dict[int, list[dict]] = {}
    for r in records:
        if r.get("type") == "verdict":
            verdicts[r["candidate"]] = r
            if r.get("kind") == "tune":
                tuned.setdefault(r.get("call"), []).append(r)
    t = Table(title=plain(f"conversation: {header.get('proposer', run.proposer)} {header.get('model') or ''} "
                          f"({path})"))
    for c in ("call", "prompt chars", "reply", "verdict", "tokens in/out", "cost so far"):
        t.add_column(c, overflow="fold")
    for seq, c in calls_by_seq(records).items():
        parse = c.get("parse", {})
        if not parse.get("ok"):
            verdict = f"rejected [reply] {parse.get('reason', '')[:100]}"
        else:
            v = verdicts.get(parse.get("candidate"))
            verdict = (f"{v['status']} [{v['stage']}] {v['reason'][:100]}" if v else "not judged yet")
            tune = tuned.get(seq, [])
            if tune:
                verdict += f"; tuned {len(tune)} configs, {sum(x['status'] == 'accepted' for x in tune)} accepted"
        usage = c.get("usage") or {}
        spent = c.get("spent") or {}
        reply = ("cached" if c.get("cached") else f"{len(c.get('reply', ''))} chars") + (
            f", {c['attempts']} attempts" if (c.get("attempts") or 1) > 1 else "")
        t.add_row(*map(plain, (seq, f"{c.get('prompt_chars', 0):,}", reply, verdict,
                               f"{usage.get('input_tokens', 0)}/{usage.get('output_tokens', 0)}",
                               f"${spent.get('cost_usd', 0):.4f}")))
    for r in records:
        if r.get("type") == "call_error":
            t.add_row(*map(plain, ("-", "", "error", str(r.get("error", ""))[:120], "",
                                   f"${(r.get('spent') or {}).get('cost_usd', 0):.4f}")))
    console.print(t)
    stats, stop = last_of(records, "stats"), last_of(records, "stop")
    if stats:
        line = (f"origins: {json.dumps(stats['by_origin'], sort_keys=True)}; best from {stats.get('best_origin') or '-'}"
                if "by_origin" in stats else f"replay matched {stats.get('replay')} recorded verdicts")
        echo(console, line)
    if stop:
        echo(console, f"proposer stopped: {stop.get('reason')}")
