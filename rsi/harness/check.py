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
    if out.dtype.is_floating_point and out.element_size() == 1:    # fp8: torch has no isinf for it; exact upcast
        out, ref = out.float(), ref.float()
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


# Elements per slice of the chunked scan in ``compare``: the fp64 temporaries of one slice stay small even for the
# huge-shape trials (> 2**31 elements), where whole-tensor fp64 copies would not fit next to the oracle.
SCAN_CHUNK = 1 << 24
BF16_MIN_NORMAL = 2.0 ** -126
BF16_SUBNORMAL_ULP = 2.0 ** -133


def ulp_bf16(m: torch.Tensor) -> torch.Tensor:
    """bf16 spacing at magnitude |m| (fp64): ``2**(floor(log2 |m|) - 7)`` for normal |m|, the subnormal spacing
    ``2**-133`` below bf16's smallest normal (and at 0); +inf where m is not finite."""
    m = m.double().abs()
    _, e = torch.frexp(m)                       # m = f * 2**e with f in [0.5, 1): floor(log2 m) = e - 1
    u = torch.ldexp(torch.ones_like(m), (e - 8).to(torch.int32))
    u = torch.where(m >= BF16_MIN_NORMAL, u, torch.full_like(m, BF16_SUBNORMAL_ULP))
    return torch.where(torch.isfinite(m), u, torch.full_like(m, math.inf))


def _flat(t: torch.Tensor) -> torch.Tensor:
    return t.reshape(-1)


class _Scan:
    """Running sums of one chunked pass over (x, oracle): what ``error_stats`` computes in one go."""

    def __init__(self) -> None:
        self.dd = self.oo = self.xx = self.xo = 0.0
        self.max_abs = 0.0
        self.n = 0

    def add(self, xd: torch.Tensor, od: torch.Tensor) -> None:
        if xd.numel() == 0:
            return
        diff = xd - od
        self.dd += float((diff * diff).sum())
        self.oo += float((od * od).sum())
        self.xx += float((xd * xd).sum())
        self.xo += float((xd * od).sum())
        self.max_abs = max(self.max_abs, float(diff.abs().max()))
        self.n += xd.numel()

    def stats(self) -> dict[str, float]:
        if self.n == 0:
            return {"max_abs": 0.0, "rel_l2": 0.0, "cosine": 1.0}
        on, xn, dn = math.sqrt(self.oo), math.sqrt(self.xx), math.sqrt(self.dd)
        rel = dn / on if on > 0 else (0.0 if dn == 0 else math.inf)
        if on == 0 and xn == 0:
            cos = 1.0
        elif on == 0 or xn == 0:
            cos = 0.0
        else:
            cos = self.xo / (xn * on)
        return {"max_abs": self.max_abs, "rel_l2": rel, "cosine": cos}


# The rounding-bias test of the Tolerance class (Tolerance docstring): the mean signed error against the oracle,
# positive away from zero, in bf16 ulps of |oracle|, each entry clipped to +-BIAS_CLIP ulps.
BIAS_ULPS = 0.25      # rejected beyond max(this, BIAS_FACTOR x the reference's own bias) (truncation: about -0.5)
BIAS_FACTOR = 2.0
BIAS_SIGMAS = 6.0     # ... and only when the mean is also this many standard errors from 0
BIAS_MIN_N = 16       # entries needed (finite, oracle non-zero)
BIAS_CLIP = 2.0


class _Bias:
    """Running sums of the clipped signed errors d = sign(oracle) (x - oracle) / ulp_bf16(oracle)."""

    def __init__(self) -> None:
        self.s = self.ss = 0.0
        self.n = 0

    def add(self, x: torch.Tensor, q: torch.Tensor) -> None:
        keep = q != 0
        x, q = x[keep], q[keep]
        if x.numel() == 0:
            return
        d = ((x - q) / ulp_bf16(q)).clamp(-BIAS_CLIP, BIAS_CLIP) * torch.sign(q)
        self.s += float(d.sum())
        self.ss += float((d * d).sum())
        self.n += d.numel()

    def mean_sigmas(self) -> tuple[float, float]:
        """The mean and how many standard errors it lies from 0 (0, 0 without entries)."""
        if self.n == 0:
            return 0.0, 0.0
        mean = self.s / self.n
        se = math.sqrt(max(self.ss / self.n - mean * mean, 0.0) / self.n)
        return mean, (abs(mean) / se if se > 0 else (0.0 if mean == 0 else math.inf))


BIAS_KEYS = ("bias_ulps", "bias_sigmas", "bias_n", "ref_bias_ulps", "bias_bound")   # what _bias_stats records


