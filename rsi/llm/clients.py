"""Model clients: OpenAI Chat Completions, Anthropic Messages, any OpenAI-compatible server, and a file inbox.

Each client turns a :class:`Prompt` into a :class:`Completion`. Retries are ours, not the libraries' (their
``max_retries`` is 0), so that every attempt, backoff and timeout is counted against the budget and shows in the
transcript: rate limits (429), timeouts, connection errors and server errors (5xx) are retried with exponential
backoff (honouring Retry-After); anything else (a bad key, an unknown model) fails at once. A 200 whose body is not
a completion (truncated JSON, a proxy's HTML page, JSON of another shape) is an :class:`UnexpectedResponse`, retried
like a server error. Keys come from the environment only and are never returned, logged or stored; :meth:`redact`
scrubs them from error text.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from rsi.llm.prompt import Prompt

KEY_VARS = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY", "openai-compatible": "OPENAI_API_KEY"}
# every variable a client (ours or the libraries') may read a credential from: all are redacted, whoever is used
SECRET_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
REDACTED = "[redacted]"
MIN_SECRET_CHARS = 8  # shorter values ("EMPTY", "x") are placeholders; replacing them would mangle ordinary text


def known_secrets(environ: Mapping[str, str], extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The configured secrets, longest first (so that a key containing another is replaced whole)."""
    values = {v.strip() for v in [*(environ.get(n, "") for n in SECRET_VARS), *extra]}
    return tuple(sorted((v for v in values if len(v) >= MIN_SECRET_CHARS), key=len, reverse=True))


def redact_secrets(text: str, secrets: tuple[str, ...]) -> str:
    for secret in secrets:
        text = text.replace(secret, REDACTED)
    return text


class ConfigError(ValueError):
    """A proposer that cannot start; the message names what is missing and what to do."""


class UnexpectedResponse(Exception):
    """A response the server called a success whose body is not what the protocol says (retried like a 5xx)."""


def _snippet(body: Any, limit: int = 200) -> str:
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if not isinstance(body, str):
        try:
            body = body.to_json(indent=None)  # the libraries' models
        except Exception:  # noqa: BLE001 - only for a message
            body = repr(body)
    body = " ".join(body.split())
    return repr(body[:limit] + ("..." if len(body) > limit else "")) if body else "an empty body"


def _checked(send: Callable[[], Any], lib: Any, extract: Callable[[Any], Any]) -> Callable[[], Any]:
    """``send`` then ``extract``; a body the library cannot decode or ``extract`` cannot read is UnexpectedResponse."""
    def attempt() -> Any:
        try:
            r = send()
        except lib.APIError:
            raise
        except json.JSONDecodeError as e:
            raise UnexpectedResponse(f"the body is not valid JSON ({e.msg} at char {e.pos}): {_snippet(e.doc)}") \
                from None
        except (ValueError, TypeError, AttributeError, KeyError, IndexError) as e:
            raise UnexpectedResponse(f"the library could not read the body ({type(e).__name__}: {e})") from None
        return extract(r)
    return attempt


class LLMCallError(RuntimeError):
    def __init__(self, message: str, fatal: bool = False, attempts: int = 1, wall_s: float = 0.0):
        super().__init__(message)
        self.fatal, self.attempts, self.wall_s = fatal, attempts, wall_s


@dataclass(frozen=True)
class Completion:
    text: str
    input_tokens: int = 0
    output_tokens: int = 0
    finish_reason: str | None = None
    attempts: int = 1
    wall_s: float = 0.0
    usage_reported: bool = True  # False: the reply carried no (or partial) token counts; the proposer estimates them

    @property
    def usage(self) -> dict[str, int]:
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens}


@dataclass(frozen=True)
class RetryPolicy:
    retries: int = 5               # attempts after the first
    backoff_s: float = 2.0         # first wait; doubles each time, plus up to 50% jitter
    max_backoff_s: float = 60.0
    timeout_s: float = 300.0       # per request


class Client(Protocol):
    provider: str
    model: str

    def complete(self, prompt: Prompt, seq: int) -> Completion: ...

    def redact(self, text: str) -> str: ...


