"""Edges of what rsi prints and shows: untrusted text is never rich markup, run ids are never cut, killed runs do
not stay `running` (issue 16, items 1 and 13). No harness, no network: stores and transcripts are made up."""

from __future__ import annotations

import argparse
import io
import json

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
            assert NASTY_SOURCE in text and '"MODE": "[/bold]"' in text or "'MODE': '[/bold]'" in text
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
