"""The LLM proposer's own logic with a scripted client and recorded verdicts (no harness, no network): restore after
a kill, the response cache, rejected and duplicate replies, stops, and memory from other runs."""

from __future__ import annotations

import pytest

from rsi.llm.budget import Price
from rsi.llm.clients import Completion, LLMCallError
from rsi.llm.prompt import Prompt
from rsi.llm.transcript import TranscriptWriter, default_path, read_transcript, register
from rsi.search.llm_proposers import LLMProposer, Settings
from rsi.search.loop import SearchOptions
from rsi.spaces import load_space
from rsi.store import Store
from tests.unit.llm_servers import CHEAT_KERNEL, GOOD_KERNEL, reply


class ScriptedClient:
    provider, model = "openai", "gpt-4.1"

    def __init__(self, replies):
        self.replies, self.prompts = list(replies), []

    def complete(self, prompt: Prompt, seq: int) -> Completion:
        self.prompts.append(prompt)
        r = self.replies.pop(0)  # an empty script fails the test: the proposer asked when it should not have
        if isinstance(r, Exception):
            raise r
        return Completion(r, 1000, 200)

    def redact(self, text: str) -> str:
        return text


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "rsi.db", tmp_path)
    yield s
    s.close()


def _run(store) -> str:
    return store.create_run("swiglu", None, "interpret", "openai", {}, {})


def _proposer(tmp_path, store, run_id, client, **settings) -> LLMProposer:
    """What ``make`` builds, with a scripted client; a second call for the same run is a resumed process."""
    opts = SearchOptions(op="swiglu", backend="interpret", target=None, proposer="openai", root=str(tmp_path),
                         db="rsi.db", quiet=True)
    path = default_path(tmp_path, run_id)
    records = read_transcript(path) if path.exists() else []
    register(store.conn, run_id, path, "openai")
    return LLMProposer(name="openai", client=client, price=Price(1.0, 1.0, "test"), opts=opts, store=store,
                       run_id=run_id, space=load_space("swiglu"), settings=Settings(**settings),
                       transcript=TranscriptWriter(path), records=records, say=lambda s: None)


def _judge(store, run_id, seq, proposer, proposal, status="accepted", stage="accepted", reason="ok"):
    """What the loop does with a verdict (here made up instead of measured)."""
    store.save_candidate(proposal.candidate)
    verdict = {"candidate": proposal.candidate.hash, "status": status, "stage": stage, "reason": reason,
               "tolerance": {}, "timings": [], "details": {}}
    objective = 1.0 if status == "accepted" else None
    store.record_evaluation(run_id, seq, verdict, objective)
    proposer.feedback(proposal, verdict, objective)


def test_killed_while_tuning_resumes_the_same_trial_without_a_call(tmp_path, store):
    run_id = _run(store)
    first = _proposer(tmp_path, store, run_id, ScriptedClient([reply(GOOD_KERNEL)]), hybrid_tune=3)
    p1 = first.propose()
    _judge(store, run_id, 0, first, p1)
    p2 = first.propose()
    _judge(store, run_id, 1, first, p2)
    p3 = first.propose()  # ... and the search is killed while p3 is judged
    assert [p.meta["kind"] for p in (p1, p2, p3)] == ["llm", "tune", "tune"]

    again = ScriptedClient([])
    second = _proposer(tmp_path, store, run_id, again, hybrid_tune=3)
    q = second.propose()
    assert q.meta["kind"] == "tune" and q.candidate.hash == p3.candidate.hash
    assert again.prompts == []
    assert [a["kind"] for a in second.attempts] == ["llm", "tune"]


