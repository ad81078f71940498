"""Correctness: compare a candidate's outputs with the reference under the op group's tolerance class.

Every function here returns ``(ok, stats, reason)``; stats are recorded on every verdict, passing or not.
Pure torch: runs on the CPU for tests and on the GPU inside the worker.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from rsi.contract import Approximate, Bitwise, Tolerance, ToleranceClass


def as_tuple(x: Any) -> tuple:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def raw_bytes(t: torch.Tensor) -> torch.Tensor:
    """The tensor's values as bytes (NaN payloads included), independent of strides."""
    return t.contiguous().view(torch.uint8)


def bitwise_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(raw_bytes(a), raw_bytes(b))


def _storage_span(t: torch.Tensor) -> tuple[int, int]:
    if t.numel() == 0:
        return (0, 0)
    start = t.data_ptr()
    last = start + sum((s - 1) * st for s, st in zip(t.shape, t.stride())) * t.element_size()
    return (start, last + t.element_size())


def overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    """True when the memory spans of a and b intersect (aliasing, views, reused buffers)."""
    (a0, a1), (b0, b1) = _storage_span(a), _storage_span(b)
    return a0 < b1 and b0 < a1 and a1 > a0 and b1 > b0


def check_structure(outs: Sequence[Any], refs: Sequence[torch.Tensor]) -> tuple[bool, str]:
    if len(outs) != len(refs):
        return False, f"returned {len(outs)} outputs, the reference returns {len(refs)}"
    for i, (o, r) in enumerate(zip(outs, refs)):
        if not torch.is_tensor(o):
            return False, f"output {i} is {type(o).__name__}, not a tensor"
        if type(o) is not torch.Tensor:
            return False, f"output {i} is a tensor subclass {type(o).__name__}"
        if o.dtype != r.dtype:
            return False, f"output {i} dtype {o.dtype} != reference {r.dtype}"
        if tuple(o.shape) != tuple(r.shape):
            return False, f"output {i} shape {tuple(o.shape)} != reference {tuple(r.shape)}"
        # strides of size-1 dims address nothing, so only the others must match the reference's layout
        if o.numel() > 1 and [st for st, n in zip(o.stride(), o.shape) if n > 1] != \
                [st for st, n in zip(r.stride(), r.shape) if n > 1]:
            return False, f"output {i} stride {tuple(o.stride())} != reference {tuple(r.stride())}"
        if o.device != r.device:
            return False, f"output {i} on {o.device}, reference on {r.device}"
    return True, ""


def check_aliasing(outs: Sequence[torch.Tensor], inputs: Sequence[Any], previous: Sequence[torch.Tensor]) -> str:
    """Outputs must be fresh memory: not a view of an input, not a buffer returned by an earlier call."""
    for i, o in enumerate(outs):
        for j, x in enumerate(inputs):
            if torch.is_tensor(x) and overlaps(o, x):
                return f"output {i} aliases input {j} (a view of an input is not a computed result)"
        for p in previous:
            if overlaps(o, p):
                return f"output {i} reuses the buffer of an earlier call's output (cached result)"
        for k, o2 in enumerate(outs[:i]):
            if overlaps(o, o2):
                return f"outputs {k} and {i} overlap"
    return ""


def _nonfinite_match(out: torch.Tensor, ref: torch.Tensor) -> str:
    o_nan, r_nan = torch.isnan(out), torch.isnan(ref)
    if not torch.equal(o_nan, r_nan):
        extra = int((o_nan & ~r_nan).sum())
        return f"NaN pattern differs from the reference ({extra} NaN where the reference has none)"
    o_inf, r_inf = torch.isinf(out), torch.isinf(ref)
    if not torch.equal(o_inf, r_inf) or not torch.equal(out[o_inf], ref[r_inf]):
        return "Inf pattern or sign differs from the reference"
    return ""


