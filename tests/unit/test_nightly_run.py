"""rsi nightly's machinery without the heavy phases: the machine lock (busy, stale after a kill), phases written
atomically and resumed, findings and the exit code, the what-to-search-next ranking."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rsi.contract import Shape
from rsi.nightly import findings as F
from rsi.nightly import run
from rsi.nightly.compare import Comparison
from rsi.nightly.figure import Figure
from rsi.nightly.history import NightlyRun
from rsi.nightly.next import pick, rank
from rsi.nightly.plan import Phase
from rsi.refs import get_op_group


def test_machine_lock_busy_then_free(tmp_path):
    path = str(tmp_path / "lock")
    with run.machine_lock(tmp_path / "a", path) as stale:
        assert stale == ""
        assert json.loads(Path(path).read_text())["pid"] == os.getpid()
        with pytest.raises(run.Busy, match=f'"pid": {os.getpid()}'), run.machine_lock(tmp_path / "b", path):
            pass
    assert Path(path).read_text() == ""                           # a clean exit leaves no holder behind
    with run.machine_lock(tmp_path / "c", path) as stale:
        assert stale == ""


def test_a_killed_holder_leaves_a_stale_lock_that_does_not_block(tmp_path):
    path = tmp_path / "lock"
    code = ("import sys, time; from pathlib import Path; from rsi.nightly.run import machine_lock\n"
            f"with machine_lock(Path('{tmp_path}/x'), '{path}'):\n    print('held', flush=True); time.sleep(60)")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "held"
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    with run.machine_lock(tmp_path / "y", str(path)) as stale:
        assert f'"pid": {p.pid}' in stale and "stale" in stale


def _phase(tmp_path, code: str, name: str = "verify:fake") -> Phase:
    raw = tmp_path / "work" / "raw.json"
    return Phase(name, "verify", (sys.executable, "-c", code.replace("RAW", str(raw))), raw)


def test_phase_records_are_atomic_and_resumed_only_for_the_same_command(tmp_path):
    ph = _phase(tmp_path, "import json; json.dump({'results': []}, open('RAW', 'w')); print('ran')")
    rec = run.run_phase(ph, tmp_path, 60)
    assert rec["status"] == "ok" and rec["rc"] == 0 and rec["output"] == {"results": []}
    assert (tmp_path / rec["log"]).read_text().strip() == "ran"
    run.write_json(tmp_path / ph.file, rec)
    assert run.done(ph, tmp_path)["status"] == "ok"
    assert not list((tmp_path / "phases").glob("*.tmp*"))
    other = _phase(tmp_path, "print('another command')")
    assert run.done(other, tmp_path) is None                  # same name, different command: run again


def test_failed_and_timed_out_phases_say_why(tmp_path):
    bad = run.run_phase(_phase(tmp_path, "import sys; print('boom'); sys.exit(3)"), tmp_path, 60)
    assert bad["status"] == "failed" and bad["rc"] == 3 and "boom" in bad["error"]
    t0 = time.perf_counter()
    slow = run.run_phase(_phase(tmp_path, "import time; time.sleep(60)"), tmp_path, 1)
    assert slow["status"] == "failed" and "timed out" in slow["error"] and time.perf_counter() - t0 < 30
    skipped = run.run_phase(Phase("bench:x", "bench", ("false",), tmp_path / "r.json", skip="no GPU"), tmp_path, 1)
    assert skipped["status"] == "skipped" and skipped["error"] == "no GPU"


def _cmp(key: str, status: str) -> Comparison:
    return Comparison(key, "baseline", status, 1.5, (1.3, 1.7), 0.02, "A/A tonight 2.0%", 30, 10.0)


def test_findings_and_exit_code():
    fig = Figure("verify/m/b", "m", "m b", "us", (1.0,) * 30, None, True, "reps=30")
    ctx = Figure("bench/m/b/compile", "m", "m b compile", "us", (1.0,) * 30, None, False, "reps=30")
    base = NightlyRun("r0", 0.0, {"torch": "2.12", "driver": "1"}, {
        "verdicts": [{"target": "h200", "op": "m", "status": "accepted"}],
        "lock": {"sha256": "aaa", "kernels": {"h200": {"m": "m/old"}}}}, {"verify/gone/b": fig}, "store")
    run_info = {"env": {"torch": "2.13", "driver": "1"}, "lock": {"sha256": "bbb", "kernels": {"h200": {"m": "m/new"}}}}
    verdict = [{"target": "h200", "op": "m", "kernel": "m/new", "status": "rejected", "reason": "[correctness] x"}]
    figs = {fig.key: fig, ctx.key: ctx}
    ran = [{"name": "verify:gone", "status": "ok"}]
    fs = F.assess(figs, [_cmp(fig.key, "within noise"), _cmp(ctx.key, "slower")], ran, verdict, run_info, base)
    assert F.exit_code(fs) == 1 and fs[0].severity == "regression" and fs[0].kind == "verify"
    assert "baseline: accepted" in fs[0].detail
    kinds = {(f.severity, f.kind) for f in fs}
    assert ("change", "slower") in kinds                       # torch.compile slower: context, not a regression
    assert ("change", "lock") in kinds and ("change", "env") in kinds and ("change", "missing") in kinds
    env = next(f for f in fs if f.kind == "env")
    assert env.detail == "torch: 2.12 -> 2.13"
    ok = F.assess(figs, [_cmp(fig.key, "faster")], [{"name": "bench:m", "status": "skipped", "error": "no GPU"}],
                  [], run_info, None)
    assert F.exit_code(ok) == 0 and {f.severity for f in ok} == {"improvement", "note"}
    assert not [f for f in F.assess(figs, [], [], [], run_info, base) if f.kind == "missing"]   # verify:gone not run
    failed = F.assess({}, [], [{"name": "pipeline:two-stage", "status": "failed", "error": "no output", "rc": 1}],
                      [], run_info, None)
    assert F.exit_code(failed) == 1


def _op_fig(op: str, dims: dict, seconds: float, calls: int) -> Figure:
    return Figure(f"pipeline/two-stage/op/{op}", op, op, "s", (seconds,) * 7, None, True, "",
                  {"route": "two-stage", "op": op, "dims": dims, "calls": calls, "kernel": "k"})


def test_ranking_is_time_times_headroom_to_the_limit():
    copy_gbps = 4000.0
    fast = {"rows": 10250, "hidden": 5376, "table": 6}
    slow = {"rows": 10250, "ffn": 14336}
    # modulate: 100 calls at 95% of copy; swiglu: 1 call at 10%: modulate takes longer, swiglu has more headroom
    t_fast = 100 * get_op_group("modulate").bytes_moved(Shape("x", fast)) / (0.95 * copy_gbps * 1e9)
    t_slow = 1 * get_op_group("swiglu").bytes_moved(Shape("x", slow)) / (0.10 * copy_gbps * 1e9)
    assert t_fast > t_slow > 0.05 * t_fast / 0.9
    figs = {f.key: f for f in (_op_fig("modulate", fast, t_fast, 100), _op_fig("swiglu", slow, t_slow, 1))}
    total = Figure("pipeline/two-stage/request_total", "pipeline/two-stage", "t", "s", (4 * t_fast,) * 7)
    figs[total.key] = total
    r = rank(figs, "h200", copy_gbps)
    by = {x["op"]: x for x in r}
    assert by["modulate"]["fraction"] == pytest.approx(0.95) and by["swiglu"]["fraction"] == pytest.approx(0.10)
    assert by["modulate"]["headroom_s"] == pytest.approx(0.05 * t_fast)
    assert by["modulate"]["share"] == pytest.approx(0.25) and "measured" in by["modulate"]["limit"]
    assert [x["op"] for x in r] == ["swiglu", "modulate"] and pick(r)["op"] == "swiglu"
    cpu = rank(figs, None, None)                              # no target: limit unknown, ranked by time
    assert [x["op"] for x in cpu] == ["modulate", "swiglu"]
    assert all(x["limit"].startswith("unknown") for x in cpu)


def test_a_second_nightly_exits_3_and_names_the_holder(tmp_path, monkeypatch, capsys):
    from rsi import cli

    lock = tmp_path / "lock"
    monkeypatch.setenv(run.LOCK_ENV, str(lock))
    argv = ["--db", str(tmp_path / "db"), "nightly", "--out", str(tmp_path / "n"), "--phases", "pipeline"]
    with run.machine_lock(tmp_path / "first", str(lock)):
        assert cli.main(argv) == 3
    out = capsys.readouterr().out
    assert "another nightly holds" in out and str(tmp_path / "first") in out
    assert not (tmp_path / "n").exists()                      # nothing was run


def test_a_resume_keeps_the_first_environment_and_reports_its_own(tmp_path):
    from rsi.nightly.history import open_store
    from rsi.nightly.plan import Options

    store = open_store(tmp_path / "db", tmp_path)
    o = Options(out=tmp_path / "n", argv=["nightly"])
    o.out.mkdir()
    lock = {"sha256": "aaa", "kernels": {}}
    first = run.state(o, store, {"torch": "2.12", "host": "h"}, lock)
    again = run.state(o, store, {"torch": "2.13", "host": "h"}, lock)
    assert again["run_id"] == first["run_id"] and again["resumed"] == 1
    assert again["env"]["torch"] == "2.12" and again["resumes"][0]["env"]["torch"] == "2.13"
    assert store.get_run(first["run_id"]).status == "running"
    fs = F.assess({}, [], [], [], {"env": again["env"], "lock": lock, "resumes": again["resumes"]}, None)
    assert [(f.what, f.detail) for f in fs] == [("environment of a resume", "torch: 2.12 -> 2.13")]


def test_search_phases_say_whether_anything_better_was_found():
    searches = [{"name": "search:swiglu", "backend": "cuda", "candidates": 4, "accepted": 3, "promoted": 1},
                {"name": "search:modulate", "backend": "interpret", "candidates": 2, "accepted": 2, "promoted": 0}]
    fs = F.assess({}, [], [], [], {"env": {}, "lock": {}, "searches": searches}, None)
    by = {f.what: f for f in fs}
    assert by["search:swiglu"].severity == "improvement" and "1 promoted in DIR/search-root" in by["search:swiglu"].detail
    assert by["search:modulate"].severity == "note" and "interpreter" in by["search:modulate"].detail
    assert F.exit_code(fs) == 0


def test_no_mux_reaches_the_pipeline_phases(tmp_path):
    from rsi.nightly.plan import Options, phases

    def pipeline_cmds(**kw):
        o = Options(out=tmp_path / "n", argv=["nightly"], kinds=("pipeline",), **kw)
        return [p.argv for p in phases(o) if p.kind == "pipeline"]

    assert all("--no-mux" not in c for c in pipeline_cmds()) and len(pipeline_cmds()) == 2
    assert all("--no-mux" in c for c in pipeline_cmds(mux=False))