def _retry_after(headers: Mapping[str, str] | None) -> float | None:
    if not headers:
        return None
    for name, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
        value = headers.get(name)
        if value:
            try:
                return float(value) * scale
            except ValueError:
                return None  # an HTTP date: fall back to our own backoff
    return None


def call_with_retries(fn: Callable[[], Any], policy: RetryPolicy, lib: Any, redact: Callable[[str], str],
                      sleep: Callable[[float], None] = time.sleep, say: Callable[[str], None] = lambda s: None
                      ) -> tuple[Any, int, float]:
    """Run ``fn`` with retries on transient errors of the ``openai``/``anthropic`` module ``lib``.

    Returns (result, attempts, wall seconds); raises LLMCallError (``fatal`` for errors a retry cannot fix)."""
    start = time.monotonic()
    for attempt in range(1, policy.retries + 2):
        try:
            return fn(), attempt, time.monotonic() - start
        except lib.APIStatusError as e:
            code = e.status_code
            why = redact(f"HTTP {code}: {_message(e)}")
            if not (code in (408, 409, 429) or code >= 500):
                # a bad key, an unknown model or a rejected request: the next call would fail the same way
                raise LLMCallError(why, fatal=True, attempts=attempt, wall_s=time.monotonic() - start) from None
            wait = _retry_after(getattr(e.response, "headers", None))
        except lib.APITimeoutError:
            why, wait = f"request timed out after {policy.timeout_s:g} s", None
        except UnexpectedResponse as e:
            why, wait = redact(f"unexpected response: {e}"), None
        except lib.APIConnectionError as e:
            why, wait = redact(f"connection error: {e}"), None
        if attempt > policy.retries:
            raise LLMCallError(f"gave up after {attempt} attempts; last: {why}", attempts=attempt,
                               wall_s=time.monotonic() - start)
        if wait is None:
            wait = policy.backoff_s * 2 ** (attempt - 1) * (1 + 0.5 * random.random())
        wait = min(wait, policy.max_backoff_s)
        say(f"{why}; retrying in {wait:.1f} s (attempt {attempt + 1} of {policy.retries + 1})")
        sleep(wait)
    raise AssertionError("unreachable")


def _message(e: Exception) -> str:
    body = getattr(e, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:300]
    return str(e)[:300]


class _KeyedClient:
    provider = ""

    def __init__(self, model: str, api_key: str, policy: RetryPolicy, max_output_tokens: int,
                 temperature: float | None, say: Callable[[str], None]):
        self.model, self._key, self.policy = model, api_key, policy
        self.max_output_tokens, self.temperature, self.say = max_output_tokens, temperature, say

    def redact(self, text: str) -> str:
        return redact_secrets(text, known_secrets(os.environ, (self._key,)))

    def __repr__(self) -> str:  # never show the key, even in a traceback's locals
        return f"{type(self).__name__}(provider={self.provider!r}, model={self.model!r})"