def _bias_stats(cand: _Bias, own: _Bias) -> dict[str, float]:
    (mean, sig), (ref_mean, _) = cand.mean_sigmas(), own.mean_sigmas()
    return dict(zip(BIAS_KEYS, (mean, sig, float(cand.n), ref_mean, max(BIAS_ULPS, BIAS_FACTOR * abs(ref_mean)))))


def _biased(b: dict[str, float]) -> str:
    """The reason a rounding bias rejects, or "" (BIAS_* above)."""
    if b["bias_n"] < BIAS_MIN_N or abs(b["bias_ulps"]) <= b["bias_bound"] or b["bias_sigmas"] <= BIAS_SIGMAS:
        return ""
    way = "toward zero" if b["bias_ulps"] < 0 else "away from zero"
    return (f"rounding bias: the error against the fp64 oracle is on average {abs(b['bias_ulps']):.3f} bf16 ulp "
            f"{way} over {int(b['bias_n'])} entries ({b['bias_sigmas']:.1f} standard errors; bound "
            f"{b['bias_bound']:.3g}, the reference's own {b['ref_bias_ulps']:+.3f}): a directed rounding "
            f"(e.g. truncation) in place of round-to-nearest")


def _scan(out: torch.Tensor, ref: torch.Tensor, oracle: torch.Tensor, term: torch.Tensor | None,
          k: float, c: float) -> tuple[dict[str, float], dict[str, float], dict[str, Any]]:
    """One chunked pass: aggregate stats of out and of ref against the oracle on the finite entries, the
    per-element bound ``|out - oracle| <= k |ref - oracle| + c ulp_bf16(term)`` (term: |oracle| when None) and the
    rounding bias of out and of ref against the oracle (``_Bias``)."""
    fo, fr, fq = _flat(out), _flat(ref), _flat(oracle)
    ft = _flat(term) if term is not None else None
    cand, own, bias, own_bias = _Scan(), _Scan(), _Bias(), _Bias()
    over, worst_ratio, worst_at, max_bound = 0, 0.0, -1, 0.0
    for s in range(0, fo.numel(), SCAN_CHUNK):
        o, r, q = fo[s:s + SCAN_CHUNK].double(), fr[s:s + SCAN_CHUNK].double(), fq[s:s + SCAN_CHUNK].double()
        fin = torch.isfinite(r) & torch.isfinite(q)
        if not bool(fin.all()):
            o, r, q = o[fin], r[fin], q[fin]
        cand.add(o, q)
        own.add(r, q)
        if o.numel() == 0:
            continue
        bias.add(o, q)
        own_bias.add(r, q)
        t = q.abs() if ft is None else ft[s:s + SCAN_CHUNK].double().abs()
        if ft is not None and t.numel() != o.numel():
            t = t[fin]
        t = torch.where(torch.isfinite(t), t, q.abs())   # a non-finite term (oracle finite): judge on |oracle|
        bound = k * (r - q).abs() + c * ulp_bf16(t)
        max_bound = max(max_bound, float(bound.max()))
        ratio = (o - q).abs() / bound                     # bound >= c * 2**-133 > 0
        over += int((ratio > 1).sum())
        m = float(ratio.max())
        if m > worst_ratio or worst_at < 0:
            j = int(ratio.argmax())
            worst_ratio = m
            worst_at = s + (int(fin.nonzero()[j]) if o.numel() != fin.numel() else j)
    elem: dict[str, Any] = {"over": over, "worst_ratio": worst_ratio, "worst_at": worst_at, "max_bound": max_bound,
                            **_bias_stats(bias, own_bias)}
    return cand.stats(), own.stats(), elem


def _quantile_bits(hist: torch.Tensor, q: float) -> float:
    """The q-quantile of non-negative float32 values from the histogram of their top 16 bits (sign, exponent and 7
    mantissa bits: bf16 precision), rounded down to that precision."""
    n = int(hist.sum())
    if n == 0:
        return 0.0
    k = max(1, math.ceil(q * n))
    idx = int(torch.searchsorted(torch.cumsum(hist, 0), torch.tensor([k], device=hist.device))[0])
    return float(torch.tensor([idx << 16], dtype=torch.int32).view(torch.float32)[0])


