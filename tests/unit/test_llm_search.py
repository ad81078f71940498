"""Full searches with LLM proposers on the interpreter backend, against loopback OpenAI and Anthropic servers.

Each search judges real candidates in the isolated worker (a few seconds each under TRITON_INTERPRET), so the
budgets are 1-3 candidates and one openai search is shared by several tests.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from rich.console import Console

from rsi.search.loop import SearchError, SearchOptions, run_search
from rsi.store import Store
from tests.unit.llm_servers import BROKEN_KERNEL, CHEAT_KERNEL, GOOD_KERNEL, LoopbackLLM, reply

KEY = "sk-test-DO-NOT-STORE-5f3a9c1e7b"
FAST = {"backoff_s": 0.01, "max_backoff_s": 0.05, "request_timeout_s": 1.0}


def _opts(root: Path, proposer: str, budget: int, args: dict, **kw) -> SearchOptions:
    return SearchOptions(op="swiglu", backend="interpret", target=None, proposer=proposer, budget_candidates=budget,
                         root=str(root), db="rsi.db", proposer_args=args, quiet=True, **kw)


def _evals(root: Path, run_id: str) -> list[dict]:
    store = Store(root / "rsi.db", root)
    try:
        return store.evaluations(run_id)
    finally:
        store.close()


def _records(path: str | Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


@pytest.fixture(scope="module")
def openai_run(tmp_path_factory):
    """One search: a 429 then a correct reply, a timeout then a broken reply, then a cheating reply."""
    root = tmp_path_factory.mktemp("openai")
    old = os.environ.get("OPENAI_API_KEY")
    os.environ["OPENAI_API_KEY"] = KEY
    script = [("status", 429), ("reply", reply(GOOD_KERNEL)),
              ("sleep", 2.5, "too late"), ("reply", reply(BROKEN_KERNEL)),
              ("reply", reply(CHEAT_KERNEL))]
    try:
        with LoopbackLLM("openai", script) as srv:
            summary = run_search(_opts(root, "openai", 3, {"model": "gpt-4.1", "base_url": srv.url,
                                                           "hybrid_tune": 0, **FAST}))
    finally:
        if old is None:
            os.environ.pop("OPENAI_API_KEY", None)
        else:
            os.environ["OPENAI_API_KEY"] = old
    return root, summary, srv


def test_correct_reply_is_accepted_by_the_harness(openai_run):
    root, summary, _ = openai_run
    e = _evals(root, summary["run_id"])
    assert [x["status"] for x in e] == ["accepted", "rejected", "rejected"]
    assert "timing not measured (interpreter)" in e[0]["reason"]
    store = Store(root / "rsi.db", root)
    cand = store.load_candidate(e[0]["candidate"])
    store.close()
    assert cand.origin == "openai" and cand.source == GOOD_KERNEL and dict(cand.config) == {"BLOCK_F": 128,
                                                                                           "num_warps": 4}


def test_broken_reply_is_rejected_and_its_compile_error_fed_back(openai_run):
    root, summary, srv = openai_run
    e = _evals(root, summary["run_id"])
    assert e[1]["stage"] == "compile" and "power of 2" in e[1]["reason"]
    third_prompt = srv.prompt_of(srv.completions()[-1])
    assert "reply 2 [BLOCK_F=64, num_warps=4]: rejected at stage `compile`" in third_prompt
    assert "arange's range must be a power of 2" in third_prompt and 'File "candidate.py"' in third_prompt
    assert "The code of reply 2 (rejected" in third_prompt
    assert "## Current best: reply 1" in third_prompt  # the accepted reply is the best so far


def test_cheating_reply_is_rejected_by_the_contract(openai_run):
    root, summary, _ = openai_run
    e = _evals(root, summary["run_id"])
    assert e[2]["stage"] == "static" and "torch.nn.functional" in e[2]["reason"]
    store = Store(root / "rsi.db", root)
    failures = store.recall("failure", "swiglu")
    store.close()
    assert any("torch.nn.functional" in f["reason"] for f in failures)  # memory for later runs


def test_rate_limit_and_timeout_are_retried(openai_run):
    _, summary, srv = openai_run
    calls = [r for r in _records(summary["proposer"]["transcript"]) if r["type"] == "call"]
    assert [c["attempts"] for c in calls] == [2, 2, 1]
    assert len(srv.completions()) == 5
    spent = summary["proposer"]["spent"]
    assert spent["calls"] == 3 and spent["cost_usd"] > 0 and spent["failed_calls"] == 0


def test_api_key_is_never_written(openai_run):
    root, _, srv = openai_run
    assert srv.completions()[0]["headers"]["authorization"] == f"Bearer {KEY}"  # it was used...
    written = [p for p in root.rglob("*") if p.is_file()]
    assert any(p.suffix == ".jsonl" for p in written) and any(p.name.startswith("rsi.db") for p in written)
    for p in written:  # ...and is in no database page, WAL, transcript, candidate or verdict file
        assert KEY.encode() not in p.read_bytes(), p


def test_show_run_renders_the_conversation(openai_run):
    from rsi.show import show

    root, summary, _ = openai_run
    console = Console(record=True, width=200)
    a = argparse.Namespace(root=str(root), db="rsi.db", ops=False, candidate=None, run=summary["run_id"], limit=20)
    assert show(a, console) == 0
    text = console.export_text()
    assert "conversation: openai gpt-4.1" in text and "prompt chars" in text and "cost so far" in text
    assert "accepted [accepted]" in text and "rejected [compile]" in text and "rejected [static]" in text
    assert "2 attempts" in text


def test_replay_reproduces_the_recorded_verdicts(openai_run, tmp_path, monkeypatch):
    root, summary, _ = openai_run
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # a replay talks to no model
    replayed = run_search(_opts(tmp_path, "replay", 10, {"transcript": summary["proposer"]["transcript"]}))
    got = [(x["candidate"], x["status"], x["stage"]) for x in _evals(tmp_path, replayed["run_id"])]
    want = [(x["candidate"], x["status"], x["stage"]) for x in _evals(root, summary["run_id"])]
    assert got == want
    assert replayed["proposer"]["matched"] == 3 and replayed["proposer"]["mismatched"] == []
    assert "replayed every recorded candidate" in replayed["proposer"]["stop_reason"]


def test_hybrid_tunes_the_structure_before_the_next_call(tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    with LoopbackLLM("anthropic", [("reply", reply(GOOD_KERNEL)), ("reply", reply(BROKEN_KERNEL))]) as srv:
        summary = run_search(_opts(tmp_path, "anthropic", 3, {"model": "claude-haiku-4-5", "base_url": srv.url,
                                                              "hybrid_tune": 1, **FAST}))
    assert len(srv.completions()) == 2  # the tuned candidate cost no model call
    store = Store(tmp_path / "rsi.db", tmp_path)
    cands = [store.load_candidate(e["candidate"]) for e in store.evaluations(summary["run_id"])]
    store.close()
    assert [c.origin for c in cands] == ["anthropic", "anthropic+tpe", "anthropic"]
    structure, tuned = cands[0], cands[1]
    assert tuned.parent == structure.hash and tuned.source == structure.source
    assert tuned.config != structure.config  # the structure's own config is not judged twice
    assert tuned.config["BLOCK_F"] in (64, 128, 256) and tuned.config["num_warps"] in (2, 4)
    second_prompt = srv.prompt_of(srv.completions()[1])
    assert "tuning of reply 1 [" in second_prompt  # the optimizer's result is evidence for the next call
    mix = summary["proposer"]
    assert mix["by_origin"]["llm"] == {"proposed": 2, "accepted": 1, "reply_rejected": 0, "best_objective": 1.0}
    assert mix["by_origin"]["tuned"]["proposed"] == 1
    assert mix["best_origin"] in ("llm", "tuned") and mix["structures"][0]["tuned"] == 1


def test_cost_budget_stops_the_run(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    args = {"model": "gpt-4.1", "price_in_per_mtok": 1000.0, "price_out_per_mtok": 1000.0, "max_cost_usd": 12.0,
            "max_output_tokens": 1000, **FAST}
    # the model answers in prose (no code block): rejected without reaching the harness, and it cost $8
    with LoopbackLLM("openai", [("reply", "I would need more context.")] * 5, usage=(5000, 3000)) as srv:
        summary = run_search(_opts(tmp_path, "openai", 5, {**args, "base_url": srv.url}))
    assert len(srv.completions()) == 1
    assert summary["candidates"] == 0
    assert summary["proposer"]["stop_reason"].startswith("cost budget reached")
    assert summary["proposer"]["spent"]["cost_usd"] == pytest.approx(8.0)


def _interrupted_run(root: Path, srv: LoopbackLLM):
    """A search in a child process, Ctrl-C as soon as its transcript has the reply's proposal (the candidate then in
    the judge): (the run it leaves or None, what happened). None where the run is not left interrupted (``what`` says
    the run's status, the seconds from the proposal seen to the signal and to the child's exit, and its stderr).
    The child takes Ctrl-C as a terminal's foreground process does (Python's default handler): a suite started in
    the background of a non-interactive shell (``.ci/run &``) hands its children SIGINT ignored, which Python keeps,
    so the search ran to its end and the run finished (the lost attempts of earlier CI runs)."""
    env = {**os.environ, "OPENAI_API_KEY": KEY}
    args = {"model": "gpt-4.1", "base_url": srv.url, "hybrid_tune": 0, "retries": 0, **FAST}
    opts = {"op": "swiglu", "backend": "interpret", "target": None, "proposer": "openai", "budget_candidates": 1,
            "root": str(root), "db": "rsi.db", "proposer_args": args, "quiet": True}
    code = ("import json, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
            "from rsi.search.loop import SearchOptions, run_search; run_search(SearchOptions(**json.loads(sys.argv[1])))")
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "child.err", "w") as errf:   # a file, not a pipe: the child never blocks on a full pipe
        proc = subprocess.Popen([sys.executable, "-c", code, json.dumps(opts)], env=env, cwd=str(root), stderr=errf)
        try:
            deadline = time.monotonic() + 120
            while not any(r["type"] == "proposal" for p in (root / ".rsi" / "transcripts").glob("*.jsonl")
                          for r in _records(p)) if (root / ".rsi" / "transcripts").exists() else True:
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.05)
            seen = time.monotonic()
            proc.send_signal(signal.SIGINT)  # Ctrl-C while the reply's candidate is being judged
            signalled = time.monotonic() - seen
            rc = proc.wait(timeout=60)
            exited = time.monotonic() - seen
        finally:
            if proc.poll() is None:
                proc.kill()
    err = (root / "child.err").read_text()
    assert rc == 0, err[-2000:]
    store = Store(root / "rsi.db", root)
    run = store.latest_unfinished("swiglu")
    what = {"runs": [(r.status, r.summary.get("reason") or r.summary.get("error")) for r in store.runs()],
            "signal_after_s": round(signalled, 3), "exit_after_s": round(exited, 3),
            "stderr": err[-1500:]}
    store.close()
    return run, what


def test_resumed_run_hits_the_response_cache(tmp_path):
    lost = []
    for attempt in range(3):    # a fresh search each time the judge beat the signal
        with LoopbackLLM("openai", [("reply", reply(GOOD_KERNEL))]) as srv:
            root = tmp_path / f"attempt{attempt}"
            run, what = _interrupted_run(root, srv)
            if run is None:
                lost.append(what)
                continue
            assert run.status == "interrupted" and _evals(root, run.id) == []
            assert len(srv.completions()) == 1

            os.environ["OPENAI_API_KEY"] = KEY
            try:
                summary = run_search(SearchOptions(op="swiglu", backend="interpret", target=None, resume=run.id,
                                                   root=str(root), db="rsi.db", quiet=True))
            finally:
                os.environ.pop("OPENAI_API_KEY", None)
            assert len(srv.completions()) == 1  # the resumed run paid nothing twice
            break
    assert run is not None, f"the run was not left interrupted in all three attempts: {lost}"
    assert [e["status"] for e in _evals(root, run.id)] == ["accepted"]
    calls = [r for r in _records(summary["proposer"]["transcript"]) if r["type"] == "call"]
    assert [(c["seq"], c["cached"]) for c in calls] == [(1, False), (1, True)]
    assert summary["proposer"]["spent"]["calls"] == 1 and summary["proposer"]["spent"]["cached"] == 1


def test_agent_inbox_proposer(tmp_path):
    inbox = tmp_path / "inbox"

    def agent():
        deadline = time.monotonic() + 60
        while not (inbox / "prompt-0001.json").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "## Contract (fixed)" in (inbox / "prompt-0001.md").read_text()
        (inbox / "reply-0001.md.tmp").write_text(reply(CHEAT_KERNEL))
        (inbox / "reply-0001.md.tmp").rename(inbox / "reply-0001.md")

    t = threading.Thread(target=agent, daemon=True)
    t.start()
    summary = run_search(_opts(tmp_path, "agent", 1, {"inbox": str(inbox), "agent_poll_s": 0.05,
                                                      "agent_timeout_s": 60, "hybrid_tune": 0}))
    t.join(5)
    e = _evals(tmp_path, summary["run_id"])
    assert [(x["status"], x["stage"]) for x in e] == [("rejected", "static")]  # the same contract as any proposer
    side = json.loads((inbox / "prompt-0001.json").read_text())
    assert side["run_id"] == summary["run_id"] and side["reply_file"] == "reply-0001.md"
    assert summary["proposer"]["provider"] == "agent" and summary["proposer"]["spent"]["cost_usd"] == 0


def test_missing_key_is_a_clear_usage_error(tmp_path, monkeypatch, capsys):
    from rsi.cli import main

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    code = main(["--root", str(tmp_path), "--db", "rsi.db", "search", "--op-group", "swiglu", "--backend",
                 "interpret", "--proposer", "openai", "--model", "gpt-4.1", "--quiet"])
    captured = capsys.readouterr()
    out = " ".join((captured.out + captured.err).split())
    assert code == 2 and "OPENAI_API_KEY" in out and "--proposer offline" in out
    store = Store(tmp_path / "rsi.db", tmp_path)
    assert [r.status for r in store.runs()] == ["failed"] and store.latest_unfinished() is None
    store.close()
    with pytest.raises(SearchError, match="--base-url"):
        run_search(_opts(tmp_path, "openai-compatible", 1, {}))