class OpenAIChat(_KeyedClient):
    """OpenAI's Chat Completions API; also any server speaking it (vLLM, SGLang, llama.cpp...)."""

    def __init__(self, provider: str, model: str | None, api_key: str, base_url: str | None, policy: RetryPolicy,
                 max_output_tokens: int, temperature: float | None, say: Callable[[str], None]):
        import openai

        self._lib = openai
        self._api = openai.OpenAI(api_key=api_key, base_url=base_url, max_retries=0, timeout=policy.timeout_s)
        self.provider = provider
        super().__init__(model or "", api_key, policy, max_output_tokens, temperature, say)
        if not self.model:
            self.model = self._served_model()

    def _served_model(self) -> str:
        """A local server serves one model (usually): ask it which, as `--model` was not given."""
        def ids(page: Any) -> list[str]:
            models = list(getattr(page, "data", None) or [])
            if isinstance(page, (str, bytes)) or not all(isinstance(getattr(m, "id", None), str) for m in models):
                raise UnexpectedResponse(f"not a model list: {_snippet(page)}")
            return [m.id for m in models]

        models, _, _ = call_with_retries(_checked(lambda: self._api.models.list(), self._lib, ids), self.policy,
                                         self._lib, self.redact, say=self.say)
        if not models:
            raise ConfigError("the server lists no models; pass --model")
        return models[0]

    def complete(self, prompt: Prompt, seq: int) -> Completion:
        kwargs: dict[str, Any] = {"model": self.model, "messages": [
            {"role": "system", "content": prompt.system}, {"role": "user", "content": prompt.user}]}
        # OpenAI's reasoning models take only max_completion_tokens; many compatible servers know only max_tokens
        kwargs["max_completion_tokens" if self.provider == "openai" else "max_tokens"] = self.max_output_tokens
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        send = _checked(lambda: self._api.chat.completions.create(**kwargs), self._lib, self._read)
        c, attempts, wall = call_with_retries(send, self.policy, self._lib, self.redact, say=self.say)
        return Completion(**c, attempts=attempts, wall_s=wall)

    @staticmethod
    def _read(r: Any) -> dict[str, Any]:
        choices = getattr(r, "choices", None)
        if isinstance(r, (str, bytes)) or not isinstance(choices, list) or not choices:
            raise UnexpectedResponse(f"not a chat completion (no choices): {_snippet(r)}")
        message = getattr(choices[0], "message", None)
        content = getattr(message, "content", None)
        if message is None or not isinstance(content, (str, type(None))):
            raise UnexpectedResponse(f"a chat completion without a message: {_snippet(r)}")
        usage = getattr(r, "usage", None)
        return {"text": content or "", "finish_reason": getattr(choices[0], "finish_reason", None),
                **_usage(getattr(usage, "prompt_tokens", None), getattr(usage, "completion_tokens", None))}


class AnthropicMessages(_KeyedClient):
    provider = "anthropic"

    def __init__(self, model: str, api_key: str, base_url: str | None, policy: RetryPolicy, max_output_tokens: int,
                 temperature: float | None, say: Callable[[str], None]):
        import anthropic

        self._lib = anthropic
        self._api = anthropic.Anthropic(api_key=api_key, base_url=base_url, max_retries=0, timeout=policy.timeout_s)
        super().__init__(model, api_key, policy, max_output_tokens, temperature, say)

    def complete(self, prompt: Prompt, seq: int) -> Completion:
        kwargs: dict[str, Any] = {"model": self.model, "max_tokens": self.max_output_tokens, "system": prompt.system,
                                  "messages": [{"role": "user", "content": prompt.user}]}
        if self.temperature is not None:  # this SDK's create() has no temperature argument; the API may take it
            kwargs["extra_body"] = {"temperature": self.temperature}
        send = _checked(lambda: self._api.messages.create(**kwargs), self._lib, self._read)
        c, attempts, wall = call_with_retries(send, self.policy, self._lib, self.redact, say=self.say)
        return Completion(**c, attempts=attempts, wall_s=wall)

    @staticmethod
    def _read(r: Any) -> dict[str, Any]:
        content = getattr(r, "content", None)
        if isinstance(r, (str, bytes)) or not isinstance(content, list):
            raise UnexpectedResponse(f"not a message (no content): {_snippet(r)}")
        texts = [getattr(b, "text", None) for b in content if getattr(b, "type", "") == "text"]
        if not all(isinstance(t, str) for t in texts):
            raise UnexpectedResponse(f"a message with a malformed text block: {_snippet(r)}")
        usage = getattr(r, "usage", None)
        return {"text": "".join(texts), "finish_reason": getattr(r, "stop_reason", None),
                **_usage(getattr(usage, "input_tokens", None), getattr(usage, "output_tokens", None))}


