"""Typed messages between the judge and a producer process, one JSON object per line.

The judge sends :class:`Request` objects on the producer's stdin; the producer answers each with exactly one
:class:`Reply` on a private duplicate of its stdout. Every reply must carry the job's nonce (random per producer)
and the candidate hash, have exactly the fields of its kind, and arrive once per request: anything else is a
protocol violation, and the judge rejects the candidate. Replies are parsed as JSON only, never unpickled.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

# request kinds (judge -> producer)
LOAD, ARENA, INPUTS, DROP, CALL, TIME, SYNCED, WARM, EXIT = (
    "load", "arena", "inputs", "drop", "call", "time", "synced", "warm", "exit")
REQUESTS = (LOAD, ARENA, INPUTS, DROP, CALL, TIME, SYNCED, WARM, EXIT)
# reply kinds (producer -> judge)
OK, OUTPUTS, TIMED, SYNC, ERROR = "ok", "outputs", "timed", "sync", "error"
DTYPES = ("bfloat16", "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool",
          "float8_e4m3fn", "float8_e5m2")


class ProtocolError(Exception):
    """A reply the judge cannot accept (the candidate is rejected with this message)."""


@dataclass(frozen=True)
class Request:
    kind: str
    args: dict[str, Any] = field(default_factory=dict)

    def encode(self) -> str:
        return json.dumps({"kind": self.kind, "args": self.args}, separators=(",", ":")) + "\n"

    @staticmethod
    def decode(line: str) -> Request:
        d = json.loads(line)
        if set(d) != {"kind", "args"} or d["kind"] not in REQUESTS or not isinstance(d["args"], dict):
            raise ProtocolError(f"bad request {line[:200]!r}")
        return Request(d["kind"], d["args"])


@dataclass(frozen=True)
class OutputDesc:
    """One output the candidate returned: a contiguous-or-strided view inside an arena the judge owns."""

    offset: int      # byte offset in the arena
    dtype: str
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    foreign: str = ""  # non-empty: the output is not in the arena (the producer says what it is)


@dataclass(frozen=True)
class Reply:
    nonce: str
    candidate: str
    kind: str
    outputs: tuple[OutputDesc, ...] = ()
    event_us: float = 0.0
    through_us: float = 0.0
    late: bool = False  # a timed call the GPU caught up on (rsi.harness.timing.timed_call)
    stage: str = ""
    message: str = ""

    def encode(self) -> str:
        d = asdict(self)
        d["outputs"] = [asdict(o) for o in self.outputs]
        return json.dumps(d, separators=(",", ":")) + "\n"


_REPLY_FIELDS = {"nonce", "candidate", "kind", "outputs", "event_us", "through_us", "late", "stage", "message"}
_OUT_FIELDS = {"offset", "dtype", "shape", "stride", "foreign"}


def _int(x: Any, what: str, lo: int = 0, hi: int = 2**62) -> int:
    if type(x) is not int or not lo <= x <= hi:
        raise ProtocolError(f"{what} is not an integer in [{lo}, {hi}]: {x!r}")
    return x


def _num(x: Any, what: str) -> float:
    if type(x) not in (int, float) or not math.isfinite(x) or x < 0:
        raise ProtocolError(f"{what} is not a finite non-negative number: {x!r}")
    return float(x)


def parse_reply(line: str, nonce: str, candidate: str, expect: str) -> Reply:
    """Strictly parse one reply line; raise :class:`ProtocolError` on anything unexpected."""
    try:
        d = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ProtocolError(f"reply is not JSON ({e.msg})") from None
    if not isinstance(d, dict) or set(d) != _REPLY_FIELDS:
        raise ProtocolError("reply does not have exactly the reply fields")
    if d["nonce"] != nonce:
        raise ProtocolError("reply carries the wrong nonce (not this job's producer)")
    if d["candidate"] != candidate:
        raise ProtocolError("reply names another candidate")
    if d["kind"] not in (expect, ERROR):
        raise ProtocolError(f"expected a {expect!r} reply, got {d['kind']!r}")
    if not isinstance(d["outputs"], list) or len(d["outputs"]) > 16:
        raise ProtocolError("outputs is not a list of at most 16 entries")
    outs = []
    for i, o in enumerate(d["outputs"]):
        if not isinstance(o, dict) or set(o) != _OUT_FIELDS:
            raise ProtocolError(f"output {i} descriptor has the wrong fields")
        if o["dtype"] not in DTYPES or not isinstance(o["shape"], list) or not isinstance(o["stride"], list) \
                or len(o["shape"]) != len(o["stride"]) or len(o["shape"]) > 8 or not isinstance(o["foreign"], str):
            raise ProtocolError(f"output {i} descriptor is malformed")
        outs.append(OutputDesc(_int(o["offset"], "offset"), o["dtype"],
                               tuple(_int(s, "size") for s in o["shape"]),
                               tuple(_int(s, "stride", -(2**40), 2**40) for s in o["stride"]), o["foreign"][:300]))
    for k in ("stage", "message"):
        if not isinstance(d[k], str):
            raise ProtocolError(f"{k} is not a string")
    if type(d["late"]) is not bool:
        raise ProtocolError(f"late is not a boolean: {d['late']!r}")
    return Reply(d["nonce"], d["candidate"], d["kind"], tuple(outs), _num(d["event_us"], "event_us"),
                 _num(d["through_us"], "through_us"), d["late"], d["stage"][:40], d["message"][:4000])
