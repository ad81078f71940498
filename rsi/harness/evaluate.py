"""Judge one candidate inside the isolated worker: static -> compile -> correctness -> timing -> physics.

Runs in the worker process only (``rsi.harness.worker``); the search process never imports candidate code.
Fail closed: the verdict starts rejected and becomes accepted only when every stage produced its evidence.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
import traceback
from collections.abc import Callable
from typing import Any

import torch

from rsi.contract import ACCEPT, Candidate, OpGroup, Shape, Tolerance, Verdict
from rsi.harness import check
from rsi.harness.static import check_source
from rsi.refs import get_op_group

SEEDS = (0, 1, 2, 3, 4)


class StageError(Exception):
    def __init__(self, stage: str, reason: str, details: dict | None = None):
        super().__init__(reason)
        self.stage, self.reason, self.details = stage, reason, details or {}


def load_candidate(cand: Candidate, workdir: str) -> Callable[..., Any]:
    """Import the candidate's source as a fresh module (Triton needs a real file) and bind its config."""
    path = os.path.join(workdir, f"cand_{cand.hash[:16]}.py")
    with open(path, "w") as f:
        f.write(cand.source)
    name = f"rsi_candidate_{cand.hash[:16]}"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    launch = mod.launch
    config = dict(cand.config)
    return lambda *inputs: launch(*inputs, **config)


def _poison_allocator(device: torch.device, nbytes: int) -> None:
    """Fill soon-to-be-reused allocator blocks with 0xFF (NaN in bf16/fp32) so unwritten outputs show."""
    if device.type == "cuda" and nbytes > 0:
        junk = torch.empty(2 * nbytes + 4096, dtype=torch.uint8, device=device)
        junk.fill_(0xFF)
        del junk


def _snapshot(inputs: tuple) -> list:
    return [check.raw_bytes(t).clone() if torch.is_tensor(t) else t for t in inputs]


def _unchanged(inputs: tuple, snap: list) -> str:
    for i, (t, s) in enumerate(zip(inputs, snap)):
        if torch.is_tensor(t) and not torch.equal(check.raw_bytes(t), s):
            return f"input {i} was modified by the candidate"
    return ""


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def correctness(op: OpGroup, fn: Callable, shapes: list[Shape], device: torch.device,
                seeds=SEEDS) -> dict[str, Any]:
    """Seeds x shapes plus special values; raises StageError on the first failure (with the evidence so far)."""
    per_trial: dict[str, list[dict[str, float]]] = {"seeds": [], "special": []}
    trials = 0
    previous: list[torch.Tensor] = []
    for shape in shapes:
        cases = [(f"seed{s}", s, None) for s in seeds] + [(sc.name, seeds[0], sc) for sc in op.special_cases]
        for label, seed, special in cases:
            inputs = op.make_inputs(shape, seed, device)
            if special is not None:
                inputs = special.apply(inputs, tuple(op.special_inputs))
            where = f"shape {shape.key()} case {label}"
            refs = check.as_tuple(op.reference(*inputs))
            oracles = check.as_tuple(op.oracle(*inputs)) if isinstance(op.tolerance, Tolerance) else (None,) * len(refs)
            snap = _snapshot(inputs)
            _poison_allocator(device, sum(r.numel() * r.element_size() for r in refs))
            try:
                outs = check.as_tuple(fn(*inputs))
                _sync(device)
            except Exception as e:  # noqa: BLE001 - the harness turns any candidate failure into a rejection
                stage = "compile" if trials == 0 else "correctness"
                raise StageError(stage, f"{type(e).__name__} at {where}: {_trim(str(e))}",
                                 {"traceback": _trim(traceback.format_exc(), 4000)})
            bad = _unchanged(inputs, snap)
            if bad:
                raise StageError("correctness", f"{bad} at {where}")
            ok, why = check.check_structure(outs, refs)
            if not ok:
                raise StageError("correctness", f"{why} at {where}")
            why = check.check_aliasing(outs, inputs, previous)
            if why:
                raise StageError("correctness", f"{why} at {where}")
            outs2 = check.as_tuple(fn(*inputs))
            _sync(device)
            for i, (a, b) in enumerate(zip(outs, outs2)):
                if not torch.is_tensor(b) or not check.bitwise_equal(a, b):
                    raise StageError("correctness", f"non-deterministic: two identical calls differ (output {i}) "
                                                    f"at {where}")
            for i, (o, r, orc) in enumerate(zip(outs, refs, oracles)):
                ok, stats, why = check.compare(o, r, orc, op.tolerance)
                if not ok:
                    raise StageError("correctness", f"{why} (output {i}) at {where}", {"error": stats})
                per_trial["seeds" if special is None else "special"].append(stats)
            previous = list(outs)  # kept alive: a later call may not hand the same buffer back
            trials += 1
    return {"trials": trials, "shapes": [s.key() for s in shapes], "seeds": list(seeds),
            "special_cases": [sc.name for sc in op.special_cases], "observed": check.worst(per_trial["seeds"]),
            "observed_special": check.worst(per_trial["special"])}