def test_killed_while_judging_a_reply_asks_again_and_the_cache_answers(tmp_path, store):
    run_id = _run(store)
    first = _proposer(tmp_path, store, run_id, ScriptedClient([reply(GOOD_KERNEL)]))
    p = first.propose()  # killed while p is judged
    again = ScriptedClient([])
    second = _proposer(tmp_path, store, run_id, again)
    q = second.propose()
    assert q.candidate.hash == p.candidate.hash and again.prompts == []
    calls = [r for r in read_transcript(default_path(tmp_path, run_id)) if r["type"] == "call"]
    assert [(c["seq"], c["cached"], c["prompt_sha256"]) for c in calls] == [
        (1, False, calls[0]["prompt_sha256"]), (1, True, calls[0]["prompt_sha256"])]
    assert second.budget.spent.calls == 1 and second.budget.spent.cached == 1


def test_rejected_and_duplicate_replies_are_fed_back(tmp_path, store):
    run_id = _run(store)
    client = ScriptedClient(["Tile the rows, I think.", reply(GOOD_KERNEL), reply(GOOD_KERNEL), reply(CHEAT_KERNEL)])
    p = _proposer(tmp_path, store, run_id, client, hybrid_tune=0)
    good = p.propose()
    assert good.meta["call"] == 2
    assert "reply 1 [(no config)]: rejected at stage `reply`: the reply has no fenced code block" in client.prompts[1].user
    _judge(store, run_id, 0, p, good)
    cheat = p.propose()
    assert cheat.meta["call"] == 4
    assert "this exact candidate was judged already as reply 2 (accepted)" in client.prompts[3].user
    assert any(f["key"] == "reply" for f in store.recall("failure", "swiglu"))  # memory for later runs


def test_errors_in_a_row_and_fatal_errors_stop_the_proposer(tmp_path, store):
    flaky = ScriptedClient([LLMCallError("HTTP 503", attempts=6)] * 3)
    p = _proposer(tmp_path, store, _run(store), flaky, max_consecutive_errors=3)
    assert p.propose() is None and "3 in a row" in p.stop_reason and len(flaky.prompts) == 3
    assert p.budget.spent.failed_calls == 3
    fatal = ScriptedClient([LLMCallError("HTTP 401: bad key", fatal=True)])
    q = _proposer(tmp_path, store, _run(store), fatal)
    assert q.propose() is None and "HTTP 401" in q.stop_reason and len(fatal.prompts) == 1


def test_call_budget_is_checked_before_calling(tmp_path, store):
    client = ScriptedClient(["no code here", reply(GOOD_KERNEL)])
    p = _proposer(tmp_path, store, _run(store), client, max_calls=1)
    assert p.propose() is None
    assert p.stop_reason.startswith("call budget reached") and len(client.prompts) == 1


def test_a_repeated_prompt_stops_instead_of_looping(tmp_path, store):
    client = ScriptedClient(["no code here"])
    p = _proposer(tmp_path, store, _run(store), client)
    p.build_prompt = lambda: Prompt("same", "same")
    assert p.propose() is None and "repeated" in p.stop_reason


def test_memory_comes_from_other_runs_only(tmp_path, store):
    run_id = _run(store)
    store.remember("rmsnorm", "slow_fast", "stage1", {"slow": "a", "fast": "b", "slow_us": 90.0, "fast_us": 60.0,
                                                      "config": {"BLOCK_H": 4096}}, "older-run")
    store.remember("rmsnorm", "failure", "compile", {"reason": "arange's range must be a power of 2"}, "older-run")
    store.remember("swiglu", "failure", "static", {"reason": "imports os: not allowed"}, run_id)
    text = _proposer(tmp_path, store, run_id, ScriptedClient([])).build_prompt().user
    assert "rmsnorm `stage1`: 90.0 us -> 60.0 us with config BLOCK_H=4096" in text
    assert "1x rmsnorm [compile] arange's range must be a power of N" in text
    assert "imports os" not in text  # this run's own rejections are in "Last attempts", not in memory


