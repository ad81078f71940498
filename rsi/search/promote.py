"""Promotion: the recursive rule and the provenance record.

A candidate is promoted only if the harness accepted it (correct under the class, timed, under the physics gate)
and, on every shape bucket the space claims:
  * the A/A noise of the run is known: the candidate is timed twice in the same interleaved loop, and the CI of the
    ratio of its two timings gives the band ``aa_band = max(0, 1 - lo, hi - 1)`` (``rsi.search.stats``); a bucket
    without that measurement is never promoted;
  * it beats eager beyond the noise: the low end of the 95% CI of the paired ratio eager/candidate > 1 + band;
  * it beats the current best beyond the noise (CI low > 1 + band): the locked verified kernel if there is one,
    else torch.compile.
One exception, stated in every record that uses it: when torch.compile is the current best and already moves
bytes at >= ``CEILING_PCT`` % of the copy bandwidth measured in the same run, nothing can beat it beyond noise
(ANCHORS.md section e), so *parity* is required instead: median ratio >= ``PARITY_MIN`` and the 95% CI reaching 1
(and the A/A band known).
The ceiling is the large-buffer copy bandwidth or, where it is lower, a copy of the op's own byte count timed
interleaved with the candidate (``copy`` baseline): H200 run 5 measured copy_ of 137-274 MB at 79-94% of the
large-buffer figure, so a torch.compile kernel as fast as that copy is at the ceiling for its size.
The band of every bucket is written into the decision text and the record (``promotion.aa_band``).

Where the op group declares incumbents (``OpGroup.baselines``, e.g. attention's SDPA backends and FlexAttention),
a bucket must also beat every incumbent the judge timed there beyond the noise (CI low > 1 + band), whatever the
rule above decided from torch.compile or the locked kernel (parity at the ceiling never applies to an incumbent);
the reason names the fastest incumbent (the smallest median ratio) and its ratio. A bucket where none of the declared
incumbents was timed (all dropped by their check, or missing) is not promoted: "no incumbent timed".
An op group that declares incumbents and does not time its reference (``OpGroup.reference_timed`` False: attention,
whose fp32 reference takes ~1 s at 38,248 rows) has no eager or torch.compile entry; its buckets are decided by the
verified kernel (if any) and the incumbents alone, and the reason says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from rsi.search.stats import aa_band, beyond_noise

CEILING_PCT = 95.0
PARITY_MIN = 0.98


@dataclass
class Decision:
    promote: bool
    per_bucket: dict[str, str] = field(default_factory=dict)
    rule: str = ""
    aa_band: dict[str, float] = field(default_factory=dict)  # A/A noise half-width per bucket (where measured)

    def reason(self) -> str:
        return "; ".join(f"{b}: {w}" for b, w in self.per_bucket.items())


def _ceiling_text(comp: dict[str, Any], copy: dict[str, Any] | None) -> str:
    """Why torch.compile counts as at the copy ceiling, or "" when it does not."""
    if comp["pct_copy"] >= CEILING_PCT:
        return f"{comp['pct_copy']:.1f}% of copy"
    if copy is not None and comp["p50_us"] > 0:
        same = 100.0 * copy["p50_us"] / comp["p50_us"]
        if same >= CEILING_PCT:
            return f"{comp['pct_copy']:.1f}% of copy, {same:.1f}% of a copy of the same bytes"
    return ""


def _ci(entry: dict[str, Any]) -> str:
    return f"CI {entry['ci95'][0]:.3f}-{entry['ci95'][1]:.3f}"


def _bucket(base: dict[str, Any], has_incumbent: bool, band: float, untimed_ref: bool = False) -> tuple[bool, str]:
    """(promote, why) for one bucket whose A/A band is known; ``untimed_ref``: the op group declares incumbents and
    its reference is not timed (module docstring)."""
    bt = f"A/A band {band:.3f}"
    need = f"needs CI low > {1.0 + band:.3f}"
    eager = base.get("eager")
    if eager is None and untimed_ref:
        if not has_incumbent:
            return True, "reference not timed (its incumbents bind)"
        best = base.get("best")
        if best is None:
            return False, "the verified kernel was not timed"
        if not beyond_noise(best["ci95"], band):
            return False, (f"not faster than the verified kernel beyond noise ({best['speedup']:.3f}x, {_ci(best)}; "
                           f"{bt}, {need})")
        return True, f"{best['speedup']:.3f}x the verified kernel ({_ci(best)}; {bt})"
    if eager is None:
        return False, "eager not timed"
    if not beyond_noise(eager["ci95"], band):
        return False, (f"not faster than eager beyond noise ({eager['speedup']:.3f}x, {_ci(eager)}; {bt}, "
                       f"{need})")
    if has_incumbent:
        best = base.get("best")
        if best is None:
            return False, "the verified kernel was not timed"
        if not beyond_noise(best["ci95"], band):
            return False, (f"not faster than the verified kernel beyond noise ({best['speedup']:.3f}x, {_ci(best)}; "
                           f"{bt}, {need})")
        return True, f"{best['speedup']:.3f}x the verified kernel ({_ci(best)}; {bt})"
    comp = base.get("compile")
    if comp is None:
        return False, "torch.compile not timed"
    if beyond_noise(comp["ci95"], band):
        return True, f"{comp['speedup']:.3f}x torch.compile ({_ci(comp)}; {bt})"
    ceiling = _ceiling_text(comp, base.get("copy"))
    if ceiling and comp["speedup"] >= PARITY_MIN and comp["ci95"][1] >= 1.0:
        return True, (f"parity with torch.compile at the copy ceiling ({ceiling}): {comp['speedup']:.3f}x, "
                      f"{_ci(comp)}; {bt}")
    return False, (f"not faster than torch.compile beyond noise ({comp['speedup']:.3f}x, {_ci(comp)}; {bt}, {need}; "
                   f"torch.compile at {comp['pct_copy']:.1f}% of copy"
                   + (f", parity needs median >= {PARITY_MIN} and CI reaching 1" if ceiling else "") + ")")


def _incumbents(base: dict[str, Any], declared: tuple[str, ...], band: float) -> tuple[bool, str]:
    """(promote, why) against the declared incumbents timed at one bucket: every one beaten beyond noise."""
    timed = {n: base[n] for n in declared if n in base}
    if not timed:
        return False, f"no incumbent timed (declared {', '.join(declared)}; none ran at this bucket)"

    def ratio(n: str) -> float:  # NaN sorts first: an incumbent without a usable ratio is never beaten
        x = float(timed[n]["speedup"])
        return x if math.isfinite(x) else -math.inf

    fastest = min(timed, key=ratio)
    f = timed[fastest]
    unbeaten = [n for n in timed if not beyond_noise(timed[n]["ci95"], band)]
    if unbeaten:
        n = min(unbeaten, key=ratio)
        return False, (f"not faster than incumbent {n} beyond noise ({timed[n]['speedup']:.3f}x, {_ci(timed[n])}; "
                       f"A/A band {band:.3f}, needs CI low > {1.0 + band:.3f}; fastest incumbent {fastest} "
                       f"{f['speedup']:.3f}x)")
    return True, f"{f['speedup']:.3f}x the fastest incumbent {fastest} ({_ci(f)}; {len(timed)} of {len(declared)} timed)"


def decide(verdict: dict[str, Any], buckets: tuple[str, ...], has_incumbent: bool,
           incumbents: tuple[str, ...] = ()) -> Decision:
    """The rule of the module docstring. ``incumbents``: the names of the op group's declared baselines
    (``OpGroup.baselines``), each of which must be beaten beyond noise where timed."""
    if verdict.get("status") != "accepted" or not verdict.get("timings"):
        return Decision(False, {"all": "not accepted with timings"})
    rows = {r["bucket"]: r for r in verdict["timings"]}
    incumbents = tuple(incumbents)
    rule = ("beat incumbent beyond the A/A band" if has_incumbent
            else "beat torch.compile beyond the A/A band (parity at ceiling)")
    if incumbents:
        rule += f"; and beat every timed incumbent ({', '.join(incumbents)}) beyond the A/A band"
        if any("eager" not in r["baselines"] and "compile" not in r["baselines"] for r in rows.values()):
            rule += " (the reference not timed: the incumbents and the verified kernel decide)"
    d = Decision(True, rule=rule)
    if not buckets:
        return Decision(False, {"all": "the space claims no bucket"}, rule=d.rule)
    for b in buckets:
        r = rows.get(b)
        if r is None:
            d.promote, d.per_bucket[b] = False, "bucket not timed"
            continue
        base = r["baselines"]
        aa = base.get("aa")
        if aa is None or "ci95" not in aa:
            d.promote, d.per_bucket[b] = False, "no A/A measurement"
            continue
        band = aa_band(aa["ci95"])
        if not math.isfinite(band):
            d.promote, d.per_bucket[b] = False, f"no A/A measurement (A/A CI {aa['ci95']} not finite)"
            continue
        d.aa_band[b] = band
        ok, why = _bucket(base, has_incumbent, band, untimed_ref=bool(incumbents) and "eager" not in base
                          and "compile" not in base)
        if ok and incumbents:
            ok, inc_why = _incumbents(base, incumbents, band)
            why = f"{why}; {inc_why}" if ok else inc_why
        d.per_bucket[b] = why
        if not ok:
            d.promote = False
    return d


def build_record(*, cand, op_group, verdict: dict, decision: Decision, env: dict, space, run_id: str,
                 reference_sha: str, proxy: bool, seed: int, proposer: str,
                 template: str | None = None, command: str = "rsi search") -> dict[str, Any]:
    from rsi.contract import sha256_text
    from rsi.verified import SCHEMA, now

    timings = []
    for r in verdict["timings"]:
        base = r["baselines"]
        timings.append({
            "shape": r["shape"], "bucket": r["bucket"], "method": r["method"], "warmup": r["warmup"],
            "iters": r["iters"], "p20_us": r["p20_us"], "p50_us": r["p50_us"], "p80_us": r["p80_us"],
            "gbps": r["gbps"], "pct_copy": r["pct_copy"], "copy_gbps": r["copy_gbps"],
            "late": r.get("late", 0),  # timed calls with host time possibly inside (rsi.harness.timing.timed_call)
            # eager: absent where the op group does not time its reference (OpGroup.reference_timed False)
            "ref_p50_us": base.get("eager", {}).get("p50_us"), "speedup": base.get("eager", {}).get("speedup"),
            "ci95": base.get("eager", {}).get("ci95"),
            "vs": {k: {"p50_us": v.get("p50_us"), "speedup": v["speedup"], "ci95": v["ci95"],
                       "pct_copy": v.get("pct_copy")} for k, v in base.items()},
        })
    return {
        "schema": SCHEMA, "op": cand.op, "candidate_hash": cand.hash, "source_sha256": sha256_text(cand.source),
        "config": dict(cand.config), "proxy": proxy,
        # triton | cute (the judge's static reading of the source) and, for CuTe DSL, the nvidia-cutlass-dsl version
        "kernel_language": verdict["details"].get("kernel_language", "triton"),
        **({"cutlass_dsl": verdict["details"]["cutlass_dsl"]} if "cutlass_dsl" in verdict["details"] else {}),
        "reference": {"module": f"rsi.refs.{cand.op}:reference", "source_sha256": reference_sha},
        "tolerance": verdict["tolerance"],
        "correctness": verdict["details"].get("correctness", {}),
        # how the judge ran: producer sandbox (or none, and whether --unsafe-no-sandbox), seeds, run seed
        "judge": verdict["details"].get("judge", {}),
        # the worker that judged it (rsi.search.workers: id, host, GPU, pid); its baselines were timed there too
        "worker": verdict["details"].get("worker", {}),
        "shapes": [{"shape": r["shape"], "dtype": "bfloat16", "bucket": r["bucket"]} for r in verdict["timings"]
                   if r["bucket"] in space.buckets],
        "env": env, "timings": timings,
        "promotion": {"rule": decision.rule, "per_bucket": decision.per_bucket, "ceiling_pct": CEILING_PCT,
                      "parity_min": PARITY_MIN, "aa_band": dict(decision.aa_band)},
        # per bucket, every declared incumbent: timed (with its check's errors) or dropped with the reason
        "incumbents": verdict["details"].get("incumbents", {}),
        # template: the one of the space the candidate came from (a space may declare several, rsi.spaces)
        "search": {"space": f"{space.op}.toml@{space.sha256[:12]}", **({"template": template} if template else {}),
                   "run_id": run_id, "seed": seed, "parent": cand.parent, "proposer": proposer},
        "verified_at": now(), "verified_by": "rsi search", "command": command,   # the exact command line
    }