def _trim(s: str, n: int = 600) -> str:
    s = s.strip()
    return s if len(s) <= n else s[: n // 2] + " ... " + s[-n // 2:]


def _compiled_reference(op: OpGroup, cache: dict) -> Callable:
    if op.name not in cache:
        cache[op.name] = torch.compile(op.reference, dynamic=False)
    return cache[op.name]


def timing(op: OpGroup, fn: Callable, best: Callable | None, device: torch.device, params: dict,
           copy_bw: dict, cache: dict) -> list[dict[str, Any]]:
    """Per shape: candidate interleaved with eager, torch.compile, the current verified kernel, Liger and a
    device-to-device copy of the op's own byte count (the ceiling at that size: run 5 measured copy_ of 137-274 MB
    at 79-94% of the large-buffer copy)."""
    from rsi.harness import timing as T

    rows = []
    for shape in op.shapes:
        sets = [op.make_inputs(shape, 1000 + k, device) for k in range(params.get("input_sets", 2))]
        nbytes = op.bytes_moved(shape)
        impls: dict[str, Callable] = {"candidate": fn, "eager": op.reference,
                                      "compile": _compiled_reference(op, cache),
                                      "copy": T.same_bytes_copy(nbytes, device)}
        if best is not None:
            impls["best"] = best
        liger_sets = None
        if op.liger is not None and params.get("liger", True):
            try:
                import liger_kernel  # noqa: F401  (optional, GPU only)
                liger_sets = [op.liger_prepare(s) for s in sets]
            except ImportError:
                liger_sets = None
        samples = T.time_interleaved(impls, sets, warmup=params.get("warmup", 5), reps=params.get("reps", 40))
        if liger_sets is not None:
            samples.update(_time_liger(op, fn, sets, liger_sets, params))
        row: dict[str, Any] = {"shape": shape.to_json(), "bucket": shape.name, "method": T.METHOD,
                               "warmup": params.get("warmup", 5), "iters": params.get("reps", 40),
                               "bytes": nbytes, "copy_gbps": copy_bw["gbps"]}
        cand = samples["candidate"]
        row.update({k: v for k, v in cand.summary().items()})
        row["gbps"] = nbytes / (row["p50_us"] * 1e-6) / 1e9
        row["pct_copy"] = 100.0 * row["gbps"] / copy_bw["gbps"]
        row["baselines"] = {}
        for name, s in samples.items():
            if name.startswith("candidate"):
                continue
            med, lo, hi = T.ratio_ci(s.times_us, cand.times_us if name != "liger" else samples["candidate_l"].times_us)
            sm = s.summary()
            row["baselines"][name] = {**sm, "speedup": med, "ci95": [lo, hi],
                                      "gbps": nbytes / (sm["p50_us"] * 1e-6) / 1e9,
                                      "pct_copy": 100.0 * nbytes / (sm["p50_us"] * 1e-6) / 1e9 / copy_bw["gbps"]}
        row["hidden_work_gap_us"] = T.hidden_work_gap(
            cand, [s for n, s in samples.items() if n in impls and n != "candidate"])
        rows.append(row)
    return rows


def _time_liger(op, fn, sets, liger_sets, params) -> dict:
    """Liger interleaved with the candidate (same process, same flush), on its own input layout."""
    from rsi.harness import timing as T

    pairs = [(s, ls) for s, ls in zip(sets, liger_sets)]
    impls = {"candidate_l": lambda i: fn(*pairs[i][0]), "liger": lambda i: op.liger(*pairs[i][1])}
    return T.time_interleaved(impls, [(i,) for i in range(len(pairs))], warmup=params.get("warmup", 5),
                              reps=params.get("reps", 40), sync_reps=0)


def physics_gate(rows: list[dict], op: OpGroup, copy_bw: dict, params: dict) -> str:
    factor = params.get("copy_factor", 1.05)
    peak = params.get("tc_peak_tflops")
    for row in rows:
        if row["gbps"] > factor * copy_bw["gbps"]:
            return (f"effective bandwidth {row['gbps']:.0f} GB/s at {row['bucket']} exceeds {factor}x the copy "
                    f"bandwidth measured in this run ({copy_bw['gbps']:.0f} GB/s): L2 residency, skipped work or a "
                    f"miscount, not a faster kernel")
        fl = op.flops(Shape(row["bucket"], row["shape"]["dims"]))
        if peak and fl and fl / (row["p50_us"] * 1e-6) / 1e12 > peak:
            return f"{fl / (row['p50_us'] * 1e-6) / 1e12:.0f} TFLOP/s at {row['bucket']} exceeds tensor-core peak {peak}"
        gap = row["hidden_work_gap_us"]
        if gap > max(50.0, 0.5 * row["p50_us"]):
            return (f"work hidden from the timed stream: a device-wide sync sees {gap:.1f} us more than the events "
                    f"at {row['bucket']} (side stream or asynchronous host work)")
    return ""


def evaluate(job: dict, state: dict) -> dict:
    """Entry point called by the worker. ``state`` persists across jobs in one worker (compiled baselines)."""
    c = job["candidate"]
    cand = Candidate(op=c["op"], source=c["source"], config=c.get("config", {}), parent=c.get("parent"))
    v = Verdict(candidate=cand.hash)
    op = get_op_group(cand.op)
    v.tolerance = op.tolerance.describe()
    backend = job.get("backend", "interpret")
    device = torch.device("cuda" if backend == "cuda" else "cpu")
    if backend == "interpret":
        from rsi.harness.interp import patch_interpreter_rounding

        patch_interpreter_rounding()
    try:
        if not job.get("skip_static", False):
            st = check_source(cand.source)
            if not st.ok:
                raise StageError("static", f"{st.reason} (line {st.line})")
        workdir = state.setdefault("workdir", tempfile.mkdtemp(prefix="rsi-worker-"))
        try:
            fn = load_candidate(cand, workdir)
        except Exception as e:  # noqa: BLE001 - any import failure is a compile rejection
            raise StageError("compile", f"import failed: {type(e).__name__}: {_trim(str(e))}")
        shapes = list(op.interp_shapes) if backend != "cuda" else list(op.shapes) + list(op.odd_shapes)
        corr = correctness(op, fn, shapes, device, tuple(job.get("seeds", SEEDS)))
        v.details["correctness"] = corr
        v.tolerance = {**op.tolerance.describe(), "observed": corr["observed"], "deterministic": True}
        if backend == "cuda":
            if "copy_bw" not in state:
                from rsi.harness.timing import measure_copy_bandwidth

                state["copy_bw"] = measure_copy_bandwidth(device)
            best = None
            if job.get("best"):
                b = job["best"]
                best = load_candidate(Candidate(op=b["op"], source=b["source"], config=b.get("config", {}),
                                                parent=b.get("parent")), workdir)
            params = job.get("timing", {})
            rows = timing(op, fn, best, device, params, state["copy_bw"], state.setdefault("compiled", {}))
            v.timings = rows
            v.details["copy_bw"] = state["copy_bw"]
            why = physics_gate(rows, op, state["copy_bw"], params)
            if why:
                raise StageError("physics", why)
        else:
            v.details["timing"] = "not measured (Triton interpreter: correctness only)"
        v.status, v.stage, v.reason = ACCEPT, "accepted", "correct under the class" + (
            "; timed" if backend == "cuda" else "; timing not measured (interpreter)")
    except StageError as e:
        v.stage, v.reason = e.stage, e.reason
        v.details.update(e.details)
    return v.to_json()
