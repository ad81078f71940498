"""rsi search --workers N: candidates judged in parallel by local processes or Ray actors, one driver recording
every verdict as it arrives. Interpreter-backend searches end to end on the CPU: every candidate recorded once, each
verdict naming its worker, and a worker killed mid-run loses nothing (its candidate is judged by another)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys

import pytest

OP = "head_merge"     # the cheapest op group under the interpreter
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _search(tmp_path, *extra, env_extra=None, budget="3"):
    env = {**os.environ, "TRITON_INTERPRET": "1", "OMP_NUM_THREADS": "1", **(env_extra or {})}
    p = subprocess.run([sys.executable, "-m", "rsi", "--root", str(tmp_path), "search", "--op-group", OP,
                        "--backend", "interpret", "--budget", budget, *extra, "--summary-out",
                        str(tmp_path / "s.json")], capture_output=True, text=True, env=env, timeout=900, cwd=ROOT,
                       check=False)
    return p


def _verdicts(tmp_path):
    c = sqlite3.connect(tmp_path / ".rsi" / "rsi.db")
    rows = c.execute("select seq, candidate, verdict_json from rsi_evaluations order by seq").fetchall()
    return [(s, cand, json.loads(v)) for s, cand, v in rows]


def test_local_processes_judge_in_parallel_and_a_killed_worker_loses_nothing(tmp_path):
    # worker 1 dies at its second candidate: both workers judged, nothing lost, nothing counted twice
    p = _search(tmp_path, "--workers", "2", env_extra={"RSI_TEST_KILL_WORKER": "1:2"}, budget="4")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "2 judges (local processes)" in p.stdout
    assert "worker 1 lost" in p.stdout and "re-queued" in p.stdout
    v = _verdicts(tmp_path)
    assert [s for s, _, _ in v] == [0, 1, 2, 3] and len({c for _, c, _ in v}) == 4
    assert {d["details"]["worker"]["id"] for _, _, d in v} == {0, 1}
    assert all(d["status"] == "accepted" for _, _, d in v)


def test_workers_usage_errors(tmp_path):
    p = _search(tmp_path, "--workers", "0")
    assert p.returncode == 2 and "--workers 0" in p.stderr


ray = pytest.importorskip("ray", reason="Ray is the optional [ray] extra")


def test_ray_local_cluster_two_workers_one_killed(tmp_path):
    # actor 0 dies at its first candidate: actor 1 judges every candidate, the lost one re-queued
    p = _search(tmp_path, "--workers", "2", "--ray-address", "local", env_extra={"RSI_TEST_KILL_WORKER": "0:1"})
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "2 judges (Ray)" in p.stdout and "worker 0 lost (Ray actor died" in p.stdout
    v = _verdicts(tmp_path)
    assert [s for s, _, _ in v] == [0, 1, 2] and len({c for _, c, _ in v}) == 3
    assert {d["details"]["worker"]["id"] for _, _, d in v} == {1}
