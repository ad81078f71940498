"""The real ``openai`` and ``anthropic`` libraries against loopback servers: replies, retries, timeouts, errors."""

from __future__ import annotations

import json
import threading
import time

import pytest

from rsi.llm.clients import AgentInbox, AnthropicMessages, ConfigError, LLMCallError, OpenAIChat, RetryPolicy, api_key
from rsi.llm.prompt import Prompt
from tests.unit.llm_servers import LoopbackLLM

KEY = "sk-test-client-0123456789"
FAST = RetryPolicy(retries=3, backoff_s=0.01, max_backoff_s=0.05, timeout_s=0.5)
PROMPT = Prompt("be brief", "write a kernel")


def _openai(srv: LoopbackLLM, provider: str = "openai", model: str | None = "gpt-4.1", policy=FAST) -> OpenAIChat:
    return OpenAIChat(provider, model, KEY, srv.url, policy, 256, None, lambda s: None)


def _anthropic(srv: LoopbackLLM, policy=FAST) -> AnthropicMessages:
    return AnthropicMessages("claude-haiku-4-5", KEY, srv.url, policy, 256, 0.2, lambda s: None)


def test_openai_reply_usage_and_request():
    with LoopbackLLM("openai", [("reply", "hello")], usage=(11, 3)) as srv:
        c = _openai(srv).complete(PROMPT, 1)
    assert (c.text, c.input_tokens, c.output_tokens, c.finish_reason, c.attempts) == ("hello", 11, 3, "stop", 1)
    req = srv.completions()[0]
    assert req["path"] == "/v1/chat/completions"
    assert req["headers"]["authorization"] == f"Bearer {KEY}"
    assert req["body"]["messages"] == [{"role": "system", "content": "be brief"},
                                       {"role": "user", "content": "write a kernel"}]
    assert req["body"]["max_completion_tokens"] == 256 and "temperature" not in req["body"]


def test_anthropic_reply_usage_and_request():
    with LoopbackLLM("anthropic", [("reply", "hi there")], usage=(20, 4)) as srv:
        c = _anthropic(srv).complete(PROMPT, 1)
    assert (c.text, c.input_tokens, c.output_tokens, c.finish_reason) == ("hi there", 20, 4, "end_turn")
    req = srv.completions()[0]
    assert req["path"] == "/v1/messages"
    assert req["body"]["system"] == "be brief" and req["body"]["max_tokens"] == 256
    assert req["body"]["temperature"] == 0.2


def test_openai_compatible_server_names_its_model():
    with LoopbackLLM("openai", [("reply", "ok")], model="Qwen/Qwen3-Coder-30B") as srv:
        client = _openai(srv, provider="openai-compatible", model=None)
        c = client.complete(PROMPT, 1)
    assert client.model == "Qwen/Qwen3-Coder-30B" and c.text == "ok"
    assert srv.completions()[0]["body"]["max_tokens"] == 256  # what vLLM and SGLang understand


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_rate_limit_and_server_error_are_retried(protocol):
    with LoopbackLLM(protocol, [("status", 429), ("status", 503), ("reply", "finally")]) as srv:
        client = _openai(srv) if protocol == "openai" else _anthropic(srv)
        c = client.complete(PROMPT, 1)
    assert c.text == "finally" and c.attempts == 3
    assert len(srv.completions()) == 3


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_a_timeout_is_survived(protocol):
    with LoopbackLLM(protocol, [("sleep", 1.5, "too late"), ("reply", "in time")]) as srv:
        client = _openai(srv) if protocol == "openai" else _anthropic(srv)
        start = time.monotonic()
        c = client.complete(PROMPT, 1)
    assert c.text == "in time" and c.attempts == 2
    assert time.monotonic() - start < 1.4  # the request was abandoned at the 0.5 s timeout, not waited out


def test_gives_up_after_the_retries():
    with LoopbackLLM("openai", []) as srv, pytest.raises(LLMCallError) as e:  # an empty script answers 500 forever
        _openai(srv).complete(PROMPT, 1)
    assert not e.value.fatal and e.value.attempts == 4 and "HTTP 500" in str(e.value)
    assert len(srv.completions()) == 4


def test_auth_errors_are_fatal_at_once_and_keys_never_shown():
    with LoopbackLLM("anthropic", [("status", 401), ("reply", "unreachable")]) as srv:
        client = _anthropic(srv)
        with pytest.raises(LLMCallError) as e:
            client.complete(PROMPT, 1)
    assert e.value.fatal and len(srv.completions()) == 1 and "HTTP 401" in str(e.value)
    assert KEY not in repr(client) and client.redact(f"bad key {KEY}!") == "bad key [redacted]!"


def test_missing_key_names_the_variable_and_the_offline_proposer():
    with pytest.raises(ConfigError) as e:
        api_key("openai", {})
    assert "OPENAI_API_KEY" in str(e.value) and "--proposer offline" in str(e.value)
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        api_key("anthropic", {"OPENAI_API_KEY": "x"})
    assert api_key("openai-compatible", {}) == "EMPTY"


