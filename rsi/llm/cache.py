"""Response cache: a reply per (scope, provider, model, prompt, sampling parameters), in the run's SQLite database.

A resumed run rebuilds the same prompts from the same evidence, so every reply it already paid for is served from
here. The scope is the run (``run:<id>``): a fresh run with the same evidence asks the model again, as it would
expect; ``shared`` (the ``share_cache`` setting) lets every run of the database reuse every reply. The table lives
next to ``rsi_*`` in the same file (prefix ``rsi_llm_``). Only the reply text (with known secrets redacted) and its
token counts are stored; never a key or a header.
"""

from __future__ import annotations

import json
import sqlite3
import time

from rsi.contract import canonical_json, sha256_text

SCHEMA = """
CREATE TABLE IF NOT EXISTS rsi_llm_cache (
  key TEXT PRIMARY KEY, provider TEXT NOT NULL, model TEXT NOT NULL, prompt_sha256 TEXT NOT NULL,
  reply TEXT NOT NULL, usage_json TEXT NOT NULL, finish_reason TEXT, created_at REAL NOT NULL);
"""


SHARED = "shared"


def run_scope(run_id: str) -> str:
    return f"run:{run_id}"


def cache_key(provider: str, model: str, system: str, user: str, params: dict, scope: str = SHARED) -> str:
    return sha256_text(canonical_json({"provider": provider, "model": model, "system": system, "user": user,
                                       "params": params, "scope": scope}))


class ResponseCache:
    def __init__(self, conn: sqlite3.Connection, enabled: bool = True):
        self.conn, self.enabled = conn, enabled
        self.conn.executescript(SCHEMA)

    def get(self, key: str) -> dict | None:
        if not self.enabled:
            return None
        row = self.conn.execute("SELECT reply, usage_json, finish_reason FROM rsi_llm_cache WHERE key=?",
                                (key,)).fetchone()
        if row is None:
            return None
        return {"reply": row[0], "usage": json.loads(row[1]), "finish_reason": row[2]}

    def put(self, key: str, provider: str, model: str, prompt_sha256: str, reply: str, usage: dict,
            finish_reason: str | None) -> None:
        self.conn.execute("INSERT OR REPLACE INTO rsi_llm_cache VALUES (?,?,?,?,?,?,?,?)",
                          (key, provider, model, prompt_sha256, reply, json.dumps(usage), finish_reason, time.time()))