def _approx_scan(out: torch.Tensor, ref: torch.Tensor, oracle: torch.Tensor) -> dict[str, Any]:
    """One chunked pass for the approximate class on the finite entries: out and ref against the oracle, out against
    ref, max|oracle| and the histogram of |out - oracle| (float32 top 16 bits) for its percentiles."""
    fo, fr, fq = _flat(out), _flat(ref), _flat(oracle)
    cand, own, vs_ref = _Scan(), _Scan(), _Scan()
    hist = torch.zeros(1 << 15, dtype=torch.int64, device=out.device)
    peak = 0.0
    for s in range(0, fo.numel(), SCAN_CHUNK):
        o, r, q = fo[s:s + SCAN_CHUNK].double(), fr[s:s + SCAN_CHUNK].double(), fq[s:s + SCAN_CHUNK].double()
        fin = torch.isfinite(r) & torch.isfinite(q)
        if not bool(fin.all()):
            o, r, q = o[fin], r[fin], q[fin]
        if o.numel() == 0:
            continue
        cand.add(o, q)
        own.add(r, q)
        vs_ref.add(o, r)
        peak = max(peak, float(q.abs().max()))
        err = (o - q).abs().clamp(max=torch.finfo(torch.float32).max).float()
        hist += torch.bincount((err.view(torch.int32) >> 16).long(), minlength=1 << 15)
    return {"cand": cand.stats(), "own": own.stats(), "vs_ref": vs_ref.stats(), "peak": peak, "hist": hist}


def _element_report(out, ref, oracle, term, flat_index: int, k: float, c: float) -> str:
    idx = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat_index), tuple(out.shape)))
    o, r, q = float(_flat(out)[flat_index]), float(_flat(ref)[flat_index]), float(_flat(oracle)[flat_index])
    t = abs(q) if term is None else abs(float(_flat(term)[flat_index]))
    if not math.isfinite(t):
        t = abs(q)
    bound = k * abs(r - q) + c * float(ulp_bf16(torch.tensor(t, dtype=torch.float64)))
    return (f"worst at index {idx}: out={o:.6g} ref={r:.6g} oracle={q:.6g} |err|={abs(o - q):.3g} > "
            f"{bound:.3g} = {k:g}*|ref err| + {c:g} ulp_bf16({t:.3g})")


def needs_oracle(tol: ToleranceClass) -> bool:
    """Whether the class compares against the fp64 oracle (every class but bitwise)."""
    return isinstance(tol, (Tolerance, Approximate))


def term_scales(op: Any, inputs: tuple, n_outputs: int) -> tuple:
    """The op group's per-output term scales for these inputs (``OpGroup.term_scale``), or None per output where
    the op group declares none or its class is not Tolerance: pass element i as ``compare(..., term_scale=)``."""
    if isinstance(op.tolerance, Tolerance) and op.term_scale is not None:
        scales = as_tuple(op.term_scale(*inputs))
        if len(scales) != n_outputs:
            raise ValueError(f"{op.name}: term_scale gives {len(scales)} tensors for {n_outputs} outputs")
        return scales
    return (None,) * n_outputs


def compare(out: torch.Tensor, ref: torch.Tensor, oracle: torch.Tensor | None,
            tol: ToleranceClass, term_scale: torch.Tensor | None = None) -> tuple[bool, dict[str, float], str]:
    """Judge one output tensor against the reference (and fp64 oracle) under the tolerance class.

    ``term_scale``: for the tolerance class, the op group's per-element term scale of this output
    (``term_scales(op, inputs, n)[i]``, same shape as the output); None means ``|oracle|``, which is right only for
    outputs whose last operation cannot cancel (a product): modulate's ``n (1 + scale) + shift`` judged on
    ``|oracle|`` rejects honest fused kernels where the terms cancel.
    """
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
    if isinstance(tol, Approximate):
        return _approximate(out, ref, oracle, tol)
    if term_scale is not None and tuple(term_scale.shape) != tuple(out.shape):
        raise ValueError(f"term scale shape {tuple(term_scale.shape)} != output shape {tuple(out.shape)}")
    k = tol.elem_factor if isinstance(tol, Tolerance) else 1.0
    c = tol.elem_ulps if isinstance(tol, Tolerance) else 0.0
    cand, own, elem = _scan(out, ref, oracle, term_scale, k, c)
    stats = {"max_abs": cand["max_abs"], "rel_l2": cand["rel_l2"], "cosine": cand["cosine"],
             "ref_max_abs": own["max_abs"], "ref_rel_l2": own["rel_l2"]}
    if isinstance(tol, Tolerance):
        # never tighter than the per-element bound's largest value: at a cancellation (terms ~1e8, result ~1e6)
        # an honest kernel may be further from the oracle than twice the reference's largest error anywhere, and
        # with fresh seeds that was seen (modulate, case "large", CI of c93941c's successor)
        max_abs_bound = max(tol.atol, tol.factor * own["max_abs"], elem["max_bound"])
        rel_bound = max(tol.rtol, tol.factor * own["rel_l2"])
        # where even the bf16 reference loses direction (e.g. products that underflow), the floor follows it
        cos_bound = 1.0 - max(1.0 - tol.cosine_floor, tol.factor * (1.0 - own["cosine"]))
        stats.update(max_abs_bound=max_abs_bound, rel_l2_bound=rel_bound, cosine_bound=cos_bound, ref_cosine=own["cosine"],
                     elem_over=float(elem["over"]), elem_worst_ratio=elem["worst_ratio"],
                     elem_factor=tol.elem_factor, elem_ulps=tol.elem_ulps,
                     elem_term_scale=0.0 if term_scale is None else 1.0,
                     **{k: elem[k] for k in BIAS_KEYS})
        if not cand["max_abs"] <= max_abs_bound:
            return False, stats, f"max-abs error {cand['max_abs']:.3g} > bound {max_abs_bound:.3g}"
        if not cand["rel_l2"] <= rel_bound:
            return False, stats, f"relative-L2 error {cand['rel_l2']:.3g} > bound {rel_bound:.3g}"
        if not cand["cosine"] >= cos_bound:
            return False, stats, f"cosine {cand['cosine']:.6f} < floor {cos_bound:.6f}"
        if elem["over"] > 0:
            return False, stats, (f"per-element error over the bound at {elem['over']} of {out.numel()} elements "
                                  f"(worst ratio {elem['worst_ratio']:.3g}); "
                                  + _element_report(out, ref, oracle, term_scale, elem["worst_at"], k, c))
        biased = _biased(elem)
        if biased:
            return False, stats, biased
        return True, stats, ""
    return False, stats, f"unknown tolerance class {tol!r}"


