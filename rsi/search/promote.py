"""Promotion: the recursive rule and the provenance record.

A candidate is promoted only if the harness accepted it (correct under the class, timed, under the physics gate)
and, on every shape bucket the space claims:
  * it beats eager beyond the noise margin (lower end of the 95% CI of the paired ratio > 1), and
  * it beats the current best beyond the noise margin: the locked verified kernel if there is one, else
    torch.compile.
One exception, stated in every record that uses it: when torch.compile is the current best and already moves
bytes at >= ``CEILING_PCT`` % of the copy bandwidth measured in the same run, nothing can beat it beyond noise
(ANCHORS.md section e), so *parity* is required instead: median ratio >= ``PARITY_MIN`` and the 95% CI reaching 1.
The ceiling is the large-buffer copy bandwidth or, where it is lower, a copy of the op's own byte count timed
interleaved with the candidate (``copy`` baseline): H200 run 5 measured copy_ of 137-274 MB at 79-94% of the
large-buffer figure, so a torch.compile kernel as fast as that copy is at the ceiling for its size.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

CEILING_PCT = 95.0
PARITY_MIN = 0.98


@dataclass
class Decision:
    promote: bool
    per_bucket: dict[str, str] = field(default_factory=dict)
    rule: str = ""

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


def decide(verdict: dict[str, Any], buckets: tuple[str, ...], has_incumbent: bool) -> Decision:
    if verdict["status"] != "accepted" or not verdict.get("timings"):
        return Decision(False, {"all": "not accepted with timings"})
    rows = {r["bucket"]: r for r in verdict["timings"]}
    d = Decision(True, rule="beat incumbent" if has_incumbent else "beat torch.compile (parity at ceiling)")
    for b in buckets:
        r = rows.get(b)
        if r is None:
            d.promote, d.per_bucket[b] = False, "bucket not timed"
            continue
        base = r["baselines"]
        eager_lo = base["eager"]["ci95"][0]
        if not eager_lo > 1.0:
            d.promote, d.per_bucket[b] = False, f"not faster than eager beyond noise (CI low {eager_lo:.3f})"
            continue
        if has_incumbent:
            best = base.get("best")
            if best is None or not best["ci95"][0] > 1.0:
                lo = best["ci95"][0] if best else float("nan")
                d.promote, d.per_bucket[b] = False, f"not faster than the verified kernel beyond noise (CI low {lo:.3f})"
            else:
                d.per_bucket[b] = f"{best['speedup']:.3f}x the verified kernel (CI {best['ci95'][0]:.3f}-{best['ci95'][1]:.3f})"
            continue
        comp = base["compile"]
        ceiling = _ceiling_text(comp, base.get("copy"))
        if comp["ci95"][0] > 1.0:
            d.per_bucket[b] = f"{comp['speedup']:.3f}x torch.compile (CI low {comp['ci95'][0]:.3f})"
        elif ceiling and comp["speedup"] >= PARITY_MIN and comp["ci95"][1] >= 1.0:
            d.per_bucket[b] = (f"parity with torch.compile at the copy ceiling ({ceiling}): "
                               f"{comp['speedup']:.3f}x, CI {comp['ci95'][0]:.3f}-{comp['ci95'][1]:.3f}")
        else:
            d.promote, d.per_bucket[b] = False, (
                f"not faster than torch.compile beyond noise ({comp['speedup']:.3f}x, CI "
                f"{comp['ci95'][0]:.3f}-{comp['ci95'][1]:.3f}; torch.compile at {comp['pct_copy']:.1f}% of copy)")
    return d


def build_record(*, cand, op_group, verdict: dict, decision: Decision, env: dict, space, run_id: str,
                 reference_sha: str, proxy: bool, seed: int, proposer: str) -> dict[str, Any]:
    from rsi.contract import sha256_text
    from rsi.verified import SCHEMA, now

    timings = []
    for r in verdict["timings"]:
        base = r["baselines"]
        timings.append({
            "shape": r["shape"], "bucket": r["bucket"], "method": r["method"], "warmup": r["warmup"],
            "iters": r["iters"], "p20_us": r["p20_us"], "p50_us": r["p50_us"], "p80_us": r["p80_us"],
            "gbps": r["gbps"], "pct_copy": r["pct_copy"], "copy_gbps": r["copy_gbps"],
            "ref_p50_us": base["eager"]["p50_us"], "speedup": base["eager"]["speedup"], "ci95": base["eager"]["ci95"],
            "vs": {k: {"p50_us": v["p50_us"], "speedup": v["speedup"], "ci95": v["ci95"],
                       "pct_copy": v.get("pct_copy")} for k, v in base.items()},
        })
    return {
        "schema": SCHEMA, "op": cand.op, "candidate_hash": cand.hash, "source_sha256": sha256_text(cand.source),
        "config": dict(cand.config), "proxy": proxy,
        "reference": {"module": f"rsi.refs.{cand.op}:reference", "source_sha256": reference_sha},
        "tolerance": verdict["tolerance"],
        "correctness": verdict["details"].get("correctness", {}),
        "shapes": [{"shape": r["shape"], "dtype": "bfloat16", "bucket": r["bucket"]} for r in verdict["timings"]
                   if r["bucket"] in space.buckets],
        "env": env, "timings": timings,
        "promotion": {"rule": decision.rule, "per_bucket": decision.per_bucket, "ceiling_pct": CEILING_PCT,
                      "parity_min": PARITY_MIN},
        "search": {"space": f"{space.op}.toml@{space.sha256[:12]}", "run_id": run_id, "seed": seed,
                   "parent": cand.parent, "proposer": proposer},
        "verified_at": now(), "verified_by": "rsi search",
    }
