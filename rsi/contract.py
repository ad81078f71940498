"""The fail-closed contract: op groups, candidates and tolerance classes.

A search may change *how* an op is computed, never *what* is computed. An :class:`OpGroup` fixes the reference,
the input factory, the shape set and the tolerance class; a :class:`Candidate` is a realization (module source with
an entry point ``launch`` plus a config) that the harness judges against it. This module imports without a GPU.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

ENTRY_POINT = "launch"


# ----------------------------------------------------------------------------------------------- tolerance classes
ELEM_ULPS = 4.0  # default per-element allowance in bf16 ulps of the term scale (Tolerance docstring)


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

    On top of these aggregates every finite entry must satisfy the per-element bound
    ``|out - oracle| <= elem_factor * |ref - oracle| + elem_ulps * ulp_bf16(term)``, where ``ulp_bf16(m)`` is the
    bf16 spacing at magnitude m (``2**(floor(log2 m) - 7)``, floored at the subnormal spacing ``2**-133``) and
    ``term`` is the op group's :attr:`OpGroup.term_scale` (the largest magnitude among the terms of the last
    operation producing the output; ``|oracle|`` when the op group declares none). Aggregates alone let a kernel
    flush small outputs to zero or compute a fraction of the entries at fp8 precision; the per-element bound does
    not. Why 4 ulps (``ELEM_ULPS``): an honest fused kernel keeps the model's own bf16 roundings (e.g. RMSNorm's
    bf16 output) or skips them and rounds the result once; each rounding of an input of the last operation costs
    less than 1 ulp of the term scale (0.5 ulp of the rounded value times the other factor) and the final rounding
    at most 1 (the result is at most twice the term scale), so modulate-like chains stay under 2 ulps, rope under
    3, and the longest one analysed (gate_residual_modulate's h from a once-rounded r, n rounded, result rounded)
    under 4. Measured: 2.0 ulps beyond 2x the reference's error at most, over 1.8e9 elements of the locked H200
    kernels at the full shapes, and a worst ratio (error / bound) of 0.63 over every layout, special case and drawn
    shape on the H200 (0.5 for honest fp32 emulations on the CPU); a 3-bit mantissa costs up to 8 ulps and a
    flushed output its whole magnitude.

    Last, a rounding-bias test: the mean of ``sign(oracle) (out - oracle) / ulp_bf16(oracle)`` over the finite
    entries with a non-zero oracle (each clipped to +-2) must stay within ``max(0.25, 2 x the reference's own)``
    unless it lies under 6 standard errors from 0 (``rsi.harness.check.BIAS_*``). A kernel that truncates its last
    rounding is off by under 1 ulp everywhere and by about twice the reference's error in the aggregates (the edge
    of ``factor``): only its mean, about -0.5 ulp, gives it away. Honest fp32 emulations measured at most 0.125 ulp
    (at 2.6 standard errors, 192 entries). The limit: truncating only a fraction f of the entries costs about
    -f/2 ulp, so f up to one half passes this test (and, with its error 1.6x the reference's, the aggregates).
    """

    atol: float
    rtol: float
    factor: float = 2.0
    cosine_floor: float = 0.9999
    elem_factor: float = 2.0
    elem_ulps: float = ELEM_ULPS
    name: str = "tolerance"

    def describe(self) -> dict[str, Any]:
        return {"class": self.name, "atol": self.atol, "rtol": self.rtol, "factor": self.factor,
                "cosine_floor": self.cosine_floor, "elem_factor": self.elem_factor, "elem_ulps": self.elem_ulps,
                "metric": "max_abs+rel_l2+cosine vs fp64 oracle; per element |out-oracle| <= elem_factor * "
                          "|ref-oracle| + elem_ulps * ulp_bf16(term scale)"}


