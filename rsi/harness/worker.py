"""The isolated worker process: reads one job per line on stdin, answers one verdict per line.

Candidate code runs only here. The protocol uses a private duplicate of the original stdout; the candidate's own
prints go to stderr. Before and after every job the worker checks that the harness's timers, sync points and
comparison functions are the objects it started with; a candidate that patched any of them is rejected and the
worker exits, so no later candidate is judged by a tampered harness.
"""

from __future__ import annotations

import json
import os
import sys


def _guarded() -> dict[str, object]:
    import time

    import torch

    from rsi.harness import check, timing

    objs = {
        "time.perf_counter": time.perf_counter, "time.time": time.time, "torch.equal": torch.equal,
        "torch.compile": torch.compile, "torch.Tensor.__eq__": torch.Tensor.__eq__,
        "check.compare": check.compare, "check.bitwise_equal": check.bitwise_equal,
        "timing.time_interleaved": timing.time_interleaved, "timing.Flusher.__call__": timing.Flusher.__call__,
    }
    if hasattr(torch, "cuda"):
        objs.update({"torch.cuda.Event": torch.cuda.Event, "torch.cuda.synchronize": torch.cuda.synchronize,
                     "torch.cuda.Event.record": torch.cuda.Event.record,
                     "torch.cuda.Event.elapsed_time": torch.cuda.Event.elapsed_time,
                     "torch.cuda.Event.synchronize": torch.cuda.Event.synchronize})
    return objs


def _tampered(snapshot: dict[str, object]) -> str:
    now = _guarded()
    changed = [k for k, v in snapshot.items() if now.get(k) is not v]
    return ", ".join(changed)


def main() -> int:
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    from rsi.harness.evaluate import evaluate

    snapshot = _guarded()
    state: dict = {}
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        result = evaluate(job, state)
        patched = _tampered(snapshot)
        if patched:
            result.update(status="rejected", stage="static",
                          reason=f"tampered with the harness (replaced {patched})")
        proto.write(json.dumps(result) + "\n")
        proto.flush()
        broken = job.get("backend") == "cuda" and result["status"] != "accepted" and (
            "CUDA" in result["reason"] or "illegal" in result["reason"].lower())
        if patched or broken:
            return 3  # the parent starts a fresh worker for the next candidate
    return 0


if __name__ == "__main__":
    sys.exit(main())