def error_stats(x: torch.Tensor, oracle: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
    """max-abs, relative L2 and cosine of x against the fp64 oracle on the entries in mask."""
    xd = x.double()[mask]
    od = oracle.double()[mask]
    if xd.numel() == 0:
        return {"max_abs": 0.0, "rel_l2": 0.0, "cosine": 1.0}
    diff = xd - od
    on = float(torch.linalg.vector_norm(od))
    xn = float(torch.linalg.vector_norm(xd))
    dn = float(torch.linalg.vector_norm(diff))
    rel = dn / on if on > 0 else (0.0 if dn == 0 else math.inf)
    if on == 0 and xn == 0:
        cos = 1.0
    elif on == 0 or xn == 0:
        cos = 0.0
    else:
        cos = float((xd * od).sum()) / (xn * on)
    return {"max_abs": float(diff.abs().max()), "rel_l2": rel, "cosine": cos}


def compare(out: torch.Tensor, ref: torch.Tensor, oracle: torch.Tensor | None,
            tol: ToleranceClass) -> tuple[bool, dict[str, float], str]:
    """Judge one output tensor against the reference (and fp64 oracle) under the tolerance class."""
    if isinstance(tol, Bitwise):
        ok = bitwise_equal(out, ref)
        stats = {"bitwise": float(ok)}
        if not ok:
            diff = (out.double() - ref.double()).abs()
            diff = diff[torch.isfinite(diff)]
            stats["max_abs"] = float(diff.max()) if diff.numel() else math.nan
            stats["mismatched"] = float((raw_bytes(out) != raw_bytes(ref)).sum())
            return False, stats, f"not bitwise equal ({int(stats['mismatched'])} bytes differ)"
        return True, stats, ""
    assert oracle is not None, "tolerance classes need the fp64 oracle"
    bad = _nonfinite_match(out, ref)
    if bad:
        return False, {}, bad
    finite = torch.isfinite(ref) & torch.isfinite(oracle)
    cand = error_stats(out, oracle, finite)
    own = error_stats(ref, oracle, finite)
    stats = {"max_abs": cand["max_abs"], "rel_l2": cand["rel_l2"], "cosine": cand["cosine"],
             "ref_max_abs": own["max_abs"], "ref_rel_l2": own["rel_l2"]}
    if isinstance(tol, Tolerance):
        max_abs_bound = max(tol.atol, tol.factor * own["max_abs"])
        rel_bound = max(tol.rtol, tol.factor * own["rel_l2"])
        # where even the bf16 reference loses direction (e.g. products that underflow), the floor follows it
        cos_bound = 1.0 - max(1.0 - tol.cosine_floor, tol.factor * (1.0 - own["cosine"]))
        stats.update(max_abs_bound=max_abs_bound, rel_l2_bound=rel_bound, cosine_bound=cos_bound, ref_cosine=own["cosine"])
        if not cand["max_abs"] <= max_abs_bound:
            return False, stats, f"max-abs error {cand['max_abs']:.3g} > bound {max_abs_bound:.3g}"
        if not cand["rel_l2"] <= rel_bound:
            return False, stats, f"relative-L2 error {cand['rel_l2']:.3g} > bound {rel_bound:.3g}"
        if not cand["cosine"] >= cos_bound:
            return False, stats, f"cosine {cand['cosine']:.6f} < floor {cos_bound:.6f}"
        return True, stats, ""
    if isinstance(tol, Approximate):
        rmse = cand["rel_l2"]
        snr = -20 * math.log10(rmse) if rmse > 0 else math.inf
        stats.update(rel_rmse=rmse, snr_db=snr)
        if not rmse <= tol.max_rel_rmse:
            return False, stats, f"relative RMSE {rmse:.3g} > {tol.max_rel_rmse}"
        if not snr >= tol.min_snr_db:
            return False, stats, f"SNR {snr:.1f} dB < {tol.min_snr_db}"
        return True, stats, ""
    return False, stats, f"unknown tolerance class {tol!r}"


def worst(stats_list: Sequence[dict[str, float]]) -> dict[str, float]:
    """Aggregate per-trial stats into the worst observed value of each metric."""
    out: dict[str, float] = {}
    for s in stats_list:
        for k, v in s.items():
            if k in ("cosine",):
                out[k] = min(out.get(k, v), v)
            else:
                out[k] = max(out.get(k, v), v)
    return out