def _cuda_proposer(tmp_path, store, client) -> tuple[LLMProposer, str]:
    run_id = store.create_run("swiglu", "h200", "cuda", "openai", {}, {"sm_count": 132})
    opts = SearchOptions(op="swiglu", backend="cuda", target="h200", proposer="openai", root=str(tmp_path),
                         db="rsi.db", quiet=True)
    path = default_path(tmp_path, run_id)
    p = LLMProposer(name="openai", client=client, price=Price(1.0, 1.0, "test"), opts=opts, store=store,
                    run_id=run_id, space=load_space("swiglu"), settings=Settings(hybrid_tune=0),
                    transcript=TranscriptWriter(path), records=[], say=lambda s: None)
    return p, run_id


def test_timed_verdicts_reach_the_prompt(tmp_path, store):
    """A CUDA run's evidence (as the harness reports it): per-shape time, % of copy bandwidth, measured copy rate."""
    client = ScriptedClient([reply(GOOD_KERNEL), reply(CHEAT_KERNEL)])
    p, run_id = _cuda_proposer(tmp_path, store, client)
    first = p.propose()
    assert "not measured yet in this run" in client.prompts[0].user and "132 SMs (measured)" in client.prompts[0].user
    store.save_candidate(first.candidate)
    row = {"bucket": "stage1", "shape": {"name": "stage1", "dims": {"rows": 10250, "ffn": 14336}}, "p50_us": 210.0,
           "gbps": 4190.0, "pct_copy": 97.4, "baselines": {"compile": {"p50_us": 214.2, "speedup": 1.02},
                                                           "eager": {"p50_us": 520.0, "speedup": 2.48}}}
    verdict = {"candidate": first.candidate.hash, "status": "accepted", "stage": "accepted", "reason": "timed",
               "tolerance": {}, "timings": [row], "details": {"copy_bw": {"gbps": 4300.0}}}
    store.record_evaluation(run_id, 0, verdict, 0.98)
    p.feedback(first, verdict, 0.98)
    p.propose()
    text = client.prompts[1].user
    assert "copy bandwidth measured in this run: 4300 GB/s" in text
    assert "## Current best: reply 1" in text
    assert "stage1: p50 210.0 us, 4190 GB/s = 97.4% of copy bandwidth (1.020x vs compile, 2.480x vs eager)" in text
    assert "objective 0.980" in text


def test_the_locked_verified_kernel_is_the_current_best(tmp_path, store):
    from rsi.contract import Candidate
    from rsi.verified import lock_kernel, write_record

    locked = Candidate(op="swiglu", source=GOOD_KERNEL, config={"BLOCK_F": 256, "num_warps": 4})
    record = {"candidate_hash": locked.hash, "config": dict(locked.config), "search": {"parent": None},
              "timings": [{"bucket": "full", "p50_us": 800.0, "gbps": 4400.0, "pct_copy": 98.1,
                           "vs": {"compile": {"speedup": 1.04}, "eager": {"speedup": 2.6}}}]}
    lock_kernel(tmp_path, "h200", "swiglu", write_record(tmp_path, locked, "swiglu", record))
    client = ScriptedClient([reply(CHEAT_KERNEL)])
    p, _ = _cuda_proposer(tmp_path, store, client)
    proposal = p.propose()
    text = client.prompts[0].user
    assert f"## Current best: verified kernel {locked.hash[:12]} (locked for h200)" in text
    assert "full: p50 800.0 us, 4400 GB/s = 98.1% of copy bandwidth (1.040x vs compile, 2.600x vs eager)" in text
    assert proposal.candidate.parent == locked.hash


