"""The physics gate: timings that physics does not allow are rejected, whatever they would have promoted.

``physics_gate(rows, op, copy_bw, params)`` returns "" when every timing row is physically possible, else the first
reason, naming the bucket and the numbers. Per row (one shape bucket), fail closed on missing or non-finite fields:

a. bandwidth: the op's compulsory bytes (``op.bytes_moved``) over the candidate's p50 may not exceed
   ``copy_factor`` (default 1.05) x the device-to-device copy bandwidth measured in the same run: faster than a copy
   means L2 residency, skipped work or a miscount, not a faster kernel;
b. FLOP/s: ``op.flops(shape)`` over the p50 may not exceed the peak of the target (``rsi.targets.peak_tflops``): the
   dense bf16 tensor-core peak for ops whose FLOPs are matmul (``op.flops_kind == "tensor"``), the dense fp8 one for
   matmul whose operands may be e4m3 (``"tensor_fp8"``: attention_fp8, fp8_linear), else the fp32
   CUDA-core peak (the op groups today are elementwise); ops without a FLOP count (0) skip this check;
c. wall clock: ``wall_min_ratio`` (min over repetitions of the host wall-clock time the judge measured around the
   call / the CUDA-event time of that call) below 1 means an event interval longer than the wall-clock interval
   that contains it, which is impossible: reject; likewise ``event_sum_us`` > ``wall_sum_us``;
d. hidden work: ``hidden_work_gap_us`` (time only a device-wide sync sees) > max(50 us, 0.5 x p50): work hidden
   from the timed stream (side stream or asynchronous host work).

``params`` may carry ``copy_factor``, ``peak_tflops`` (a number that overrides the target's peak), ``target`` (a
registry name; else the local GPU, else the loosest peak of the registry) and ``wall_slack`` (relative slack on the
wall-clock checks, default 0).
"""

from __future__ import annotations

import math
from typing import Any

from rsi.contract import Shape

COPY_FACTOR = 1.05
HIDDEN_FLOOR_US = 50.0
HIDDEN_FRACTION = 0.5


def _num(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return float("nan")


def flops_kind(op: Any) -> str:
    """"tensor" (bf16 matmul) or "tensor_fp8" (fp8 matmul) for ops whose FLOPs are matmul, else "cuda" (the
    default: elementwise op groups)."""
    return getattr(op, "flops_kind", "cuda") or "cuda"


def resolve_peak(kind: str, params: dict) -> tuple[float, str]:
    """(peak TFLOP/s, what it is) for FLOPs of ``kind``; raises ValueError for an unknown kind."""
    from rsi import targets

    label = {"tensor": "tensor-core dense bf16", "tensor_fp8": "tensor-core dense fp8"}.get(kind, "CUDA-core fp32")
    if kind not in ("tensor", "tensor_fp8", "cuda"):
        raise ValueError(f"unknown flops_kind {kind!r}")
    if params.get("peak_tflops") is not None:
        return _num(params["peak_tflops"]), f"{label} peak override"
    if params.get("target"):
        t = targets.get_target(params["target"])
        return t.peak_tflops(kind), f"{t.name} {label} peak (spec)"
    local = targets.detect_local()
    if local is not None:
        return local.peak_tflops(kind), f"{local.name} {label} peak (spec)"
    t = max(targets.TARGETS.values(), key=lambda t: t.peak_tflops(kind))
    return t.peak_tflops(kind), f"largest {label} peak of the registry ({t.name}, spec; no target known)"


def _row_gate(row: dict, op: Any, copy_gbps: float, params: dict) -> str:
    b = row.get("bucket", "?")
    p50 = _num(row.get("p50_us"))
    if not (math.isfinite(p50) and p50 > 0):
        return f"no usable candidate time at {b} (p50 {p50} us)"
    shape = Shape(b, dict(row["shape"]["dims"]))

    # a. bandwidth against the copy measured in this run
    factor = _num(params.get("copy_factor", COPY_FACTOR))
    nbytes = op.bytes_moved(shape)
    gbps = nbytes / (p50 * 1e-6) / 1e9
    if not gbps <= factor * copy_gbps:
        return (f"effective bandwidth {gbps:.0f} GB/s ({nbytes} B in {p50:.2f} us) at {b} exceeds {factor}x the "
                f"copy bandwidth measured in this run ({copy_gbps:.0f} GB/s): L2 residency, skipped work or a "
                f"miscount, not a faster kernel")

    # b. FLOP/s against the target's peak
    fl = op.flops(shape) or 0
    if fl:
        kind = flops_kind(op)
        try:
            peak, what = resolve_peak(kind, params)
        except ValueError as e:
            return f"FLOP/s gate at {b}: {e}"
        if not (math.isfinite(peak) and peak > 0):
            return f"FLOP/s gate at {b}: no {kind} peak known ({what}: {peak})"
        tflops = fl / (p50 * 1e-6) / 1e12
        if not tflops <= peak:
            return (f"{tflops:.1f} TFLOP/s ({fl} FLOP in {p50:.2f} us) at {b} exceeds the {what} of "
                    f"{peak:g} TFLOP/s")

    # c. CUDA events cannot outlast the host wall clock around them
    slack = _num(params.get("wall_slack", 0.0))
    wmin = _num(row.get("wall_min_ratio"))
    if not math.isfinite(wmin):
        return f"no wall-clock bound at {b} (wall_min_ratio {row.get('wall_min_ratio')!r})"
    if wmin < 1.0 - slack:
        return (f"the CUDA-event time exceeds the host wall-clock time around the call at {b} (min wall/event ratio "
                f"{wmin:.3f} < 1): the reported GPU time is not the call's")
    ev, wall = _num(row.get("event_sum_us")), _num(row.get("wall_sum_us"))
    if not (math.isfinite(ev) and math.isfinite(wall)):
        return f"no wall-clock totals at {b} (event_sum_us {row.get('event_sum_us')!r}, " \
               f"wall_sum_us {row.get('wall_sum_us')!r})"
    if ev > wall * (1.0 + slack):
        return (f"CUDA-event total {ev:.1f} us exceeds the host wall-clock total {wall:.1f} us at {b}: "
                f"the reported GPU time is not the calls'")

    # d. work hidden from the timed stream
    gap = _num(row.get("hidden_work_gap_us"))
    if not math.isfinite(gap):
        return f"no side-stream check at {b} (hidden_work_gap_us {row.get('hidden_work_gap_us')!r})"
    limit = max(HIDDEN_FLOOR_US, HIDDEN_FRACTION * p50)
    if gap > limit:
        return (f"work hidden from the timed stream: a device-wide sync sees {gap:.1f} us more than the events at {b} "
                f"(limit {limit:.1f} us, p50 {p50:.1f} us; side stream or asynchronous host work)")
    return ""


def physics_gate(rows: list[dict], op: Any, copy_bw: dict, params: dict) -> str:
    """"" when every row is physically possible, else the first reason (bucket and numbers named)."""
    params = params or {}
    if not rows:
        return "no timing rows to check"
    copy_gbps = _num((copy_bw or {}).get("gbps"))
    if not (math.isfinite(copy_gbps) and copy_gbps > 0):
        return f"no copy bandwidth measured in this run ({(copy_bw or {}).get('gbps')!r} GB/s)"
    for row in rows:
        why = _row_gate(row, op, copy_gbps, params)
        if why:
            return why
    return ""
