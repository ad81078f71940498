"""rsi nightly for real on the CPU: killed mid-run and resumed (stale machine lock reported, the finished phase not
run again), a report from the resumed run, then a second run against the first as baseline with a deliberately
slowed op (tests/fixtures/nightly_slow, outside the lock) flagged with exit 1, and ``rsi search --op-group next``
picking the op group that night's profile ranks first.

Kept small: rsi verify of one locked kernel (qkv_pack; the interpreter: correctness only) and the tiny single-stage
pipeline (8 denoising steps: 8 paired samples, 7 A/A pairs)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "nightly_slow"


def _cmd(db: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "rsi", "--root", str(REPO), "--db", str(db), "nightly", "--out", str(out),
            "--ops", "qkv_pack", "--routes", "single-stage", *extra]


def _env(tmp: Path, **more: str) -> dict[str, str]:
    return {**os.environ, "RSI_NIGHTLY_LOCK": str(tmp / "machine.lock"), "OMP_NUM_THREADS": "1", **more}


def _children_of(out: Path) -> list[int]:
    """Processes whose command line names the nightly's folder (its phase commands)."""
    pids = []
    for p in Path("/proc").iterdir():
        try:
            if p.name.isdigit() and str(out) in (p / "cmdline").read_bytes().decode(errors="replace"):
                pids.append(int(p.name))
        except OSError:
            continue
    return pids


def test_kernels_time_every_op_per_request():
    import torch

    from rsi.refs import get_op_group
    from runtime.kernels import Kernels

    k = Kernels("reference", target=None)
    shape = get_op_group("swiglu").interp_shapes[0]
    args = get_op_group("swiglu").make_inputs(shape, 0, torch.device("cpu"))
    for _ in range(3):
        k.call("swiglu", *args)
    (row,) = k.op_times()
    assert row["op"] == "swiglu" and row["calls"] == 3 and row["seconds"] > 0 and row["kernel"] == "reference"
    k.reset_times()
    assert k.op_times() == []
    k.call("swiglu", *args)
    assert k.op_times()[0]["calls"] == 1 and k.summary()[0]["calls"] == 4      # the dispatch summary keeps counting


def test_nightly_on_the_cpu_resumes_compares_and_flags(tmp_path, capsys):
    db, a, c = tmp_path / "rsi.db", tmp_path / "A", tmp_path / "C"
    env = _env(tmp_path)
    first = _cmd(db, a, "--phases", "verify,pipeline")
    p = subprocess.Popen(first, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    done = a / "phases" / "verify-qkv_pack.json"
    deadline = time.time() + 240
    while not done.exists() and p.poll() is None and time.time() < deadline:
        time.sleep(0.2)
    assert done.exists(), "the verify phase did not complete"
    os.kill(p.pid, signal.SIGKILL)                        # killed in the pipeline phase (or just before it)
    p.wait()
    for _ in range(50):                                   # its phase command dies with it (PR_SET_PDEATHSIG)
        if not _children_of(a):
            break
        time.sleep(0.2)
    assert not _children_of(a)
    assert f'"pid": {p.pid}' in (tmp_path / "machine.lock").read_text()
    stamp = done.stat().st_mtime_ns

    r = subprocess.run(first, check=False, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "verify:qkv_pack: done earlier" in r.stdout and done.stat().st_mtime_ns == stamp
    md = (a / "report.md").read_text()
    assert "stale machine lock" in md and f'"pid": {p.pid}' in md and "no regression (exit 0)" in md
    summary = json.loads((a / "summary.json").read_text())
    assert [v["status"] for v in summary["verdicts"]] == ["accepted"]
    assert summary["next"] and all(x["limit"].startswith("unknown") for x in summary["next"])
    assert (tmp_path / "machine.lock").read_text() == ""
    assert {"report.md", "results.csv", "repro.sh", "figures.json"} <= {f.name for f in a.iterdir()}
    assert "--out \"$OUT\" --ops qkv_pack" in (a / "repro.sh").read_text()

    slow = _env(tmp_path, PYTHONPATH=f"{FIXTURE}:{os.environ.get('PYTHONPATH', '')}", RSI_TEST_SLOW_OP="swiglu:+0.05")
    r = subprocess.run(_cmd(db, c, "--phases", "pipeline", "--baseline", str(a)), check=False, cwd=tmp_path,
                       env=slow, capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr
    summary = json.loads((c / "summary.json").read_text())
    flagged = [f for f in summary["findings"] if f["severity"] == "regression"]
    assert any(f["what"] == "single-stage: one denoise step" and "x the baseline" in f["detail"] for f in flagged)
    assert summary["baseline"] == json.loads((a / "state.json").read_text())["run_id"]
    assert summary["next"][0]["op"] == "swiglu"             # the slowed op now takes the most pipeline time
    assert "REGRESSED (exit 1)" in (c / "report.html").read_text()

    from rsi import cli

    capsys.readouterr()
    assert cli.main(["--root", str(REPO), "--db", str(db), "search", "--op-group", "next", "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert "--op-group next: swiglu" in printed and "would search swiglu" in printed
