"""Figures from each phase's output (the JSON that ``rsi verify --out``, ``rsi bench --out`` and ``rsi run-pipeline
--json`` write).

* verify: per locked kernel and bucket the judge's per-repetition times of the kernel (us) with its A/A (the
  judge's ``aa`` entry); under the interpreter nothing is timed and only the verdict is kept (``verdicts``).
* bench: per op group, bucket and implementation the per-repetition times; every implementation of a row carries
  the row's A/A (the verified kernel timed twice, ``verified_aa``). Only the verified kernel gates: eager,
  torch.compile, Liger, incumbents and the copy are context (a torch or driver change shows there).
* pipeline: per route the steady-state requests (all but the first when there are several) give one sample per
  request of every stage, of the request total, of attention per stage and of each fused op (the runtime's own
  per-op timing), and one sample per denoising step; the first request, the warm-up and the build stages are one
  sample each (shown, never comparable). A/A: consecutive requests (consecutive steps in a single request).
"""

from __future__ import annotations

from typing import Any

from rsi.nightly.compare import aa_of
from rsi.nightly.figure import Figure

BUILD = ("build_text_encoder", "build_dit", "build_vaes", "build_upscaler_adapter", "build_refiner",
         "adaln_precompute")
STAGES = {"two-stage": ("text", "text_refiner", "stage1", "upscale", "adapt", "stage2_text", "stage2_prepare",
                        "stage2", "decode_video", "decode_audio", "mux"),
          "single-stage": ("text", "text_refiner", "denoise", "decode_video", "decode_audio", "mux")}
TOTALS = ("request_total", "request_total_no_mux", "request_wall")
STEPS = {"two-stage": ("stage1_steps", "stage2_steps"), "single-stage": ("denoise_steps",)}


def dims_text(dims: dict[str, int]) -> str:
    """Sorted by name: a figure's key must not depend on the order a JSON writer kept (phase records sort keys)."""
    return ",".join(f"{k}={v}" for k, v in sorted(dims.items()))


def _verify(out: dict[str, Any]) -> list[Figure]:
    figs = []
    for r in out.get("results", []):
        for t in r.get("timings") or []:
            samples = (t.get("samples_us") or {}).get("candidate")
            if not samples:
                continue
            aa = t.get("vs", {}).get("aa")
            figs.append(Figure(f"verify/{r['op']}/{t['bucket']}", r["op"], f"{r['op']} {t['bucket']}: locked kernel "
                               "(rsi verify)", "us", tuple(samples), tuple(aa) if aa else None, True,
                               f"reps={len(samples)}",
                               {"kernel": r["kernel"], "pct_copy": t.get("pct_copy"), "p50_us": t.get("p50_us"),
                                "op": r["op"], "bucket": t["bucket"], "source": "verify"}))
    return figs


def _bench(out: dict[str, Any]) -> list[Figure]:
    figs = []
    for row in out.get("rows", []):
        samples = row.get("samples_us") or {}
        aa = None
        if samples.get("verified") and samples.get("verified_aa"):
            aa = aa_of([samples["verified"], samples["verified_aa"]])
        for impl, xs in samples.items():
            if impl == "verified_aa":
                continue
            stats = row["impls"].get(impl, {})
            figs.append(Figure(f"bench/{row['op']}/{row['bucket']}/{impl}", row["op"],
                               f"{row['op']} {row['bucket']}: {impl} (rsi bench)", "us", tuple(xs), aa,
                               impl == "verified", f"reps={len(xs)} {dims_text(row['dims'])}",
                               {"pct_copy": stats.get("pct_copy"), "p50_us": stats.get("p50_us"), "impl": impl,
                                "op": row["op"], "bucket": row["bucket"], "kernel": row.get("verified_kernel"),
                                "source": "bench"}))
    return figs


