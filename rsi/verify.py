"""``rsi verify``: re-judge every locked verified kernel on this machine with the same harness as the search."""

from __future__ import annotations

from rsi import env as envmod
from rsi.harness.sandbox import Sandbox
from rsi.targets import detect_local
from rsi.verified import env_mismatch, locked_kernel, read_lock


def verify_all(root: str = ".", target: str | None = None, backend: str = "cuda",
               timeout_s: float = 600.0) -> list[dict]:
    lock = read_lock(root)
    if target is None:
        local = detect_local()
        targets = [local.name] if local and backend == "cuda" else list(lock.get("targets", {}))
    else:
        targets = [target]
    env = envmod.capture()
    results = []
    with Sandbox(backend, timeout_s=timeout_s) as sb:
        for tgt in targets:
            for op in sorted(lock.get("targets", {}).get(tgt, {})):
                vk = locked_kernel(root, tgt, op)
                row = {"target": tgt, "op": op, "kernel": vk.path.name}
                if backend == "cuda":
                    hard, _soft = env_mismatch(vk.record, env, vk.source)
                    if hard:
                        results.append(row | {"status": "refused", "reason": "; ".join(hard)})
                        continue
                job = {"candidate": {"op": op, "source": vk.source, "config": vk.record["config"],
                                     "parent": vk.record["search"].get("parent")},
                       "backend": backend, "timing": {"warmup": 5, "reps": 30}}
                v = sb.evaluate(job, vk.record["candidate_hash"])
                results.append(row | {"status": v["status"], "reason": f"[{v['stage']}] {v['reason']}"})
    return results