class AgentInbox:
    """Any coding agent or a person as the proposer: prompts are written as files, replies are read back.

    For call N the loop writes ``prompt-000N.md`` and ``prompt-000N.json`` (run id, sequence number, prompt hash,
    the reply file's name) into the inbox and waits for ``reply-000N.md``; the reply is parsed exactly like a
    model's. The protocol: write the reply under another name (``reply-000N.md.tmp``) and rename it into place. A
    file is taken only once it is non-empty and its size and modification time have held over two polls (and did
    not change while it was read), so a writer that pauses for less than two polls is not cut short either.
    """

    STABLE_POLLS = 2

    provider = "agent"
    model = "agent"

    def __init__(self, inbox: Path, run_id: str, op: str, timeout_s: float, poll_s: float,
                 say: Callable[[str], None], progress_every_s: float = 30.0):
        self.inbox, self.run_id, self.op = inbox, run_id, op
        self.timeout_s, self.poll_s, self.say, self.progress_every_s = timeout_s, poll_s, say, progress_every_s

    def claim(self) -> None:
        """Refuse an inbox that holds another run's exchange (its replies would be taken for this run's)."""
        self.inbox.mkdir(parents=True, exist_ok=True)
        for side in sorted(self.inbox.glob("prompt-*.json")):
            try:
                other = json.loads(side.read_text()).get("run_id")
            except (OSError, json.JSONDecodeError):
                other = None
            if other != self.run_id:
                raise ConfigError(f"--inbox {self.inbox} holds {side.name} of run {other}; use an empty folder for "
                                  f"each run (or --resume that run)")

    def redact(self, text: str) -> str:
        return redact_secrets(text, known_secrets(os.environ))

    def paths(self, seq: int) -> tuple[Path, Path, Path]:
        return (self.inbox / f"prompt-{seq:04d}.md", self.inbox / f"prompt-{seq:04d}.json",
                self.inbox / f"reply-{seq:04d}.md")

    def complete(self, prompt: Prompt, seq: int) -> Completion:
        md, side, reply = self.paths(seq)
        for path, text in ((md, prompt.as_markdown()), (side, json.dumps({
                "run_id": self.run_id, "seq": seq, "op": self.op, "prompt_sha256": prompt.sha256,
                "prompt_file": md.name, "reply_file": reply.name}, indent=2) + "\n")):
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(text)
            os.replace(tmp, path)
        start = time.monotonic()
        self.say(f"prompt written to {md}; waiting for {reply} (timeout {self.timeout_s:.0f} s)")
        last_note, last, held = start, None, 0
        while True:
            seen = _file_state(reply)
            held = held + 1 if seen is not None and seen[0] > 0 and seen == last else 0
            last = seen
            if held >= self.STABLE_POLLS:  # unchanged over two polls: the writer is done (or renamed it whole)
                data = reply.read_bytes()
                if _file_state(reply) == seen and len(data) == seen[0]:
                    return Completion(text=data.decode("utf-8", "replace"), finish_reason="reply file",
                                      wall_s=time.monotonic() - start)
                held = 0  # it changed while being read: wait for it to settle again
            waited = time.monotonic() - start
            if waited > self.timeout_s:
                raise LLMCallError(f"no {reply.name} in {self.inbox} within {self.timeout_s:.0f} s; the prompt stays "
                                   f"there: write the reply and resume the run with --resume {self.run_id}",
                                   fatal=True, wall_s=waited)
            if time.monotonic() - last_note >= self.progress_every_s:
                self.say(f"still waiting for {reply} ({waited:.0f} s of {self.timeout_s:.0f} s)")
                last_note = time.monotonic()
            time.sleep(self.poll_s)


def _usage(n_in: Any, n_out: Any) -> dict[str, Any]:
    """Token counts as reported; a missing or malformed count is 0 and the reply is marked unreported."""
    def ok(n: Any) -> bool:
        return isinstance(n, int) and not isinstance(n, bool) and n >= 0
    return {"input_tokens": n_in if ok(n_in) else 0, "output_tokens": n_out if ok(n_out) else 0,
            "usage_reported": ok(n_in) and ok(n_out)}


def _file_state(path: Path) -> tuple[int, int] | None:
    """(size, modification time in ns), or None where there is no file (yet)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_size, st.st_mtime_ns


def stderr_say(quiet: bool) -> Callable[[str], None]:
    def say(text: str) -> None:
        if not quiet:
            print(f"[rsi llm] {text}", file=sys.stderr, flush=True)
    return say


def api_key(provider: str, environ: Mapping[str, str]) -> str:
    var = KEY_VARS[provider]
    key = environ.get(var, "").strip()
    if key:
        return key
    if provider == "openai-compatible":
        return "EMPTY"  # local servers started without --api-key accept any key
    raise ConfigError(f"--proposer {provider} needs an API key in the environment variable {var}, which is not set. "
                      f"Export it (keys are read from the environment only and never stored), or use "
                      f"--proposer offline, which needs no network.")
