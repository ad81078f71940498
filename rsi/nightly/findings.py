"""A nightly's findings: every figure compared (rsi/nightly/compare.py), and what changed around them.

Regressions (exit code 1): a phase that failed (its command crashed or wrote nothing), a locked kernel the judge
no longer accepts (any verdict but ``accepted``; under the interpreter that is correctness alone), and a gating
figure slower beyond noise against the baseline or the history. Changes (reported, exit 0): the lock (its hash and
the kernel per op), the environment (GPU, driver, CUDA, torch, Triton, Python, commit, dirty flag, host), context
figures (eager, torch.compile, copy) that moved beyond noise, figures the baseline had and tonight lacks.
Improvements: figures faster beyond noise. Notes: phases not run on this machine, figures not comparable.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from rsi.nightly.compare import Comparison, against_baseline, against_history, history_band
from rsi.nightly.figure import Figure
from rsi.nightly.history import NightlyRun

ENV_KEYS = ("gpu_name", "compute_capability", "driver", "cuda", "torch", "triton", "python", "rsi_commit",
            "rsi_dirty", "host")
ORDER = {"regression": 0, "change": 1, "improvement": 2, "note": 3}


@dataclass(frozen=True)
class Finding:
    severity: str           # regression, change, improvement, note
    kind: str               # phase, verify, verify skipped, slower, faster, lock, env, missing, skipped
    what: str
    detail: str

    def to_json(self) -> dict[str, str]:
        return asdict(self)


def comparisons(figs: dict[str, Figure], base: NightlyRun | None, history: list[NightlyRun]) -> list[Comparison]:
    out = []
    for key, f in figs.items():
        past = [h.figures[key] for h in history if key in h.figures]
        if base is not None and key in base.figures:
            same = [p for p in past if p.setup == f.setup]
            out.append(against_baseline(f, base.figures[key], history_band(same)))
        h = against_history(f, past)
        if h is not None:
            out.append(h)
    return out


def _fmt(c: Comparison, unit: str) -> str:
    return (f"{c.ratio:.3f}x the {c.against} (95% CI {c.ci[0]:.3f}-{c.ci[1]:.3f}, {c.n} pairs) beyond the noise band "
            f"{100 * c.band:.1f}% ({c.band_from}); {c.against} median {c.ref_median:.4g} {unit}")


def assess(figs: dict[str, Figure], comps: list[Comparison], phases: list[dict[str, Any]],
           verdicts: list[dict[str, Any]], run: dict[str, Any], base: NightlyRun | None) -> list[Finding]:
    """``run``: tonight's env and lock; ``phases``: the phase records (rsi/nightly/run.py)."""
    out: list[Finding] = []
    skipped: dict[str, list[str]] = {}
    for p in phases:
        if p["status"] == "failed":
            out.append(Finding("regression", "phase", p["name"], f"{p.get('error', '')} (exit {p.get('rc')})"))
        elif p["status"] == "skipped":
            skipped.setdefault(p["error"], []).append(p["name"])
    out += [Finding("note", "skipped", ", ".join(names), why) for why, names in skipped.items()]
    old = {(v["target"], v["op"]): v for v in (base.summary.get("verdicts", []) if base else [])}
    for v in verdicts:
        if v["status"] == "skipped":   # a CuTe DSL kernel where it cannot run (the interpreter): not a regression
            out.append(Finding("note", "verify skipped", f"{v['op']} ({v['kernel']})", v["reason"]))
        elif v["status"] != "accepted":
            was = old.get((v["target"], v["op"]))
            since = f"; baseline: {was['status']}" if was else ""
            out.append(Finding("regression", "verify", f"{v['op']} ({v['kernel']})",
                               f"{v['status']}: {v['reason']}{since}"))
    for c in comps:
        f = figs[c.key]
        if c.status == "slower":
            out.append(Finding("regression" if f.gates else "change", "slower", f.label, _fmt(c, f.unit)))
        elif c.status == "faster":
            out.append(Finding("improvement", "faster", f.label, _fmt(c, f.unit)))
    for sr in run.get("searches", []):                 # --search: on a scratch copy of the lock (DIR/search-root)
        what = f"{sr['candidates']} candidates, {sr['accepted']} accepted, {sr['promoted']} promoted in DIR/search-root"
        if sr["promoted"]:
            out.append(Finding("improvement", "search", sr["name"], what + ": a faster kernel than the lock's (the "
                               "product's lock is untouched; search on the product root to promote it)"))
        else:
            out.append(Finding("note", "search", sr["name"], what + (" (interpreter: correctness only)"
                                                                     if sr["backend"] != "cuda" else "")))
    for r in run.get("resumes", []):                   # a resume in another environment: say what moved
        diffs = [f"{k}: {run['env'].get(k)} -> {r['env'].get(k)}" for k in ENV_KEYS
                 if run["env"].get(k) != r["env"].get(k)]
        if r["lock"].get("sha256") != run["lock"].get("sha256"):
            diffs.append(f"lock sha256 {str(run['lock'].get('sha256'))[:12]} -> {str(r['lock'].get('sha256'))[:12]}")
        if diffs:
            out.append(Finding("change", "env", "environment of a resume", "; ".join(diffs)))
    if base is not None:
        out += _changes(run, base)
        ran = {p["name"] for p in phases if p["status"] == "ok"}
        for key in sorted(set(base.figures) - set(figs)):
            if phase_of(key) in ran:                  # a phase tonight did not run is not a missing figure
                out.append(Finding("change", "missing", base.figures[key].label,
                                   "measured by the baseline, not by tonight's phase " + phase_of(key)))
    return sorted(out, key=lambda f: ORDER[f.severity])


def phase_of(key: str) -> str:
    """The phase that measures a figure: verify/<op>/.. -> verify:<op>, pipeline/<route>/.. -> pipeline:<route>."""
    kind, name = key.split("/")[:2]
    return f"{kind}:{name}"


def _changes(run: dict[str, Any], base: NightlyRun) -> list[Finding]:
    out = []
    lock, old = run.get("lock", {}), base.summary.get("lock", {})
    if lock.get("sha256") != old.get("sha256"):
        per_op = []
        a, b = old.get("kernels", {}), lock.get("kernels", {})
        for tgt in sorted(set(a) | set(b)):
            for op in sorted(set(a.get(tgt, {})) | set(b.get(tgt, {}))):
                x, y = a.get(tgt, {}).get(op), b.get(tgt, {}).get(op)
                if x != y:
                    per_op.append(f"{tgt} {op}: {x or 'none'} -> {y or 'none'}")
        out.append(Finding("change", "lock", "verified_kernels/LOCK.json",
                           f"sha256 {str(old.get('sha256'))[:12]} -> {str(lock.get('sha256'))[:12]}"
                           + (": " + "; ".join(per_op) if per_op else "")))
    env, benv = run.get("env", {}), base.env
    diffs = [f"{k}: {benv.get(k)} -> {env.get(k)}" for k in ENV_KEYS if benv.get(k) != env.get(k)]
    if diffs:
        out.append(Finding("change", "env", "environment", "; ".join(diffs)))
    return out


def exit_code(findings: list[Finding]) -> int:
    return 1 if any(f.severity == "regression" for f in findings) else 0