def _setup(res: dict[str, Any], route: str) -> str:
    q, s = res["request"], res.get("schedule", {})
    return (f"{q['config']} {q['width']}x{q['height']} {q['duration_s']:g}s {route} steps={s.get('steps')} "
            f"attention={q.get('attention', 'dense')} kernels={q['kernels']} device={res['device'].split(':')[0]}")


def _requests(res: dict[str, Any]) -> tuple[dict, list[dict]]:
    """(first request, steady-state requests): with one request it is both."""
    t = res["timings_s"]
    reqs = t.get("requests") or [t]
    return reqs[0], (reqs[1:] or reqs)


def _pipeline(res: dict[str, Any], route: str) -> list[Figure]:
    t, setup, group = res["timings_s"], _setup(res, route), f"pipeline/{route}"
    first, steady = _requests(res)
    figs: list[Figure] = []

    def per_request(key: str, label: str, rows: list[float], meta: dict | None = None, grp: str = group) -> None:
        figs.append(Figure(f"{group}/{key}", grp, label, "s", tuple(rows), aa_of([[x] for x in rows]), True, setup,
                           {"route": route, "stage": key, **(meta or {})}))

    for name in STAGES[route] + TOTALS:
        rows = [r[name] for r in steady if isinstance(r.get(name), (int, float))]
        if rows:
            per_request(name, f"{route}: {name}", rows)
    for name in STEPS[route]:
        per_req = [r[name] for r in steady if r.get(name)]
        if per_req:
            flat = [x for r in per_req for x in r]
            aa = aa_of(per_req) if len(per_req) > 1 else aa_of([[x] for x in per_req[0]])
            step = name.removesuffix("_steps")
            figs.append(Figure(f"{group}/{step} step", group, f"{route}: one {step} step", "s", tuple(flat), aa, True,
                               setup, {"route": route, "stage": f"{step} step", "layout": [len(r) for r in per_req]}))
    stages = sorted({k for r in steady for k in (r.get("attention") or {}).get("seconds", {})})
    for st in stages:
        per_request(f"attention {st}", f"{route}: attention in {st}",
                    [(r.get("attention") or {}).get("seconds", {}).get(st, 0.0) for r in steady])
    keys = {}
    for r in steady:
        for o in r.get("ops") or []:
            keys.setdefault((o["op"], dims_text(o["dims"])), o)
    for (op, dims), o in keys.items():
        rows = [next((x["seconds"] for x in r.get("ops") or [] if x["op"] == op and dims_text(x["dims"]) == dims),
                     0.0) for r in steady]
        per_request(f"op/{op}/{dims}", f"{route}: {op} [{dims}] per request", rows,
                    {"op": op, "dims": o["dims"], "kernel": o["kernel"], "calls": o["calls"]}, grp=op)
    once = [("first request total", first.get("request_total")),
            ("warm-up", (t.get("warmup") or {}).get("seconds"))] + [(b, t.get(b)) for b in BUILD]
    if route == "single-stage":
        once[0] = ("request (stage sum)", sum(t.get(k, 0.0) for k in STAGES[route] if isinstance(t.get(k), float)))
    for name, v in once:
        if isinstance(v, (int, float)):
            figs.append(Figure(f"{group}/{name}", group, f"{route}: {name}", "s", (float(v),), None, True, setup,
                               {"route": route, "stage": name, "once": True}))
    return figs


def figures(kind: str, name: str, out: dict[str, Any]) -> list[Figure]:
    """The figures of one phase's output (``kind`` as in rsi/nightly/plan.py; ``name`` the phase name)."""
    if kind == "verify":
        return _verify(out)
    if kind == "bench":
        return _bench(out)
    if kind == "pipeline":
        return _pipeline(out, name.split(":", 1)[1])
    return []


def verdicts(out: dict[str, Any]) -> list[dict[str, Any]]:
    """rsi verify's verdict per locked kernel: target, op, kernel, status, reason, whether it was timed."""
    return [{"target": r["target"], "op": r["op"], "kernel": r["kernel"], "status": r["status"],
             "reason": r["reason"], "timed": bool(r.get("timings"))} for r in out.get("results", [])]