@dataclass(frozen=True)
class Approximate:
    """Lossy by design (FP8 attention and GEMMs, sparse attention, compressed wires): judged against the exact op.

    For an approximate op group, ``oracle`` is the *exact* op in fp64 (e.g. dense attention on the bf16 inputs) and
    ``reference`` the lossy algorithm as declared (e.g. fp32 attention over the selected blocks, or over the
    e4m3-quantised inputs), rounded to bf16. On the finite entries a candidate passes when

    * ``rel_l2(out, oracle) <= max_rel_l2``, ``cosine(out, oracle) >= min_cosine`` and
      ``max|out - oracle| <= max_abs_frac * max|oracle|`` (the declared error budget of the approximation), and
    * it is no lossier than the algorithm it claims: ``rel_l2(out, oracle) <= factor * rel_l2(ref, oracle) +
      floor_rel_l2`` (a sparser selection or a cruder quantiser than the reference's fails here).

    Non-finite entries must match the reference's positions. The stats of every trial record the error against
    the oracle and against the reference, the reference's own error, and the distribution of
    ``|out - oracle| / max|oracle|`` (p50, p99, max), so a verdict says how lossy the kernel is; such verdicts are
    shown in their own rows, never beside exact ones as if comparable.
    """

    max_rel_l2: float
    min_cosine: float
    max_abs_frac: float
    factor: float = 1.5
    floor_rel_l2: float = 1e-3
    name: str = "approximate"

    def describe(self) -> dict[str, Any]:
        return {"class": self.name, "max_rel_l2": self.max_rel_l2, "min_cosine": self.min_cosine,
                "max_abs_frac": self.max_abs_frac, "factor": self.factor, "floor_rel_l2": self.floor_rel_l2,
                "metric": "vs the exact op's fp64 oracle: rel_l2, cosine, max_abs / max|oracle|; no lossier than "
                          "factor x the declared reference's rel_l2 + floor"}


ToleranceClass = Bitwise | Tolerance | Approximate

# the bounds of the approximate class that a search space may tighten, and the direction that is tighter
TIGHTENABLE = {"max_rel_l2": "lower", "min_cosine": "higher", "max_abs_frac": "lower"}