def test_agent_inbox_round_trip(tmp_path):
    inbox = AgentInbox(tmp_path / "inbox", "run-1", "swiglu", timeout_s=20, poll_s=0.05, say=lambda s: None)
    inbox.claim()

    def agent():
        while not (tmp_path / "inbox" / "prompt-0003.json").exists():
            time.sleep(0.02)
        side = json.loads((tmp_path / "inbox" / "prompt-0003.json").read_text())
        assert side["run_id"] == "run-1" and side["reply_file"] == "reply-0003.md"
        (tmp_path / "inbox" / "reply-0003.md.tmp").write_text("my reply")
        (tmp_path / "inbox" / "reply-0003.md.tmp").rename(tmp_path / "inbox" / "reply-0003.md")

    t = threading.Thread(target=agent)
    t.start()
    c = inbox.complete(PROMPT, 3)
    t.join()
    assert c.text == "my reply"
    assert "write a kernel" in (tmp_path / "inbox" / "prompt-0003.md").read_text()
    other = AgentInbox(tmp_path / "inbox", "run-2", "swiglu", 1, 0.05, lambda s: None)
    with pytest.raises(ConfigError, match="holds prompt-0003.json of run run-1"):
        other.claim()


def test_agent_inbox_timeout_is_fatal(tmp_path):
    inbox = AgentInbox(tmp_path, "run-1", "swiglu", timeout_s=0.2, poll_s=0.05, say=lambda s: None)
    with pytest.raises(LLMCallError) as e:
        inbox.complete(PROMPT, 1)
    assert e.value.fatal and "reply-0001.md" in str(e.value) and "--resume run-1" in str(e.value)


# 200 responses that are not a completion: what proxies and gateways (LiteLLM, nginx) send when something behind them
# breaks. Each is a call error, retried like a 5xx, never a raw traceback.
UNEXPECTED = {"truncated JSON": ("raw", '{"id": "chatcmpl-x", "choices": [{"index": 0, "mess', "application/json"),
              "HTML page": ("raw", "<html><body><h1>502 Bad Gateway</h1>nginx</body></html>", "text/html"),
              "empty body": ("raw", "", "application/json"),
              "JSON that is no completion": ("raw", '{"status": "ok"}', "application/json")}


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
@pytest.mark.parametrize("what", sorted(UNEXPECTED))
def test_an_unexpected_body_is_retried(protocol, what):
    with LoopbackLLM(protocol, [UNEXPECTED[what], ("reply", "in the end")]) as srv:
        client = _openai(srv) if protocol == "openai" else _anthropic(srv)
        c = client.complete(PROMPT, 1)
    assert c.text == "in the end" and c.attempts == 2 and len(srv.completions()) == 2


def test_unexpected_bodies_give_up_as_a_call_error_that_names_them():
    with LoopbackLLM("anthropic", [UNEXPECTED["HTML page"]] * 4) as srv, pytest.raises(LLMCallError) as e:
        _anthropic(srv).complete(PROMPT, 1)
    assert not e.value.fatal and e.value.attempts == 4 and len(srv.completions()) == 4
    assert "unexpected response" in str(e.value) and "502 Bad Gateway" in str(e.value)


def test_an_anthropic_message_without_usage_is_a_reply():
    with LoopbackLLM("anthropic", [("nousage", "no usage here")]) as srv:
        c = _anthropic(srv).complete(PROMPT, 1)
    assert c.text == "no usage here" and c.attempts == 1
    assert not c.usage_reported and (c.input_tokens, c.output_tokens) == (0, 0)  # the proposer counts the upper bound
    with LoopbackLLM("openai", [("nousage", "none either"), ("reply", "counted")], usage=(7, 2)) as srv:
        client = _openai(srv)
        bare, counted = client.complete(PROMPT, 1), client.complete(PROMPT, 2)
    assert not bare.usage_reported and counted.usage_reported and counted.usage == {"input_tokens": 7,
                                                                                    "output_tokens": 2}


def test_agent_inbox_waits_for_a_reply_that_is_still_being_written(tmp_path, monkeypatch):
    """An agent that writes its reply in place, in two parts with a pause between them: the half is not taken. The
    inbox takes a file only once its size and modification time have held over two polls (or it was renamed into
    place whole, which always passes that test)."""
    from rsi.llm import clients

    inbox = AgentInbox(tmp_path, "run-1", "swiglu", timeout_s=20, poll_s=0.01, say=lambda s: None)
    path = tmp_path / "reply-0001.md"
    first, rest = "Here is my kernel:\n```python\ndef launch(x", "):\n    return x\n```\n"
    steps = [lambda: path.write_text(first), lambda: None,                     # written, then a pause of one poll
             lambda: path.write_text(first + rest)] + [lambda: None] * 10      # ... then the rest
    polls = []
    real_sleep = time.sleep

    def sleep(s):  # each poll's wait is one step of the writer
        polls.append(s)
        (steps.pop(0) if steps else (lambda: None))()
        real_sleep(0.002)  # let the clock that stamps mtime move on

    monkeypatch.setattr(clients.time, "sleep", sleep)
    c = inbox.complete(PROMPT, 1)
    assert c.text == first + rest
    assert len(polls) >= 5  # appeared, held one poll (the old rule took it here), changed, held two polls
