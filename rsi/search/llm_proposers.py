"""LLM, agent and replay proposers (``--proposer openai|anthropic|openai-compatible|agent|replay``).

``make`` builds the proposer the loop asked for; the replay proposer itself lives in ``rsi.llm.replay``.

An :class:`LLMProposer` asks a model (or an agent through an inbox folder) for a new structure, one self-contained
prompt per call (``rsi.llm.prompt``); the reply's single code block becomes a :class:`Candidate` that the loop sends
through the same harness as any other; then the offline optimizer tunes the structure's declared parameters
(``rsi.llm.tune``) before the next call. Verdicts, compile errors and error statistics go into the next prompt;
replies that break the format are rejected here, with the reason fed back, without reaching the harness.

Everything is written to a transcript (``rsi.llm.transcript``) from which a resumed run restores its state and
which ``--proposer replay`` replays: the same candidates in the same order, re-judged, verdicts compared.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rsi.contract import Candidate
from rsi.llm import prompt as P
from rsi.llm.budget import CHARS_PER_TOKEN, Budget, Limits, Price, Spent, load_prices, price_for
from rsi.llm.cache import SHARED, ResponseCache, cache_key, run_scope
from rsi.llm.clients import (
    AgentInbox,
    AnthropicMessages,
    Client,
    Completion,
    ConfigError,
    LLMCallError,
    OpenAIChat,
    RetryPolicy,
    api_key,
    known_secrets,
    redact_secrets,
    stderr_say,
)
from rsi.llm.replay import ReplayProposer
from rsi.llm.reply import ParsedReply, code_blocks, parse_reply
from rsi.llm.transcript import TranscriptWriter, calls_by_seq, lookup, read_transcript, register, transcript_path
from rsi.llm.tune import StructureTuner
from rsi.refs import OP_MODULES, get_op_group
from rsi.search.propose import Proposal
from rsi.spaces import template_source
from rsi.verified import locked_kernel

if TYPE_CHECKING:  # the loop imports this module lazily; these are for annotations only
    from rsi.search.loop import SearchOptions
    from rsi.spaces import Space
    from rsi.store import Store

LLM_PROVIDERS = ("openai", "anthropic", "openai-compatible", "agent")
DUPLICATE = "this exact candidate was judged already as"


@dataclass(frozen=True)
class Settings:
    """Proposer settings: ``SearchOptions.proposer_args`` first, then ``RSI_LLM_<NAME>`` environment variables."""

    model: str | None = None
    base_url: str | None = None
    inbox: str | None = None
    transcript: str | None = None
    hybrid_tune: int = 4                  # optimizer trials per accepted structure before the next call (0: none)
    max_calls: int | None = 20
    max_tokens: int | None = 2_000_000
    max_cost_usd: float | None = 5.0
    max_llm_minutes: float | None = 60.0  # time spent waiting for replies
    max_output_tokens: int = 8192
    temperature: float | None = None
    request_timeout_s: float = 300.0
    retries: int = 5
    backoff_s: float = 2.0
    max_backoff_s: float = 60.0
    max_consecutive_errors: int = 3
    max_unproductive_replies: int = 3     # replies in a row that add no candidate (repeats, no code) before stopping
    agent_timeout_s: float = 3600.0
    agent_poll_s: float = 1.0
    attempts_in_prompt: int = 8
    price_in_per_mtok: float | None = None
    price_out_per_mtok: float | None = None
    cache: bool = True
    share_cache: bool = False             # serve any run's cached replies, not only this run's (resumes)

    @classmethod
    def from_args(cls, args: Mapping[str, Any], environ: Mapping[str, str]) -> Settings:
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(args) - set(known))
        if unknown:
            raise ConfigError(f"unknown proposer setting(s) {', '.join(unknown)}; known: {', '.join(known)}")
        values: dict[str, Any] = {}
        for name, f in known.items():
            env = environ.get("RSI_LLM_" + name.upper(), "")
            if args.get(name) is not None:
                value = args[name]
                # a run's stored settings write a lifted limit as "none" (None would read as "not given")
                values[name] = _coerce(value, str(f.type), name) if isinstance(value, str) and f.type != "str" \
                    else value
            elif env.strip():
                values[name] = _coerce(env.strip(), str(f.type), "RSI_LLM_" + name.upper())
        return cls(**values)

    def limits(self) -> Limits:
        return Limits(self.max_calls, self.max_tokens, self.max_cost_usd,
                      None if self.max_llm_minutes is None else self.max_llm_minutes * 60.0)


def _coerce(text: str, type_name: str, var: str) -> Any:
    if text.lower() in ("none", "off") and "None" in type_name:
        return None
    try:
        if type_name.startswith("bool"):
            return text.lower() in ("1", "true", "yes", "on")
        if type_name.startswith("int"):
            return int(text)
        if type_name.startswith("float"):
            return float(text)
    except ValueError:
        raise ConfigError(f"{var}={text!r} is not a valid {type_name}") from None
    return text


# ------------------------------------------------------------------------------------------------------ resume
# what a resumed run may change: spending limits, where the server is, how long to wait and how often to retry.
# Everything else (model, sampling, prompt size, tuning, cache, transcript, inbox) is the run's own: a change
# would make the cached replies and the transcript another run's.
RESUMABLE = ("max_calls", "max_tokens", "max_cost_usd", "max_llm_minutes", "base_url", "request_timeout_s", "retries",
             "backoff_s", "max_backoff_s", "max_consecutive_errors", "max_unproductive_replies", "agent_timeout_s",
             "agent_poll_s")


def stored_settings(settings: Settings, model: str) -> dict[str, Any]:
    """The settings a run used, as its stored ``proposer_args`` (a lifted limit as "none"; the model as served)."""
    return {k: "none" if v is None else v for k, v in {**dataclasses.asdict(settings), "model": model}.items()}


def resume_settings(saved: Mapping[str, Any], given: Mapping[str, Any], environ: Mapping[str, str]
                    ) -> tuple[dict[str, Any], list[str], list[str]]:
    """(the resumed run's proposer_args, what was overridden, what was ignored): a setting in RESUMABLE is taken
    from ``given`` (flags) or else an ``RSI_LLM_*`` variable where that differs from the run's; any other setting
    given is ignored (reported)."""
    merged, overridden, ignored = dict(saved), [], []
    for f in fields(Settings):
        name, var = f.name, "RSI_LLM_" + f.name.upper()
        if given.get(name) is not None:
            value, source = given[name], "given"
        elif name in RESUMABLE and environ.get(var, "").strip():
            value, source = _coerce(environ[var].strip(), str(f.type), var), var
        else:
            continue
        old = saved.get(name)
        old = _coerce(old, str(f.type), name) if isinstance(old, str) and f.type != "str" else old
        if value == old:
            continue
        if name in RESUMABLE:
            merged[name] = "none" if value is None else value
            overridden.append(f"{name} {old} -> {value}" + (f" ({source})" if source != "given" else ""))
        else:
            ignored.append(f"{name}={value}")
    return merged, overridden, ignored


# ----------------------------------------------------------------------------------------------------- factory
def make(opts: SearchOptions, store: Store, run_id: str, space: Space) -> LLMProposer | ReplayProposer:
    """The proposer named by ``opts.proposer``; a configuration error releases the run and says what to do."""
    from rsi.search.loop import SearchError

    try:
        settings = Settings.from_args(opts.proposer_args or {}, os.environ)
        if opts.proposer == "replay":
            return ReplayProposer.create(opts, store, run_id, settings.transcript)
        if opts.proposer in LLM_PROVIDERS:
            return LLMProposer.create(opts, store, run_id, space, settings)
        raise ConfigError(f"unknown proposer {opts.proposer!r}; known: offline, {', '.join(LLM_PROVIDERS)}, replay")
    except ConfigError as e:
        started = bool(store.evaluations(run_id)) or lookup(store.conn, run_id) is not None
        store.finish_run(run_id, "interrupted" if started else "failed", {"error": str(e)})
        raise SearchError(str(e)) from None


def _client(provider: str, opts: SearchOptions, settings: Settings, run_id: str, say):
    policy = RetryPolicy(settings.retries, settings.backoff_s, settings.max_backoff_s, settings.request_timeout_s)
    if provider == "agent":
        if not settings.inbox:
            raise ConfigError("--proposer agent needs --inbox DIR: the folder where prompts are written and replies "
                              "are read (see docs/proposers.md)")
        inbox = AgentInbox(Path(settings.inbox), run_id, opts.op, settings.agent_timeout_s, settings.agent_poll_s,
                           say)
        inbox.claim()
        return inbox, Price(0.0, 0.0, "agent (free)"), ()
    key = api_key(provider, os.environ)
    base_url = settings.base_url
    if provider == "openai-compatible" and not (base_url or os.environ.get("OPENAI_BASE_URL")):
        raise ConfigError("--proposer openai-compatible needs --base-url, the server's OpenAI-style endpoint (e.g. "
                          "http://127.0.0.1:8000/v1 for a local vLLM or SGLang server), or use --proposer offline")
    if provider != "openai-compatible" and not settings.model:
        raise ConfigError(f"--proposer {provider} needs --model; models with a price in rsi/llm/prices.toml: "
                          f"{', '.join(load_prices())}")
    if provider == "anthropic":
        client = AnthropicMessages(settings.model, key, base_url, policy, settings.max_output_tokens,
                                   settings.temperature, say)
    else:
        try:
            client = OpenAIChat(provider, settings.model, key, base_url or os.environ.get("OPENAI_BASE_URL"), policy,
                                settings.max_output_tokens, settings.temperature, say)
        except LLMCallError as e:
            raise ConfigError(f"could not ask {base_url} which model it serves ({e}); pass --model") from None
    price = price_for(client.model, provider, None, settings.price_in_per_mtok, settings.price_out_per_mtok)
    if price is None and settings.max_cost_usd is not None:
        raise ConfigError(f"no price for model {client.model!r} in rsi/llm/prices.toml, so the cost budget cannot be "
                          f"enforced: add the model there, set RSI_LLM_PRICE_IN_PER_MTOK and "
                          f"RSI_LLM_PRICE_OUT_PER_MTOK (US$ per million tokens), or lift the cost limit with "
                          f"RSI_LLM_MAX_COST_USD=none")
    return client, price, (key,)


# ------------------------------------------------------------------------------------------------ LLM proposer
class LLMProposer:
    def __init__(self, *, name: str, client: Client, price: Price | None, opts: SearchOptions, store: Store,
                 run_id: str, space: Space, settings: Settings, transcript: TranscriptWriter, records: list[dict],
                 say: Callable[[str], None]):
        self.name, self.client, self.opts, self.store, self.run_id = name, client, opts, store, run_id
        self.settings, self.transcript, self.say = settings, transcript, say
        self.op = get_op_group(opts.op)
        self.reference_source = inspect.getsource(importlib.import_module(OP_MODULES[opts.op]))
        self.template = template_source(space.template) if space.template else ""
        run = store.get_run(run_id)
        self.run_env = run.env if run else {}
        # replies are redacted as they arrive, before the cache, the transcript or a candidate sees them: the
        # candidate is the redacted source, so a resume or a replay rebuilds its hash from the transcript
        self.secrets = known_secrets(os.environ, tuple(transcript.secrets))
        self.cache = ResponseCache(store.conn, settings.cache)
        self.budget = Budget(settings.limits(), price, settings.max_output_tokens, Spent.from_records(records))
        self.attempts: list[dict] = []          # judged candidates and rejected replies, in order
        self.tuner: StructureTuner | None = None
        self.next_seq = 1
        self.errors_in_row = 0
        self._warned_usage = False
        self.stop_reason = ""
        self._prompts_seen: set[str] = set()
        self._restore(records)

    @classmethod
    def create(cls, opts: SearchOptions, store: Store, run_id: str, space: Space,
               settings: Settings) -> LLMProposer:
        say = stderr_say(opts.quiet)
        client, price, secrets = _client(opts.proposer, opts, settings, run_id, say)
        path, resumed = transcript_path(store.conn, opts.root, run_id, opts.op, settings.transcript)
        records = read_transcript(path) if resumed and path.exists() else []
        writer = TranscriptWriter(path, secrets)
        register(store.conn, run_id, path, opts.proposer)
        run = store.get_run(run_id)
        if run is not None and not resumed:  # what this run uses, env included: a resume keeps it (or overrides)
            store.update_run_args(run_id, {**run.args, "proposer_args": stored_settings(settings, client.model)})
        writer.write({"type": "resume" if resumed else "header", "run_id": run_id, "op": opts.op,
                      "proposer": opts.proposer, "provider": client.provider, "model": client.model,
                      "backend": opts.backend, "target": opts.target, "hybrid_tune": settings.hybrid_tune,
                      "limits": settings.limits().__dict__, "price": price.__dict__ if price else None,
                      "base_url": settings.base_url, "request_timeout_s": settings.request_timeout_s,
                      "at": time.time()})
        return cls(name=opts.proposer, client=client, price=price, opts=opts, store=store, run_id=run_id,
                   space=space, settings=settings, transcript=writer, records=records, say=say)

    # ---------------------------------------------------------------------------------------------- restore
    def _restore(self, records: list[dict]) -> None:
        """Rebuild attempts from the transcript and the store's verdicts; unjudged proposals are dropped (they are
        asked again, and the response cache answers)."""
        if not records:
            return
        evals = {e["candidate"]: e for e in self.store.evaluations(self.run_id)}
        calls = calls_by_seq(records)
        written = {r["candidate"] for r in records if r.get("type") == "verdict"}
        complete_seq = 0
        for r in records:
            if r.get("type") == "call" and not r["parse"]["ok"] and calls.get(r["seq"]) is r:
                self.attempts.append(self._reply_attempt(r["seq"], r["parse"]["reason"], r.get("reply", "")))
                complete_seq = max(complete_seq, r["seq"])
            elif r.get("type") == "proposal" and r["candidate"] in evals:
                if any(a.get("candidate") == r["candidate"] for a in self.attempts):
                    continue
                e = evals[r["candidate"]]
                cand = self._candidate_of(r, calls)
                self.attempts.append(self._attempt(cand, r, e["verdict"], e["objective"]))
                complete_seq = max(complete_seq, r["call"])
                if r["candidate"] not in written:  # killed between the store's commit and our verdict line
                    self.transcript.write(self._verdict_record(self.attempts[-1]))
        self.next_seq = complete_seq + 1
        llm = [a for a in self.attempts if a["kind"] in ("llm", "reply")]
        last = llm[-1] if llm else None
        if last and last["kind"] == "llm" and last["call"] == max(calls, default=0):
            self._maybe_tune(last)

    def _candidate_of(self, rec: dict, calls: dict[int, dict]) -> Candidate:
        parsed = parse_reply(calls[rec["call"]]["reply"], self.op.input_names)
        config = parsed.config if rec["kind"] == "llm" else rec["config"]
        cand = Candidate(op=self.op.name, source=parsed.source, config=config, parent=rec["parent"],
                         origin=rec["origin"])
        if cand.hash != rec["candidate"]:
            raise ConfigError(f"the transcript's reply {rec['call']} does not reproduce candidate "
                              f"{rec['candidate'][:12]}: the transcript was edited or rsi changed how replies parse")
        return cand

    # ---------------------------------------------------------------------------------------------- propose
    def propose(self) -> Proposal | None:
        if self.stop_reason:
            return None
        if self.tuner is not None:
            p = self.tuner.propose()
            if p is not None:
                self._write_proposal(p)
                return p
            self.tuner = None
        while True:
            why = self._unproductive()  # checked before each call: a resumed run counts the replies it restored
            if why:
                return self._stop(why)
            prompt = self.build_prompt()
            if prompt.sha256 in self._prompts_seen:  # same evidence, same (cached) reply: a loop, not a search
                return self._stop("the prompt repeated itself: nothing new to tell the model")
            seq = self.next_seq
            comp, cached, key = self._ask(prompt, seq)
            if comp is None:
                if self.stop_reason:
                    return None
                continue  # a failed call: ask again (errors in a row are bounded in _ask)
            self._prompts_seen.add(prompt.sha256)
            parsed = parse_reply(comp.text, self.op.input_names)
            cand = None
            if parsed.ok:
                cand = Candidate(op=self.op.name, source=parsed.source, config=parsed.config,
                                 parent=self._best()[1], origin=self.name)
                # same code and config as an earlier one (its hash may differ only by parent): nothing to learn
                dup = next((a for a in self.attempts if a["candidate"] and a["source"] == cand.source
                            and a["config"] == dict(cand.config)), None)
                if dup is not None:
                    parsed = ParsedReply(False, f"{DUPLICATE} {dup['label']} ({dup['status']}); propose "
                                                f"something different")
            self._write_call(seq, prompt, key, comp, cached, parsed, cand)
            self.next_seq = seq + 1
            if not parsed.ok:
                self.say(f"reply {seq} rejected: {parsed.reason}")
                self.attempts.append(self._reply_attempt(seq, parsed.reason, comp.text))
                self.store.remember(self.op.name, "failure", "reply", {"reason": parsed.reason[:300], "config": {},
                                                                       "candidate": None}, self.run_id)
                self.transcript.write({"type": "stats", **self.stats()})
                continue
            p = Proposal(cand, meta={"kind": "llm", "call": seq, "tunable": parsed.tunable})
            self._write_proposal(p)
            return p

    def _ask(self, prompt: P.Prompt, seq: int) -> tuple[Completion | None, bool, str]:
        params = {"max_output_tokens": self.settings.max_output_tokens, "temperature": self.settings.temperature}
        key = cache_key(self.client.provider, self.client.model, prompt.system, prompt.user, params,
                        SHARED if self.settings.share_cache else run_scope(self.run_id))
        hit = self.cache.get(key)
        if hit is not None:
            self.say(f"call {seq}: reply served from the response cache")
            self.budget.spent.add({}, 0.0, 0.0, cached=True)
            u = hit["usage"]
            return Completion(redact_secrets(hit["reply"], self.secrets), u.get("input_tokens", 0),
                              u.get("output_tokens", 0), hit["finish_reason"], attempts=0), True, key
        why = self.budget.refuse(prompt.chars)
        if why:
            self._stop(why)
            return None, False, key
        self.say(f"call {seq}: asking {self.client.provider} {self.client.model} ({prompt.chars:,} chars)")
        try:
            comp = self.client.complete(prompt, seq)
        except Exception as exc:  # noqa: BLE001 - whatever a client trips over is a failed call, not a crash
            e = exc if isinstance(exc, LLMCallError) else LLMCallError(
                f"unexpected error in the {self.client.provider} client: {type(exc).__name__}: {exc}")
            self.budget.spent.add({}, 0.0, e.wall_s, cached=False, failed=True)
            self.errors_in_row += 1
            msg = redact_secrets(self.client.redact(str(e)), self.secrets)
            self.transcript.write({"type": "call_error", "seq": seq, "error": msg, "fatal": e.fatal,
                                   "attempts": e.attempts, "wall_s": e.wall_s,
                                   "spent": self.budget.spent.to_json()})
            self.say(f"call {seq} failed: {msg}")
            if e.fatal or self.errors_in_row >= self.settings.max_consecutive_errors:
                self._stop(f"model call failed ({msg})" + ("" if e.fatal else f", {self.errors_in_row} in a row"))
            return None, False, key
        self.errors_in_row = 0
        comp = dataclasses.replace(comp, text=redact_secrets(comp.text, self.secrets))
        if not comp.usage_reported:
            comp = self._upper_bound(prompt, comp)
        cost = self.budget.cost(comp.input_tokens, comp.output_tokens)
        self.budget.spent.add(comp.usage, cost or 0.0, comp.wall_s, cached=False)
        self.cache.put(key, self.client.provider, self.client.model, prompt.sha256, comp.text, comp.usage,
                       comp.finish_reason)
        return comp, False, key

    def _upper_bound(self, prompt: P.Prompt, comp: Completion) -> Completion:
        """A reply without token counts is counted at the most the request could have used (the prompt's estimate,
        the whole reply allowance), so that token and cost limits still bind."""
        est_in = math.ceil(prompt.chars / CHARS_PER_TOKEN)
        if not self._warned_usage:
            self._warned_usage = True
            self.say(f"{self.client.provider} {self.client.model} replies carry no token usage: each reply is counted "
                     f"at its upper bound ({est_in:,} prompt tokens estimated at {CHARS_PER_TOKEN:g} characters a "
                     f"token, plus the whole max_output_tokens={self.settings.max_output_tokens}) against the token "
                     f"and cost limits")
        return dataclasses.replace(comp, input_tokens=comp.input_tokens or est_in,
                                   output_tokens=comp.output_tokens or self.settings.max_output_tokens)

    def _unproductive(self) -> str:
        """Why to stop when the last replies in a row added no candidate ('' while fewer than the limit)."""
        tail = []
        for a in reversed(self.attempts):
            if a["kind"] != "reply":
                break
            tail.append(a)
        limit = self.settings.max_unproductive_replies
        if limit <= 0 or len(tail) < limit:
            return ""
        repeats = sum(a["reason"].startswith(DUPLICATE) for a in tail)
        kinds = [f"{repeats} repeated an already-judged candidate"] if repeats else []
        kinds += [f"{len(tail) - repeats} had no usable code block"] if len(tail) > repeats else []
        return (f"{len(tail)} replies in a row added no new candidate ({', '.join(kinds)}; last: "
                f"{tail[0]['reason'][:160]}); stopped so as not to spend the rest of the call budget "
                f"(max_unproductive_replies={limit})")

    def _stop(self, reason: str) -> None:
        self.stop_reason = reason
        self.say(f"proposer stops: {reason}")
        self.transcript.write({"type": "stop", "reason": reason, "spent": self.budget.spent.to_json()})

    # --------------------------------------------------------------------------------------------- feedback
    def feedback(self, proposal: Proposal, verdict: dict, objective: float | None) -> None:
        meta = proposal.meta
        rec = {"kind": meta["kind"], "call": meta["call"], "config": dict(proposal.candidate.config),
               "parent": proposal.candidate.parent, "origin": proposal.candidate.origin,
               "structure": meta.get("structure")}
        attempt = self._attempt(proposal.candidate, rec, verdict, objective)
        self.attempts.append(attempt)
        self.transcript.write(self._verdict_record(attempt))
        self.say(f"{attempt['label']}: {verdict['status']} [{verdict['stage']}] {verdict['reason'][:120]}")
        if meta["kind"] == "tune" and self.tuner is not None:
            self.tuner.feedback(proposal, objective)
        elif meta["kind"] == "llm":
            self._maybe_tune(attempt, meta.get("tunable"))
        self.transcript.write({"type": "stats", **self.stats()})

    def _maybe_tune(self, attempt: dict, tunable=None) -> None:
        if attempt["status"] != "accepted" or self.settings.hybrid_tune <= 0:
            return
        if tunable is None:
            tunable = parse_reply(f"```python\n{attempt['source']}```", self.op.input_names).tunable
        if not tunable or math.prod(len(v) for _, v in tunable) <= 1:
            return
        structure = Candidate(op=self.op.name, source=attempt["source"], config=attempt["config"],
                              parent=attempt["parent"], origin=self.name)
        done = sum(1 for a in self.attempts if a["kind"] == "tune" and a["structure"] == structure.hash)
        objective = attempt["objective"] if attempt["objective"] is not None else 1.0
        self.tuner = StructureTuner(structure, tunable, objective, self.settings.hybrid_tune, done, self.store.url,
                                    f"{self.op.name}:{self.run_id}:llm-tune:{structure.hash[:16]}",
                                    self.opts.seed + attempt["call"], f"{self.name}+tpe",
                                    {"call": attempt["call"], "structure": structure.hash})

    # --------------------------------------------------------------------------------------------- evidence
    def _attempt(self, cand: Candidate, rec: dict, verdict: dict, objective: float | None) -> dict:
        details = verdict.get("details", {})
        kind = rec["kind"]
        label = f"reply {rec['call']}" if kind == "llm" else f"tuning of reply {rec['call']}"
        return {"kind": kind, "call": rec["call"], "label": label, "candidate": cand.hash, "source": cand.source,
                "config": dict(cand.config), "parent": cand.parent, "origin": cand.origin,
                "structure": rec.get("structure"), "status": verdict["status"], "stage": verdict["stage"],
                "reason": verdict["reason"], "error": P.trim_error(details), "stats": dict(details.get("error", {})),
                "timings": verdict.get("timings", []), "objective": objective,
                "copy_gbps": (details.get("copy_bw") or {}).get("gbps")}

    def _reply_attempt(self, seq: int, reason: str, reply: str) -> dict:
        blocks = code_blocks(reply)
        return {"kind": "reply", "call": seq, "label": f"reply {seq}", "candidate": None,
                "source": blocks[0][1] if len(blocks) == 1 else "", "config": {}, "parent": None,
                "origin": self.name, "structure": None, "status": "rejected", "stage": "reply", "reason": reason,
                "error": "", "stats": {}, "timings": [], "objective": None, "copy_gbps": None}

    def _best(self) -> tuple[P.Best | None, str | None]:
        """(what the prompt shows as the current best, its candidate hash for ``parent``)."""
        if self.opts.backend == "cuda" and self.opts.target:
            try:
                vk = locked_kernel(self.opts.root, self.opts.target, self.op.name)
            except (FileNotFoundError, ValueError):
                vk = None
            if vk is not None:
                h = vk.record["candidate_hash"]
                return P.Best(f"verified kernel {h[:12]} (locked for {self.opts.target})", vk.source,
                              vk.record["config"], P.times_from_record(vk.record)), h
        accepted = [a for a in self.attempts if a["status"] == "accepted"]
        if not accepted:
            return None, None
        a = min(accepted, key=lambda a: a["objective"] if a["objective"] is not None else float("inf"))
        note = "" if a["timings"] else "Judged by the interpreter: correct, timing not measured."
        return P.Best(a["label"], a["source"], a["config"], P.times_from_verdict(a["timings"]), note), a["candidate"]

    def _memory(self) -> P.Memory:
        def rows(kind: str, limit: int) -> list[dict]:
            q = ("SELECT op, key, value_json FROM rsi_memory WHERE kind=? AND (run_id IS NULL OR run_id != ?) "
                 "ORDER BY id DESC LIMIT ?")
            return [{"op": r[0], "key": r[1], **json.loads(r[2])}
                    for r in self.store.conn.execute(q, (kind, self.run_id, limit))]

        pairs = sorted(rows("slow_fast", 50), key=lambda p: -(p.get("slow_us", 0) / max(p.get("fast_us", 1), 1e-9)))
        counts: dict[str, int] = {}
        for f in rows("failure", 200):
            sig = f"{f['op']} " + P.failure_signature(f["key"], f.get("reason", ""))
            counts[sig] = counts.get(sig, 0) + 1
        top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:8]
        return P.Memory(tuple(pairs[:6]), tuple(top))

    def build_prompt(self) -> P.Prompt:
        recent = self.attempts[-self.settings.attempts_in_prompt:]
        attempts = tuple(P.Attempt(a["label"], a["config"], a["status"], a["stage"], a["reason"], a["error"],
                                   a["stats"], P.times_from_verdict(a["timings"]), a["objective"]) for a in recent)
        stages: dict[str, int] = {}
        for a in self.attempts:
            if a["status"] != "accepted":
                stages[a["stage"]] = stages.get(a["stage"], 0) + 1
        copy = next((a["copy_gbps"] for a in reversed(self.attempts) if a["copy_gbps"]), None)
        mine = [a for a in self.attempts if a["kind"] in ("llm", "reply")]
        last_code = (mine[-1]["label"], mine[-1]["source"]) if mine and mine[-1]["status"] != "accepted" \
            and mine[-1]["source"] else None
        ctx = P.PromptContext(
            op=self.op, reference_source=self.reference_source,
            gpu=P.gpu_facts(self.opts.target, self.opts.backend, self.run_env, {"gbps": copy} if copy else None),
            best=self._best()[0], starting_point=self.template, attempts=attempts, stage_counts=stages,
            memory=self._memory(), last_code=last_code)
        return P.build_prompt(ctx)

    # -------------------------------------------------------------------------------------------- transcript
    def _write_call(self, seq: int, prompt: P.Prompt, key: str, comp: Completion, cached: bool, parsed: ParsedReply,
                    cand: Candidate | None) -> None:
        cost = 0.0 if cached else (self.budget.cost(comp.input_tokens, comp.output_tokens) or 0.0)
        self.transcript.write({
            "type": "call", "seq": seq, "prompt_sha256": prompt.sha256, "cache_key": key,
            "prompt_chars": prompt.chars, "system": prompt.system, "prompt": prompt.user, "reply": comp.text,
            "usage": comp.usage, "usage_estimated": not comp.usage_reported, "cost_usd": cost, "cached": cached, "attempts": comp.attempts, "wall_s": comp.wall_s,
            "finish_reason": comp.finish_reason, "model": self.client.model, "provider": self.client.provider,
            "parse": {"ok": parsed.ok, "reason": parsed.reason, "candidate": cand.hash if cand and parsed.ok else None,
                      "config": parsed.config, "tunable": [[n, list(v)] for n, v in parsed.tunable]},
            "spent": self.budget.spent.to_json()})

    def _write_proposal(self, p: Proposal) -> None:
        c = p.candidate
        self.transcript.write({"type": "proposal", "kind": p.meta["kind"], "call": p.meta["call"],
                               "candidate": c.hash, "config": dict(c.config), "parent": c.parent, "origin": c.origin,
                               "structure": p.meta.get("structure")})

    @staticmethod
    def _verdict_record(a: dict) -> dict:
        return {"type": "verdict", "kind": a["kind"], "call": a["call"], "candidate": a["candidate"],
                "config": a["config"], "parent": a["parent"], "origin": a["origin"], "structure": a["structure"],
                "status": a["status"], "stage": a["stage"], "reason": a["reason"][:500], "objective": a["objective"],
                "times": [{"bucket": r["bucket"], "p50_us": r["p50_us"], "pct_copy": r.get("pct_copy")}
                          for r in a["timings"]]}

    def stats(self) -> dict[str, Any]:
        """Which mix wins: per origin (model structures vs optimizer-tuned configs), and the best's origin."""
        by: dict[str, dict[str, Any]] = {}
        for a in self.attempts:
            o = by.setdefault("llm" if a["kind"] in ("llm", "reply") else "tuned",
                              {"proposed": 0, "accepted": 0, "reply_rejected": 0, "best_objective": None})
            o["proposed"] += 1
            o["reply_rejected"] += a["kind"] == "reply"
            if a["status"] == "accepted":
                o["accepted"] += 1
                if a["objective"] is not None and (o["best_objective"] is None or a["objective"] < o["best_objective"]):
                    o["best_objective"] = a["objective"]
        accepted = [a for a in self.attempts if a["status"] == "accepted"]
        best = min(accepted, key=lambda a: a["objective"] if a["objective"] is not None else float("inf"),
                   default=None)
        structures = []
        for s in (a for a in self.attempts if a["kind"] == "llm"):
            tuned = [a for a in self.attempts if a["kind"] == "tune" and a["structure"] == s["candidate"]]
            objs = [a["objective"] for a in tuned if a["objective"] is not None]
            structures.append({"call": s["call"], "candidate": s["candidate"], "status": s["status"],
                               "objective": s["objective"], "tuned": len(tuned),
                               "best_tuned_objective": min(objs) if objs else None})
        timed = any(a["timings"] for a in accepted)
        return {"by_origin": by, "best_origin": ("llm" if best["kind"] == "llm" else "tuned") if best else None,
                "best_candidate": best["candidate"] if best else None, "structures": structures,
                "timing": "measured" if timed else "not measured (interpreter: every accepted candidate scores 1.0, "
                                                   "ties go to the earliest)"}

    def summary(self) -> dict[str, Any]:
        return {"proposer": self.name, "provider": self.client.provider, "model": self.client.model,
                "transcript": str(self.transcript.path), "spent": self.budget.spent.to_json(),
                "stop_reason": self.stop_reason, **self.stats()}
