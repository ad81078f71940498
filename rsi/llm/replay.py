"""``--proposer replay``: the recorded candidates of a transcript in the recorded order, re-judged, verdicts compared.

Candidates are rebuilt from the recorded replies (and, for tuned ones, the recorded configs) and checked against the
recorded hashes, so an edited transcript or a change in how replies parse is an error, not a silent difference.
Rejected replies are written to the replay's own transcript in their place; they never reach the harness.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rsi.contract import Candidate
from rsi.llm.clients import ConfigError, stderr_say
from rsi.llm.reply import parse_reply
from rsi.llm.transcript import TranscriptWriter, calls_by_seq, read_transcript, register, transcript_path
from rsi.refs import get_op_group
from rsi.search.propose import Proposal

if TYPE_CHECKING:
    from rsi.search.loop import SearchOptions
    from rsi.store import Store


class ReplayProposer:
    """Replays a transcript: the recorded candidates in the recorded order, re-judged; verdicts compared."""

    name = "replay"

    def __init__(self, opts, events: list[tuple[str, dict, Candidate | None]], source: Path,
                 transcript: TranscriptWriter, say):
        self.opts, self.events, self.source, self.transcript, self.say = opts, events, source, transcript, say
        self.matched, self.mismatched, self.stop_reason = 0, [], ""
        self._recorded: dict[str, dict] = {}

    @classmethod
    def create(cls, opts: SearchOptions, store: Store, run_id: str, recorded: str | None) -> ReplayProposer:
        if not recorded:
            raise ConfigError("--proposer replay needs --transcript FILE (a .jsonl transcript that an LLM or agent "
                              "run wrote, by default under .rsi/transcripts/)")
        source = Path(recorded)
        if not source.exists():
            raise ConfigError(f"--transcript {source}: no such file")
        records = read_transcript(source)
        head = next((r for r in records if r.get("type") == "header"), {})
        if head.get("op") not in (None, opts.op):
            raise ConfigError(f"{source} records op group {head.get('op')!r}, not {opts.op!r}")
        events = _replay_events(records, get_op_group(opts.op))
        path, resumed = transcript_path(store.conn, opts.root, run_id, opts.op, None)
        done = {e["candidate"] for e in store.evaluations(run_id)}
        writer = TranscriptWriter(path)  # redacts every configured secret, like any transcript
        register(store.conn, run_id, path, "replay")
        writer.write({"type": "resume" if resumed else "header", "run_id": run_id, "op": opts.op,
                      "proposer": "replay", "model": head.get("model"), "replay_of": str(source.resolve()),
                      "recorded_run": head.get("run_id"), "at": time.time()})
        events = [e for e in events if e[0] != "candidate" or e[2].hash not in done] if done else events
        return cls(opts, events, source, writer, stderr_say(opts.quiet))

    def propose(self) -> Proposal | None:
        while self.events:
            what, rec, cand = self.events.pop(0)
            if what == "call":
                self.transcript.write({**rec, "cached": True, "replayed": True, "cost_usd": 0.0, "spent": {}})
                continue
            self._recorded[cand.hash] = rec
            meta = {"kind": rec["kind"], "call": rec["call"], "structure": rec.get("structure")}
            self.transcript.write({"type": "proposal", "candidate": cand.hash, "config": dict(cand.config),
                                   "parent": cand.parent, "origin": cand.origin, **meta})
            return Proposal(cand, meta=meta)
        self.stop_reason = self.stop_reason or f"replayed every recorded candidate of {self.source}"
        return None

    def feedback(self, proposal: Proposal, verdict: dict, objective: float | None) -> None:
        rec = self._recorded[proposal.candidate.hash]
        match = (verdict["status"], verdict["stage"]) == (rec["status"], rec["stage"])
        if match:
            self.matched += 1
        else:
            self.mismatched.append({"candidate": proposal.candidate.hash, "recorded": [rec["status"], rec["stage"]],
                                    "replayed": [verdict["status"], verdict["stage"]]})
            self.say(f"replay differs for {proposal.candidate.hash[:12]}: recorded {rec['status']} [{rec['stage']}], "
                     f"now {verdict['status']} [{verdict['stage']}]")
        self.transcript.write({**{k: rec[k] for k in ("kind", "call", "config", "parent", "origin", "structure")},
                               "type": "verdict", "candidate": proposal.candidate.hash, "status": verdict["status"],
                               "stage": verdict["stage"], "reason": verdict["reason"][:500], "objective": objective,
                               "recorded": {"status": rec["status"], "stage": rec["stage"]}, "match": match})
        self.transcript.write({"type": "stats", "replay": f"{self.matched} of {self.matched + len(self.mismatched)}"})

    def summary(self) -> dict[str, Any]:
        return {"proposer": "replay", "transcript": str(self.transcript.path), "replay_of": str(self.source),
                "matched": self.matched, "mismatched": self.mismatched, "stop_reason": self.stop_reason}


def _replay_events(records: list[dict], op) -> list[tuple[str, dict, Candidate | None]]:
    """The recorded run in order: rejected replies (shown, not judged) and judged candidates (rebuilt from the
    recorded replies and checked against the recorded hashes)."""
    calls = calls_by_seq(records)
    events: list[tuple[str, dict, Candidate | None]] = []
    seen: set[str] = set()
    for r in records:
        if r.get("type") == "call" and not r["parse"]["ok"] and calls.get(r["seq"]) is r:
            events.append(("call", r, None))
        elif r.get("type") == "verdict" and r["candidate"] not in seen:
            seen.add(r["candidate"])
            call = calls.get(r["call"])
            if call is None:
                raise ConfigError(f"transcript has a verdict for reply {r['call']} but not the reply")
            parsed = parse_reply(call["reply"], op.input_names)
            cand = Candidate(op=op.name, source=parsed.source, config=parsed.config if r["kind"] == "llm"
                             else r["config"], parent=r["parent"], origin=r["origin"])
            if cand.hash != r["candidate"]:
                raise ConfigError(f"reply {r['call']} of the transcript does not reproduce candidate "
                                  f"{r['candidate'][:12]} (edited transcript, or reply parsing changed)")
            if r["kind"] == "llm":
                events.append(("call", {**call, "replay_of_seq": call["seq"]}, None))
            events.append(("candidate", r, cand))
    return events
