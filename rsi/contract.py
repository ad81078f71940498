"""The fail-closed contract: op groups, candidates and tolerance classes.

A search may change *how* an op is computed, never *what* is computed. An :class:`OpGroup` fixes the reference,
the input factory, the shape set and the tolerance class; a :class:`Candidate` is a realization (module source with
an entry point ``launch`` plus a config) that the harness judges against it. This module imports without a GPU.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

ENTRY_POINT = "launch"


# ----------------------------------------------------------------------------------------------- tolerance classes
@dataclass(frozen=True)
class Bitwise:
    """Output must equal the reference byte for byte (NaN payloads included)."""

    name: str = "bitwise"

    def describe(self) -> dict[str, Any]:
        return {"class": self.name}


@dataclass(frozen=True)
class Tolerance:
    """Arithmetic fusion that may change intermediate rounding.

    Errors are measured against an fp64 evaluation of the same formula (the "oracle"). A candidate passes when,
    on the finite entries, ``max_abs <= max(atol, factor * ref_max_abs)``, ``rel_l2 <= max(rtol, factor *
    ref_rel_l2)`` and ``1 - cosine <= max(1 - cosine_floor, factor * (1 - ref_cosine))``, where ``ref_*`` are the bf16 reference's own errors against the
    same oracle. Non-finite entries must match the reference exactly (position, sign, NaN-ness).
    """

    atol: float
    rtol: float
    factor: float = 2.0
    cosine_floor: float = 0.9999
    name: str = "tolerance"

    def describe(self) -> dict[str, Any]:
        return {"class": self.name, "atol": self.atol, "rtol": self.rtol, "factor": self.factor,
                "cosine_floor": self.cosine_floor, "metric": "max_abs+rel_l2+cosine vs fp64 oracle"}


@dataclass(frozen=True)
class Approximate:
    """Lossy by design (FP8/INT8 wire formats, sparse attention): explicit error metrics, reported separately."""

    max_rel_rmse: float
    min_snr_db: float
    name: str = "approximate"

    def describe(self) -> dict[str, Any]:
        return {"class": self.name, "max_rel_rmse": self.max_rel_rmse, "min_snr_db": self.min_snr_db}


ToleranceClass = Bitwise | Tolerance | Approximate


# ------------------------------------------------------------------------------------------------------ shapes
@dataclass(frozen=True)
class Shape:
    """One problem size. ``dims`` are op-specific named sizes, e.g. {"rows": 9562, "ffn": 14336}."""

    name: str
    dims: Mapping[str, int]

    def key(self) -> str:
        return self.name + "[" + ",".join(f"{k}={v}" for k, v in sorted(self.dims.items())) + "]"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "dims": dict(self.dims)}


@dataclass(frozen=True)
class SpecialCase:
    """A named input pattern for correctness trials (zeros, huge magnitudes, subnormals, NaN/Inf, ...)."""

    name: str
    # fn(inputs, which) -> inputs: returns new tensors for the float inputs at positions ``which`` (all if empty)
    apply: Callable[..., tuple]
    # whether the reference propagates non-finite values for this case (NaN/Inf comparisons are then exact)
    nonfinite: bool = False


# ------------------------------------------------------------------------------------------------------ op group
@dataclass(frozen=True)
class OpGroup:
    """Everything the contract fixes for one op group."""

    name: str
    reference: Callable[..., Any]           # bf16 reference, the model's exact semantics
    oracle: Callable[..., Any]              # same formula in fp64 (used by the Tolerance class)
    make_inputs: Callable[..., tuple]       # (shape, seed, device) -> inputs
    tolerance: ToleranceClass
    shapes: Sequence[Shape]                 # shapes the kernel serves on the GPU (timed, promoted per bucket)
    odd_shapes: Sequence[Shape]             # awkward sizes the op admits (correctness only)
    interp_shapes: Sequence[Shape]          # small shapes for the Triton interpreter
    special_cases: Sequence[SpecialCase]
    bytes_moved: Callable[[Shape], int]     # compulsory bytes read + written (physics gate, %-of-copy)
    flops: Callable[[Shape], int] = lambda s: 0
    noncontiguous_inputs: Sequence[str] = ()
    special_inputs: Sequence[int] = ()      # positions special values are applied to (empty: every float input)
    input_names: Sequence[str] = ()
    template: str = ""                      # module name under rsi.templates for the offline proposer
    liger: Callable[..., Any] | None = None  # Liger's implementation of this op, when Liger has one
    liger_prepare: Callable[[tuple], tuple] | None = None  # op inputs -> Liger's inputs (outside timed region)
    notes: str = ""

    def describe(self) -> dict[str, Any]:
        return {"op": self.name, "tolerance": self.tolerance.describe(),
                "shapes": [s.to_json() for s in self.shapes], "noncontiguous_inputs": list(self.noncontiguous_inputs)}


# ----------------------------------------------------------------------------------------------- candidates
def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Candidate:
    """A realization of an op group: full module source whose entry point is ``launch`` plus its config."""

    op: str
    source: str
    config: Mapping[str, int | float | bool | str] = field(default_factory=dict)
    parent: str | None = None  # hash of the candidate it mutated
    origin: str = "offline"    # which proposer made it (not part of the hash)

    @cached_property
    def hash(self) -> str:
        body = {"op": self.op, "source": self.source, "config": dict(self.config), "parent": self.parent}
        return sha256_text(canonical_json(body))

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "hash": self.hash, "config": dict(self.config), "parent": self.parent,
                "origin": self.origin, "source_sha256": sha256_text(self.source)}


# ------------------------------------------------------------------------------------------------------ verdicts
ACCEPT = "accepted"
REJECT = "rejected"


@dataclass
class Verdict:
    """The harness's judgement on one candidate. Fail closed: ``status`` starts rejected until proven."""

    candidate: str
    status: str = REJECT
    stage: str = "none"          # static | compile | correctness | timing | physics | promote
    reason: str = "no evidence"
    tolerance: dict[str, Any] = field(default_factory=dict)   # class + bounds + observed errors
    timings: list[dict[str, Any]] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def accepted(self) -> bool:
        return self.status == ACCEPT

    def to_json(self) -> dict[str, Any]:
        return {"candidate": self.candidate, "status": self.status, "stage": self.stage, "reason": self.reason,
                "tolerance": self.tolerance, "timings": self.timings, "details": self.details}
