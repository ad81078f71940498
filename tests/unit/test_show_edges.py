"""Edges of what rsi prints and shows: untrusted text is never rich markup, run ids are never cut, killed runs do
not stay `running` (issue 16, items 1 and 13). No harness, no network: stores and transcripts are made up."""

from __future__ import annotations

import argparse
import io

from rich.console import Console

from rsi.contract import Candidate
from rsi.llm.transcript import TranscriptWriter, default_path, register
from rsi.search.display import SearchDisplay, print_summary
from rsi.search.loop import SearchOptions
from rsi.show import show
from rsi.store import Store

# what a model or a server may send back: a stray closing tag, a redaction marker, an indexing expression, an emoji
# code; printed as markup the first crashes rich and the others vanish or change
NASTY = "[/bold] key [redacted] out[r, j] [bold red]x[/] :warning:"
NASTY_SOURCE = f'''# {NASTY}
def launch(x, MODE="[/bold]"):
    out = x
    out[0, 0] = out[r, j]
    return out
'''


def _console(width: int = 250) -> Console:
    return Console(record=True, width=width, file=io.StringIO(), color_system=None)


def _show(root, console, **kw) -> int:
    a = argparse.Namespace(root=str(root), db="rsi.db", ops=False, candidate=None, run=None, limit=20)
    for k, v in kw.items():
        setattr(a, k, v)
    return show(a, console)


def _nasty_run(tmp_path) -> tuple[Store, str, Candidate]:
    store = Store(tmp_path / "rsi.db", tmp_path)
    run_id = store.create_run("swiglu", None, "interpret", "openai", {}, {})
    cand = Candidate("swiglu", NASTY_SOURCE, {"MODE": "[/bold]"}, origin="openai")
    store.save_candidate(cand)
    store.record_evaluation(run_id, 0, {"candidate": cand.hash, "status": "rejected", "stage": "compile",
                                        "reason": NASTY, "tolerance": {}, "timings": [], "details": {}}, None)
    path = default_path(tmp_path, run_id)
    w = TranscriptWriter(path)
    register(store.conn, run_id, path, "openai")
    w.write({"type": "header", "run_id": run_id, "op": "swiglu", "proposer": "openai", "model": "m[/bold]"})
    w.write({"type": "call", "seq": 1, "prompt_chars": 10, "reply": NASTY, "usage": {}, "spent": {},
             "parse": {"ok": False, "reason": NASTY}})
    w.write({"type": "call", "seq": 2, "prompt_chars": 10, "reply": "```python\n" + NASTY_SOURCE + "```", "usage": {},
             "spent": {}, "parse": {"ok": True, "candidate": cand.hash}})
    w.write({"type": "verdict", "kind": "llm", "call": 2, "candidate": cand.hash, "status": "rejected",
             "stage": "compile", "reason": NASTY})
    w.write({"type": "call_error", "seq": 3, "error": f"HTTP 400: {NASTY}", "spent": {}})
    w.write({"type": "stop", "reason": f"model call failed ({NASTY})"})
    store.finish_run(run_id, "finished", {"proposer": {"stop_reason": NASTY}})
    return store, run_id, cand


def test_show_prints_untrusted_text_verbatim(tmp_path):
    store, run_id, cand = _nasty_run(tmp_path)
    store.close()
    for kw in ({}, {"run": run_id}, {"candidate": cand.hash[:12]}):
        console = _console()
        assert _show(tmp_path, console, **kw) == 0  # no MarkupError
        text = console.export_text()
        if kw.get("candidate"):
            assert NASTY_SOURCE in text and "config {'MODE': '[/bold]'}" in text
            assert NASTY in text  # the verdict's reason
        elif kw.get("run"):
            assert "[/bold] key [redacted] out[r, j]" in " ".join(text.split())
            assert "conversation: openai m[/bold]" in text
            assert "HTTP 400: [/bold]" in text and f"proposer stopped: model call failed ({NASTY})" in text


def test_search_display_and_summary_print_untrusted_text_verbatim():
    opts = SearchOptions(op="swiglu", backend="interpret", target=None)
    d = SearchDisplay(opts, "run-1", ("full",), quiet=False)
    d.console = console = _console()  # not a terminal: one line per event
    cand = Candidate("swiglu", NASTY_SOURCE, {"MODE": "[/bold]"})
    verdict = {"candidate": cand.hash, "status": "rejected", "stage": "compile", "reason": NASTY, "timings": []}
    with d:
        d.start(0, cand)
        d.add(0, verdict, cand, resumed=True)  # what every --resume replays
        d.note(f"proposer stops: model call failed (HTTP 400: {NASTY})")
    console.print(d._render())  # the live view's table holds the same cells
    summary = {"run_id": "run-1", "op": "swiglu", "backend": "interpret", "target": None, "candidates": 1,
               "accepted": 1, "rejected_by_stage": {"compile": 1}, "promoted": [],
               "best": {"candidate": cand.hash, "config": {"MODE": "[/bold]"},
                        "per_shape": "timing not measured (interpreter)"},
               "proposer": {"stop_reason": NASTY, "spent": {"calls": 2, "cost_usd": 0.5}}}
    print_summary(summary, console)
    text = console.export_text()
    flat = " ".join(text.split())
    assert "MODE=[/bold]" in flat and "[/bold] key [redacted] out[r, j] [bold red]x[/] :warning:" in flat
    assert f"proposer stops: model call failed (HTTP 400: {NASTY})" in flat
    assert f"Proposer stopped: {NASTY}" in flat