def tighten(tol: ToleranceClass, bounds: Mapping[str, float]) -> Approximate:
    """The op group's approximate class with some bounds tightened (a search space's ``[<op>.approximate]`` table).

    Raises ValueError where the class is not approximate, a key is not one of ``TIGHTENABLE``, a value is not a
    finite number, or a value would loosen the op group's bound: a space may make the judge stricter, never laxer.
    """
    if not isinstance(tol, Approximate):
        raise ValueError(f"only an approximate class can be tightened; this op group's class is {tol.name!r}")  # noqa: TRY004 - a config error
    new: dict[str, float] = {}
    for key, value in bounds.items():
        if key not in TIGHTENABLE:
            raise ValueError(f"unknown approximate bound {key!r}; known: {', '.join(TIGHTENABLE)}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"approximate bound {key} = {value!r} is not a finite number")
        base = getattr(tol, key)
        looser = value > base if TIGHTENABLE[key] == "lower" else value < base
        if looser:
            raise ValueError(f"approximate bound {key} = {value} loosens the op group's {base}; a search space may "
                             f"only tighten it ({'<=' if TIGHTENABLE[key] == 'lower' else '>='} {base})")
        new[key] = float(value)
    return replace(tol, **new)


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
    # fn(inputs, which) -> inputs: new values for the float inputs at positions ``which`` (all if empty), written
    # into a copy of each input's storage with its sizes, strides and storage offset (the layout is kept)
    apply: Callable[..., tuple]
    # whether the reference propagates non-finite values for this case (NaN/Inf comparisons are then exact)
    nonfinite: bool = False
    # input positions that get NaN but no +-Inf (documented per op group where 0 * Inf would judge rounding)
    nan_only: tuple[int, ...] = ()


# ------------------------------------------------------------------------------------------------------ baselines
# names the timing loops already give their own entries (rsi.harness.judge, rsi.bench): a baseline may not take one
RESERVED_TIMING_NAMES = frozenset({"candidate", "best", "aa", "eager", "compile", "copy", "liger", "verified",
                                   "verified_aa"})


@dataclass(frozen=True)
class Baseline:
    """An incumbent: an implementation the runtime could use instead of a kernel (an SDPA backend, FlexAttention).

    ``fn(*prepare(*inputs))`` returns the reference's outputs for the op group's inputs; ``prepare`` (None: the
    inputs as they are) runs outside the timed call and gives ``fn`` what the runtime holds before the call (e.g.
    document bounds as a host list, a block mask). The judge checks each baseline once per shape against the
    reference under the op group's class, times the ones that pass beside the candidate and records the others
    with their reason; promotion requires beating every one that was timed (``rsi.search.promote``).
    """

    name: str
    fn: Callable[..., Any]
    prepare: Callable[..., tuple] | None = None
    # the class this incumbent is vetted under when it is a legitimate implementation whose bytes differ from the
    # reference's (swiglu_fp8's unfused path: ATen's fp32 silu against the reference's fp64 one); None: the op
    # group's class. Either way a vetted incumbent is timed and binds promotion; its error is in the verdict.
    tolerance: Any = None

    def args(self, inputs: Sequence[Any]) -> tuple:
        """fn's arguments for one set of the op group's inputs."""
        return tuple(inputs) if self.prepare is None else tuple(self.prepare(*inputs))


# ------------------------------------------------------------------------------------------------------ op group
def _no_drawn_shapes(rng: random.Random, backend: str, n: int) -> list[Shape]:
    return []


@dataclass(frozen=True)
class OpGroup:
    """Everything the contract fixes for one op group (one module under ``rsi/refs``).

    Coverage hooks for the judge:

    * ``make_inputs(shape, seed, device, layout=0)``: layout 0 is the production layout; layouts
      ``1 .. n_layouts - 1`` hold the same values in other legal memory layouts (padded row strides, storage
      offsets, unaligned pointers, transposed storage of strided inputs), so a kernel cannot hard-code the
      production strides.
    * ``special_cases``: each case applies to every floating input (strided views included, layout kept) unless
      ``special_inputs`` restricts it (documented in the module's notes where it does).
    * ``sample_shapes(rng, backend, n)``: n more shapes (named ``drawn0``..) drawn from the op's admissible shapes
      beyond the named buckets; ``backend`` is ``"interpret"`` (small) or ``"cuda"`` (production-sized).
    * ``huge_shapes``: GPU-only shapes whose largest tensor exceeds 2**31 elements (int32 index overflow), for op
      groups whose production tensors come near that size.
    * ``term_scale(*inputs)``: one fp64 tensor per output, the output's shape: the largest magnitude among the
      terms of the last operation producing that element (``|a|, |b|`` for ``a + b``; the product itself for
      ``a * b``), the scale of the per-element ulp allowance of the Tolerance class; None means ``|oracle|``.
    * ``flops(shape)``: arithmetic operations of the op counted once each, as written in the reference: every
      add, subtract, multiply, divide, exp, rsqrt and comparison is 1 (silu(g) * u = exp, add, div, mul, mul = 5
      per output element); a reduction over n elements is its n multiplies + n adds (a sum of squares is 2n);
      per-row scalars (mean, + eps, rsqrt) are counted per row; loads, stores, casts, index math and pure layout
      ops are 0. Used by the physics gate (FLOP/s over the fp32 peak; over the dense bf16 tensor-core peak where
      ``flops_kind`` is "tensor": matmul FLOPs, 2 per multiply-add, e.g. attention's QK^T and PV).
    * ``dims_of(args)``: the Shape dims of one call (the runtime's dispatch key), the inverse of make_inputs.
    * ``fake`` and ``schema``: the meta implementation (contiguous outputs of the reference's shapes and dtypes) and
      the torch custom-op schema (argument names are ``input_names``), used by ``rsi.ops_library``.
    * ``baselines``: the incumbents (:class:`Baseline`) where the reference is not what the runtime runs (attention:
      the fp32 reference vs the SDPA backends and FlexAttention). On CUDA the judge times each one that passes its
      check beside the candidate, and a candidate must beat every one of them to be promoted; empty: eager and
      torch.compile of the reference are the incumbents.
    """

    name: str
    reference: Callable[..., Any]           # bf16 reference, the model's exact semantics
    oracle: Callable[..., Any]              # same formula in fp64 (used by the Tolerance class)
    make_inputs: Callable[..., tuple]       # (shape, seed, device, layout=0) -> inputs
    tolerance: ToleranceClass
    shapes: Sequence[Shape]                 # shapes the kernel serves on the GPU (timed, promoted per bucket)
    odd_shapes: Sequence[Shape]             # awkward sizes the op admits (correctness only)
    interp_shapes: Sequence[Shape]          # small shapes for the Triton interpreter
    special_cases: Sequence[SpecialCase]
    bytes_moved: Callable[[Shape], int]     # compulsory bytes read + written (physics gate, %-of-copy)
    flops: Callable[[Shape], int] = lambda s: 0   # arithmetic operations (counting rule above)
    flops_kind: str = "cuda"                # "tensor" / "tensor_fp8": matmul FLOPs, gated by the bf16 / fp8
                                            # tensor-core peak (rsi.harness.gates)
    noncontiguous_inputs: Sequence[str] = ()     # inputs that are strided views in the production layout
    special_inputs: Sequence[int] = ()      # positions special values are applied to (empty: every float input)
    input_names: Sequence[str] = ()
    template: str = ""                      # module name under rsi.templates for the offline proposer
    liger: Callable[..., Any] | None = None  # Liger's implementation of this op, when Liger has one
    liger_prepare: Callable[[tuple], tuple] | None = None  # op inputs -> Liger's inputs (outside timed region)
    notes: str = ""
    term_scale: Callable[..., tuple] | None = None  # inputs -> one fp64 term-scale tensor per output (None: |oracle|)
    n_layouts: int = 1                      # make_inputs(..., layout=i) for i < n_layouts; 0 is production
    sample_shapes: Callable[[random.Random, str, int], list[Shape]] = _no_drawn_shapes
    huge_shapes: Sequence[Shape] = ()       # GPU only: largest tensor > 2**31 elements
    dims_of: Callable[[tuple], dict[str, int]] | None = None  # call args -> Shape dims
    fake: Callable[..., Any] | None = None  # meta implementation for torch.library
    schema: str = ""                        # torch custom-op schema "(Tensor x, ...) -> Tensor"
    baselines: Sequence[Baseline] = ()      # incumbents timed beside the candidate and to be beaten (CUDA)
    # False: eager and torch.compile of the reference are not timed (judge, rsi bench). Only for op groups with
    # incumbents whose fp32/fp64 reference is orders of magnitude slower than them (attention: ~1 s at 38,248 rows,
    # so two such entries cost ~60 s of every candidate's timing loop and never bind the promotion rule).
    reference_timed: bool = True
    # named shapes whose correctness trials are the seeds and the refill only; the special cases and the layouts run
    # at the op group's other named shapes (the same code at a smaller size; int32 overflow has the huge shape).
    # For shapes whose fp32 reference and fp64 oracle cost seconds a trial (attention at 38,272 rows: ~11 trials a
    # candidate made one correctness pass outlast run 22's 170 s cap).
    heavy_shapes: Sequence[str] = ()

    def __post_init__(self) -> None:
        names = [b.name for b in self.baselines]
        clash = sorted(set(names) & RESERVED_TIMING_NAMES)
        if clash or len(set(names)) != len(names):
            raise ValueError(f"{self.name}: baseline names must be unique and not one of the timing loop's own "
                             f"({', '.join(sorted(RESERVED_TIMING_NAMES))}); got {names}")

    def describe(self) -> dict[str, Any]:
        return {"op": self.name, "tolerance": self.tolerance.describe(),
                "shapes": [s.to_json() for s in self.shapes], "noncontiguous_inputs": list(self.noncontiguous_inputs),
                "n_layouts": self.n_layouts, "huge_shapes": [s.to_json() for s in self.huge_shapes],
                "special_inputs": list(self.special_inputs), "baselines": [b.name for b in self.baselines]}


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
