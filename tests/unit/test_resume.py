"""SIGKILL mid-search, then ``rsi search --resume``: nothing judged is lost, the run completes its budget."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.interpreter


def _count(db) -> int:
    try:
        c = sqlite3.connect(db, timeout=5)
        return c.execute("SELECT COUNT(*) FROM rsi_evaluations").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def test_sigkill_then_resume(tmp_path):
    db = tmp_path / ".rsi" / "rsi.db"
    cmd = [sys.executable, "-m", "rsi", "--root", str(tmp_path), "search", "--op-group", "swiglu",
           "--backend", "interpret", "--budget", "3", "--quiet"]
    p = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 240
    while _count(db) < 1 and time.time() < deadline and p.poll() is None:
        time.sleep(0.5)
    assert _count(db) >= 1, p.stderr.read().decode() if p.poll() is not None else "no evaluation in time"
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    c = sqlite3.connect(db)
    before = c.execute("SELECT seq, candidate, verdict_json FROM rsi_evaluations ORDER BY seq").fetchall()
    (run_id, status), = c.execute("SELECT id, status FROM rsi_runs").fetchall()
    assert status == "running"  # killed: never finished
    in_flight = [json.loads(v) for (v,) in c.execute(
        "SELECT a.value_json FROM trial_user_attributes a JOIN trials t ON a.trial_id = t.trial_id "
        "WHERE t.state = 'RUNNING' AND a.key = 'candidate'")]
    c.close()
    r = subprocess.run(cmd + ["--resume"], capture_output=True, text=True, timeout=400, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    c = sqlite3.connect(db)
    after = c.execute("SELECT seq, candidate, verdict_json FROM rsi_evaluations ORDER BY seq").fetchall()
    assert after[: len(before)] == before            # nothing judged before the kill changed or vanished
    assert [s for s, _, _ in after] == [0, 1, 2]      # the budget of 3 is completed, no gap, no duplicate seq
    assert len({h for _, h, _ in after}) == 3         # three distinct candidates
    for h in in_flight:                               # the candidate being judged at the kill was judged again
        assert h in {h2 for _, h2, _ in after}
    assert c.execute("SELECT status FROM rsi_runs WHERE id=?", (run_id,)).fetchone()[0] == "finished"
    states = [s for (s,) in c.execute("SELECT state FROM trials")]
    assert "RUNNING" not in states                    # the interrupted Optuna trial was failed and re-queued
