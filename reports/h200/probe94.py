"""Probe 94 (thirty-fourth session; outside the judge, not a verdict): K.cute_launch's two paths for the CuTe
producers (probe 91's CUTE configs), at stage1 and full:
- default: a CuTe tensor made per tensor per call (``from_dlpack``), the stream as a ``CUstream``;
- tvm-ffi (``RSI_CUTE_FFI=1``, rsi.kernel._launch_ffi): compiled with ``--enable-tvm-ffi``, called with the torch
  tensors, torch's stream from the environment.
Readings per path: the outputs bitwise against the op's reference (and so against each other); ``host_us``, the
host's time in each of LAUNCHES launches queued back to back behind a GPU spin (nothing waits on the GPU); and
the event time of REPS calls through the judge's own ``timed_call`` (its spin, flush and late flag), both paths
in a shuffled order per repetition, with the paired ratio default / tvm-ffi.
Usage: python reports/h200/probe94.py OUT.json [REPS]"""
import json
import os
import random
import statistics
import sys
import time

import torch

sys.path.insert(0, "reports/h200")
from probe91 import CUTE

from rsi import kernel as K
from rsi.harness import check
from rsi.harness import timing as T
from rsi.refs import get_op_group
from rsi.search.stats import paired_ratio_ci

LAUNCHES = 100
PATHS = {"default": "0", "tvm-ffi": "1"}


def launch(path, fn, cfg, args):
    os.environ[K.CUTE_FFI_ENV] = PATHS[path]
    return fn(*args, **cfg)


def host_times(path, fn, cfg, args):
    """Host us of each of LAUNCHES launches, queued behind a spin long enough to hold them all."""
    torch.cuda._sleep(T.QUEUE_CYCLES * 40)
    out = []
    for _ in range(LAUNCHES):
        t0 = time.perf_counter()
        launch(path, fn, cfg, args)
        out.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    return out


def bucket(op, shape_name, reps, flush):
    g = get_op_group(op)
    shape = next(s for s in g.shapes if s.name == shape_name)
    inputs = [g.make_inputs(shape, 100 + i, "cuda") for i in range(2)]
    fn, cfg = CUTE[op]
    ref = check.as_tuple(g.reference(*inputs[0]))
    row = {"op": op, "bucket": shape_name, "config": cfg, "paths": {}}
    for path in PATHS:
        for _ in range(3):
            launch(path, fn, cfg, inputs[0])
        outs = check.as_tuple(launch(path, fn, cfg, inputs[0]))
        torch.cuda.synchronize()
        hs = host_times(path, fn, cfg, inputs[0])
        row["paths"][path] = {"bitwise": all(check.bitwise_equal(o, r) for o, r in zip(outs, ref)),
                              "host_p50_us": statistics.median(hs), "host_max_us": max(hs), "host_us": hs,
                              "times_us": [], "late": 0}
    rng = random.Random(0)
    for r in range(reps):
        order = list(PATHS)
        rng.shuffle(order)
        for path in order:
            us, _, late = T.timed_call(lambda *a, p=path: launch(p, fn, cfg, a), inputs[r % 2], flush)
            row["paths"][path]["times_us"].append(us)
            row["paths"][path]["late"] += bool(late)
    for path, d in row["paths"].items():
        d["p50_us"] = statistics.median(d["times_us"])
        print(op, shape_name, path, "bitwise", d["bitwise"], "host p50/max", round(d["host_p50_us"], 1),
              round(d["host_max_us"], 1), "event p50", round(d["p50_us"], 1), "late", d["late"], flush=True)
    row["default_over_ffi"] = paired_ratio_ci(row["paths"]["default"]["times_us"], row["paths"]["tvm-ffi"]["times_us"])
    print(op, shape_name, "default / tvm-ffi", [round(x, 3) for x in row["default_over_ffi"]], flush=True)
    return row


def main():
    out_path, reps = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 20
    flush = T.Flusher("cuda")
    res = {"note": __doc__, "torch": torch.__version__, "device": torch.cuda.get_device_name(), "reps": reps,
           "launches": LAUNCHES, "cutlass_dsl": K.cutlass_dsl_version(), "rows": []}
    for op in CUTE:
        for name in ("stage1", "full"):
            res["rows"].append(bucket(op, name, reps, flush))
            with open(out_path, "w") as f:
                json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