def test_an_unexpected_body_is_a_recorded_and_counted_call_error(tmp_path, store, monkeypatch):
    """A gateway's HTML page with status 200: recorded in the transcript, counted, and the next call goes on."""
    from rsi.llm.clients import OpenAIChat, RetryPolicy
    from tests.unit.llm_servers import LoopbackLLM

    run_id = _run(store)
    html = ("raw", "<html><body>502 Bad Gateway</body></html>", "text/html")
    with LoopbackLLM("openai", [html, ("reply", reply(GOOD_KERNEL))]) as srv:
        client = OpenAIChat("openai", "gpt-4.1", "sk-test-0123456789", srv.url, RetryPolicy(0, 0.01, 0.05, 2.0),
                            256, None, lambda s: None)
        p = _proposer(tmp_path, store, run_id, client)
        proposal = p.propose()
    assert proposal is not None and proposal.meta["call"] == 1
    records = read_transcript(default_path(tmp_path, run_id))
    errors = [r for r in records if r["type"] == "call_error"]
    assert len(errors) == 1 and "unexpected response" in errors[0]["error"] and not errors[0]["fatal"]
    assert (p.budget.spent.calls, p.budget.spent.failed_calls) == (2, 1)
    # whatever else a client trips over is a failed call too, not a traceback that leaves the run `running`
    odd = ScriptedClient([KeyError("choices")] * 3)
    q = _proposer(tmp_path, store, _run(store), odd, max_consecutive_errors=3, cache=False)
    assert q.propose() is None and "KeyError" in q.stop_reason and q.budget.spent.failed_calls == 3


def test_a_reply_without_usage_is_counted_at_its_upper_bound(tmp_path, store):
    """No `usage` in the reply: the call costs what it could have cost (prompt estimate + the whole reply allowance),
    so token and cost limits still bind; the user is told once."""
    import math

    from rsi.llm.budget import CHARS_PER_TOKEN
    from rsi.llm.clients import OpenAIChat, RetryPolicy
    from tests.unit.llm_servers import LoopbackLLM

    def client(srv):
        return OpenAIChat("openai", "gpt-4.1", "sk-test-0123456789", srv.url, RetryPolicy(0, 0.01, 0.05, 2.0), 1000,
                          None, lambda s: None)

    with LoopbackLLM("openai", [("nousage", "no code yet"), ("nousage", reply(GOOD_KERNEL))]) as srv:
        p = _proposer(tmp_path, store, _run(store), client(srv), max_output_tokens=1000, max_tokens=None,
                      max_cost_usd=None)
        said = []
        p.say = said.append
        first_chars = p.build_prompt().chars
        assert p.propose() is not None
    spent = p.budget.spent
    assert spent.output_tokens == 2000 and spent.input_tokens >= 2 * math.ceil(first_chars / CHARS_PER_TOKEN)
    assert spent.cost_usd == pytest.approx(spent.tokens / 1e6)  # the test price: $1 per million either way
    assert len([s for s in said if "no token usage" in s]) == 1
    calls = [r for r in read_transcript(p.transcript.path) if r["type"] == "call"]
    assert [c["usage_estimated"] for c in calls] == [True, True] and calls[0]["usage"]["output_tokens"] == 1000

    # and the token limit binds: room for one such call, not two
    with LoopbackLLM("openai", [("nousage", "no code yet"), ("nousage", "no code either")]) as srv:
        limit = int(1.5 * (math.ceil(first_chars / CHARS_PER_TOKEN) + 1000))
        q = _proposer(tmp_path, store, _run(store), client(srv), max_output_tokens=1000, max_tokens=limit,
                      max_cost_usd=None, cache=False)
        assert q.propose() is None
        assert len(srv.completions()) == 1 and q.stop_reason.startswith("token budget reached")


def test_replies_that_add_nothing_stop_the_proposer(tmp_path, store):
    """A model stuck on a judged candidate (or on prose) would burn the whole call budget: three such replies in a
    row stop it, with a reason that says so."""
    run_id = _run(store)
    stuck = ScriptedClient([reply(GOOD_KERNEL)] * 8)
    p = _proposer(tmp_path, store, run_id, stuck, hybrid_tune=0, max_calls=8)
    _judge(store, run_id, 0, p, p.propose())
    assert p.propose() is None and len(stuck.prompts) == 4  # the structure, then three repeats of it
    reason = p.summary()["stop_reason"]
    assert "3 replies in a row added no new candidate" in reason and "3 repeated an already-judged candidate" in reason

    prose = ScriptedClient(["Let me think about tiling."] * 8)
    q = _proposer(tmp_path, store, _run(store), prose, max_calls=8, cache=False)
    assert q.propose() is None and len(prose.prompts) == 3
    assert "3 had no usable code block" in q.stop_reason

    # the count survives a restart: two more rejected replies after a resume are enough
    resumed = ScriptedClient(["still thinking"] * 8)
    r = _proposer(tmp_path, store, run_id, resumed, hybrid_tune=0, max_calls=8, max_unproductive_replies=5)
    assert r.propose() is None and len(resumed.prompts) == 2


