"""``rsi verify``: re-judge every locked verified kernel on this machine with the same harness as the search."""

from __future__ import annotations

from rsi import env as envmod
from rsi.harness.judge import JudgeOptions
from rsi.kernel import cute_unavailable
from rsi.search.workers import make_pool
from rsi.targets import detect_local
from rsi.verified import env_mismatch, locked_kernel, read_lock


def verify_all(root: str = ".", target: str | None = None, backend: str = "cuda",
               timeout_s: float = 600.0, reps: int = 30, ops: list[str] | None = None, workers: int = 1,
               ray_address: str | None = None) -> list[dict]:
    """One row per locked kernel (``ops``: only those op groups), in lock order (status ``skipped`` for a CuTe DSL
    kernel off the GPU, ``refused`` for a hard environment mismatch); timed rows keep the judge's
    per-repetition samples (``samples_us``). ``workers``/``ray_address``: judge that many kernels at once
    (rsi.search.workers; each row names its worker)."""
    lock = read_lock(root)
    if target is None:
        local = detect_local()
        targets = [local.name] if local and backend == "cuda" else list(lock.get("targets", {}))
    else:
        targets = [target]
    env = envmod.capture()
    rows: list[dict] = []
    todo = []                                   # (index into rows, locked kernel) to judge
    for tgt in targets:
        for op in sorted(lock.get("targets", {}).get(tgt, {})):
            if ops is not None and op not in ops:
                continue
            vk = locked_kernel(root, tgt, op)
            row = {"target": tgt, "op": op, "kernel": vk.path.name}
            if backend != "cuda" and vk.record.get("kernel_language") == "cute":
                rows.append(row | {"status": "skipped", "reason": cute_unavailable(backend)})
                continue
            if backend == "cuda":
                hard, _soft = env_mismatch(vk.record, env, vk.source)
                if hard:
                    rows.append(row | {"status": "refused", "reason": "; ".join(hard)})
                    continue
            rows.append(row)
            todo.append((len(rows) - 1, vk))
    opts = JudgeOptions(backend=backend, timeout_s=timeout_s, timing={"warmup": 5, "reps": reps},
                        huge=backend == "cuda", target=targets[0] if len(targets) == 1 else None)
    pool = make_pool(workers, ray_address, opts)          # rsi.search.workers: 1 = in this process
    try:
        for i, vk in todo:
            pool.submit(i, vk.candidate, None)
        left = len(todo)
        while left:
            for i, v in pool.results(timeout=1.0):
                rows[i] |= _verdict_row(v)
                left -= 1
    finally:
        pool.close()
    return rows


def _verdict_row(v: dict) -> dict:
    return {"status": v["status"], "reason": f"[{v['stage']}] {v['reason']}", "judge": v["details"].get("judge"),
            "worker": v["details"].get("worker"), "judge_wall_s": v["details"].get("judge_wall_s"),
            "timing_wall_s": v["details"].get("timing_wall_s"),
            "correctness_trials": v["details"].get("correctness", {}).get("trials"),
            # the worst error statistics over the drawn trials and over the special cases (rsi.harness.check.worst)
            "observed": v["details"].get("correctness", {}).get("observed"),
            "observed_special": v["details"].get("correctness", {}).get("observed_special"),
            "timings": [{"bucket": r["bucket"], "p50_us": r["p50_us"], "pct_copy": r["pct_copy"],
                         "vs": {k: [b["speedup"], *b["ci95"]] for k, b in r["baselines"].items()},
                         "samples_us": r.get("samples_us", {})} for r in v.get("timings", [])]}