def _approximate(out: torch.Tensor, ref: torch.Tensor, oracle: torch.Tensor,
                 tol: Approximate) -> tuple[bool, dict[str, float], str]:
    """The approximate class (rsi.contract.Approximate) on one output whose non-finite entries already match."""
    a = _approx_scan(out, ref, oracle)
    cand, own, vs_ref, peak = a["cand"], a["own"], a["vs_ref"], a["peak"]

    def frac(x: float) -> float:
        return x / peak if peak > 0 else (0.0 if x == 0 else math.inf)

    lossier = tol.factor * own["rel_l2"] + tol.floor_rel_l2
    stats = {"max_abs": cand["max_abs"], "rel_l2": cand["rel_l2"], "cosine": cand["cosine"],
             "ref_max_abs": own["max_abs"], "ref_rel_l2": own["rel_l2"], "ref_cosine": own["cosine"],
             "max_abs_frac": frac(cand["max_abs"]), "err_frac_p50": frac(_quantile_bits(a["hist"], 0.5)),
             "err_frac_p99": frac(_quantile_bits(a["hist"], 0.99)), "vs_ref_rel_l2": vs_ref["rel_l2"],
             "vs_ref_max_abs": vs_ref["max_abs"], "rel_l2_bound": tol.max_rel_l2, "cosine_bound": tol.min_cosine,
             "max_abs_frac_bound": tol.max_abs_frac, "lossier_bound": lossier}
    if not cand["rel_l2"] <= tol.max_rel_l2:
        return False, stats, f"relative-L2 error vs the exact op {cand['rel_l2']:.3g} > {tol.max_rel_l2}"
    if not cand["cosine"] >= tol.min_cosine:
        return False, stats, f"cosine vs the exact op {cand['cosine']:.6f} < {tol.min_cosine}"
    if not stats["max_abs_frac"] <= tol.max_abs_frac:
        return False, stats, f"max-abs error {stats['max_abs_frac']:.3g} of max|exact| > {tol.max_abs_frac}"
    if not cand["rel_l2"] <= lossier:
        return False, stats, (f"lossier than the declared algorithm: relative-L2 {cand['rel_l2']:.3g} > "
                              f"{tol.factor} x the reference's {own['rel_l2']:.3g} + {tol.floor_rel_l2}")
    return True, stats, ""


# stats where a smaller value is worse (similarities); every other stat is an error or a bound: larger is worse
MIN_KEYS = frozenset({"cosine", "ref_cosine", "bitwise"})
# signed stats: the worst is the largest magnitude, sign kept
SIGNED_KEYS = frozenset({"bias_ulps", "ref_bias_ulps"})


def worst(stats_list: Sequence[dict[str, float]]) -> dict[str, float]:
    """Aggregate per-trial stats into the worst observed value of each metric."""
    out: dict[str, float] = {}
    for s in stats_list:
        for k, v in s.items():
            if k in MIN_KEYS:
                out[k] = min(out.get(k, v), v)
            elif k in SIGNED_KEYS:
                out[k] = max(out.get(k, v), v, key=abs)
            else:
                out[k] = max(out.get(k, v), v)
    return out