def test_the_response_cache_answers_its_own_run_only_unless_shared(tmp_path, store):
    """A resume is served from the cache; a fresh run asks the model again (the same prompt may deserve another
    sample), unless the cache is shared on purpose."""
    first = ScriptedClient([reply(GOOD_KERNEL)])
    a = _proposer(tmp_path, store, _run(store), first).propose()
    fresh = ScriptedClient([reply(CHEAT_KERNEL)])
    b = _proposer(tmp_path, store, _run(store), fresh).propose()
    assert len(fresh.prompts) == 1 and fresh.prompts[0] == first.prompts[0]  # the same prompt, asked again
    assert b.candidate.source == CHEAT_KERNEL != a.candidate.source

    sharing = [ScriptedClient([reply(GOOD_KERNEL)]), ScriptedClient([])]
    c, d = (_proposer(tmp_path, store, _run(store), cl, share_cache=True).propose() for cl in sharing)
    assert sharing[1].prompts == [] and d.candidate.source == c.candidate.source  # served from the shared cache


def test_a_key_echoed_in_a_reply_is_stored_nowhere_and_replay_stays_consistent(tmp_path, store, monkeypatch):
    """A proxy that echoes the request's key inside a 200 reply: the key is redacted from the reply before anything
    is stored (response cache, transcript, the candidate's kernel.py), so the candidate is the redacted source and
    a resume or a replay rebuilds the same hash from the transcript."""
    from rsi.llm.clients import OpenAIChat, RetryPolicy
    from rsi.llm.replay import _replay_events
    from rsi.refs import get_op_group
    from tests.unit.llm_servers import LoopbackLLM

    key, other = "sk-echoed-0123456789abcdef", "sk-ant-other-key-0123456789"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    monkeypatch.setenv("ANTHROPIC_API_KEY", other)  # every key the clients read is a secret, not only the one used
    run_id = _run(store)
    echoed = reply("# served for {KEY}\n" + GOOD_KERNEL, prose="Proxy debug: {KEY} / " + other)
    with LoopbackLLM("openai", [("echo_key", echoed)]) as srv:
        client = OpenAIChat("openai", "gpt-4.1", key, srv.url, RetryPolicy(0, 0.01, 0.05, 2.0), 256, None,
                            lambda s: None)
        p = _proposer(tmp_path, store, run_id, client)
        proposal = p.propose()
    assert srv.completions()[0]["headers"]["authorization"] == f"Bearer {key}"  # the key was used
    assert proposal.candidate.source.startswith("# served for [redacted]\n")
    _judge(store, run_id, 0, p, proposal)
    for f in (f for f in tmp_path.rglob("*") if f.is_file()):  # cache rows, transcript, kernel.py, verdicts
        data = f.read_bytes()
        assert key.encode() not in data and other.encode() not in data, f
    assert all(key not in r[0] for r in store.conn.execute("SELECT reply FROM rsi_llm_cache"))
    records = read_transcript(default_path(tmp_path, run_id))
    events = _replay_events(records, get_op_group("swiglu"))  # raises if the transcript does not rebuild the hash
    assert [c.hash for what, _, c in events if what == "candidate"] == [proposal.candidate.hash]
    resumed = _proposer(tmp_path, store, run_id, ScriptedClient([]))  # restores from the redacted transcript
    assert [a["candidate"] for a in resumed.attempts] == [proposal.candidate.hash]