def test_run_ids_are_never_cut(tmp_path):
    """`--resume RUN` needs the whole id: a narrow terminal squeezes the other columns, never the run column."""
    store = Store(tmp_path / "rsi.db", tmp_path)
    ids = [store.create_run("swiglu", None, "interpret", "openai-compatible", {}, {}) for _ in range(2)]
    store.close()
    console = _console(width=70)
    assert _show(tmp_path, console) == 0
    text = console.export_text()
    for run_id in ids:
        assert run_id in text


def _dead_pid() -> int:
    import subprocess
    import sys

    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def _own(store: Store, run_id: str, pid: int, host: str | None = None) -> None:
    """Make ``pid`` (on ``host``, default this one) the run's owner, as if that process had started it."""
    import socket

    store.conn.execute("UPDATE rsi_run_owners SET pid=?, host=?, proc_start=NULL WHERE run_id=?",
                       (pid, host or socket.gethostname(), run_id))


def test_a_killed_run_is_shown_interrupted_not_running(tmp_path):
    import os

    store = Store(tmp_path / "rsi.db", tmp_path)
    killed = store.create_run("swiglu", None, "interpret", "offline", {}, {})
    live = store.create_run("swiglu", None, "interpret", "offline", {}, {})       # this process: alive
    elsewhere = store.create_run("swiglu", None, "interpret", "offline", {}, {})  # another host: cannot tell
    owner = store.conn.execute("SELECT host, pid FROM rsi_run_owners WHERE run_id=?", (live,)).fetchone()
    assert owner["pid"] == os.getpid()  # the owning process is recorded when a run starts
    _own(store, killed, _dead_pid())
    _own(store, elsewhere, _dead_pid(), host="some-other-host")
    store.close()
    console = _console()
    assert _show(tmp_path, console, dry_run=True) == 0  # shown interrupted, not written: dry runs change nothing
    assert "interrupted" in next(line for line in console.export_text().splitlines() if killed in line)
    store = Store(tmp_path / "rsi.db", tmp_path)
    assert store.get_run(killed).status == "running"
    store.close()
    console = _console()
    assert _show(tmp_path, console) == 0
    text = console.export_text()
    assert "interrupted" in next(line for line in text.splitlines() if killed in line)
    assert "running" in next(line for line in text.splitlines() if live in line)
    store = Store(tmp_path / "rsi.db", tmp_path)
    status = {r.id: r.status for r in store.runs()}
    assert status == {killed: "interrupted", live: "running", elsewhere: "running"}  # written back to the store
    store.close()


def test_resume_reaps_a_killed_run_and_refuses_a_live_one(tmp_path):
    import os
    import subprocess
    import sys

    import pytest

    from rsi.search.loop import SearchError, run_search

    store = Store(tmp_path / "rsi.db", tmp_path)
    args = {"budget_candidates": 0}  # nothing to judge: the resume itself is what is tested
    dead = store.create_run("swiglu", None, "interpret", "offline", args, {})
    _own(store, dead, _dead_pid())
    busy = store.create_run("swiglu", None, "interpret", "offline", args, {})
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        _own(store, busy, sleeper.pid)
        store.close()
        opts = {"op": "swiglu", "backend": "interpret", "target": None, "root": str(tmp_path), "db": "rsi.db",
                "quiet": True}
        with pytest.raises(SearchError, match=f"still running.*pid {sleeper.pid}"):
            run_search(SearchOptions(**opts, resume=busy))
        assert run_search(SearchOptions(**opts, resume="latest"))["run_id"] == dead  # the killed one, reaped
    finally:
        sleeper.kill()
        sleeper.wait()
    store = Store(tmp_path / "rsi.db", tmp_path)
    assert store.get_run(dead).status == "finished" and store.get_run(busy).status == "running"
    owner = store.conn.execute("SELECT pid FROM rsi_run_owners WHERE run_id=?", (dead,)).fetchone()
    assert owner["pid"] == os.getpid()  # the resuming process owns it now
    store.close()


def test_late_timed_calls_are_shown_in_the_line_and_the_summary():
    """A candidate's late timed calls (the GPU caught up with the host: rsi.harness.timing.timed_call) are shown as
    late/timed over its buckets (0/timed where none was late)."""
    opts = SearchOptions(op="swiglu", backend="cuda", target="h200")
    d = SearchDisplay(opts, "run-1", ("small", "full"), quiet=False)
    d.console = console = _console()
    rows = [{"bucket": "small", "p50_us": 10.0, "n": 40, "late": 3, "pct_copy": 90.0, "baselines": {}},
            {"bucket": "full", "p50_us": 90.0, "n": 40, "late": 2, "pct_copy": 95.0, "baselines": {}}]
    cand, other = Candidate("swiglu", "a"), Candidate("swiglu", "b")
    verdict = {"candidate": cand.hash, "status": "accepted", "stage": "accepted", "reason": "ok", "timings": rows}
    with d:
        d.add(0, verdict, cand)
        d.add(1, {**verdict, "candidate": other.hash,
                  "timings": [{**r, "late": 0} for r in rows]}, other)
    lines = [ln for ln in console.export_text().splitlines() if ln.startswith("#")]
    assert "late 5/80" in lines[0] and "late 0/80" in lines[1]
    summary = {"run_id": "run-1", "op": "swiglu", "backend": "cuda", "target": "h200", "candidates": 1,
               "accepted": 1, "rejected_by_stage": {}, "promoted": [],
               "best": {"candidate": cand.hash, "config": {}, "per_shape": [
                   {"bucket": r["bucket"], "p50_us": r["p50_us"], "pct_copy": r["pct_copy"], "late": r["late"],
                    "n": r["n"], "vs_compile": 1.5} for r in rows]}}
    print_summary(summary, console)
    text = console.export_text()
    assert "3/40" in text and "2/40" in text
