"""Probe 92 (thirty-second session; not run by the thirty-third: no device time, then no machine): does host time
enter the CuTe producers' event intervals? Probe 91 found their times scattered with only the timing's spin and
flush queued ahead (modulate_fp8_cute at stage1: 71-245 us) and steady behind a GEMM. Each call here is probe 91's
quiet call (GPU spin of SPIN cycles, L2 flush, events around the kernel) with two more readings:
- ``caught_up``: the judge's ``timed_call`` late flag (since the thirty-third session; an event recorded after the
  flush, queried when the launch returns): True means the GPU had finished everything queued ahead of the start
  event before the host returned from the launch, so host time may be inside the interval; False means the GPU was
  still busy ahead of the start event when the launch returned;
- ``host_us``: the host's time in the launch (perf_counter around it).
SPIN is the judge's 500k cycles (~0.25 ms) or 4M (~2 ms). Kernels as probe 91 (its ``kernels``, through its
``run``), stage1 and full, shuffled order per repetition. If the reading of run 90 c holds, the CuTe calls with
caught_up True are the slow ones and at 4M cycles none is caught up and none is slow.
Usage: python reports/h200/probe92.py OUT.json [REPS]"""
import random
import statistics
import sys
import time

import torch

sys.path.insert(0, "reports/h200")
from probe91 import run

from rsi.harness import timing as T
from rsi.refs import get_op_group

SPINS = (500_000, T.QUEUE_CYCLES)  # the judge's spin to the thirty-second session, and since


def call(fn, args, spin, flush):
    """(event us, caught_up, host us) of one call: the judge's own timed_call, its late flag, and the host's time in
    the launch."""
    host = []

    def launch(*a):
        t0 = time.perf_counter()
        out = fn(*a)
        host.append((time.perf_counter() - t0) * 1e6)
        return out

    us, _, late = T.timed_call(launch, args, flush, spin)
    return us, late, host[0]


def med(xs):
    return statistics.median(xs) if xs else None


def bucket(shape_name, reps, ks, flush):
    ops = {op for op, _ in ks.values()}
    inputs = {}
    for op in ops:
        g = get_op_group(op)
        shape = next(s for s in g.shapes if s.name == shape_name)
        inputs[op] = [g.make_inputs(shape, 100 + i, "cuda") for i in range(2)]
    for op, fn in ks.values():
        for _ in range(3):
            fn(*inputs[op][0])
    torch.cuda.synchronize()
    calls = {(n, spin): [] for n in ks for spin in SPINS}
    rng = random.Random(0)
    for r in range(reps):
        order = [(n, spin) for n in ks for spin in SPINS]
        rng.shuffle(order)
        for n, spin in order:
            op, fn = ks[n]
            calls[(n, spin)].append(call(fn, inputs[op][r % 2], spin, flush))
    row = {"bucket": shape_name, "kernels": {}}
    for (n, spin), cs in calls.items():
        row["kernels"].setdefault(n, {})[str(spin)] = {
            "p50_us": med([c[0] for c in cs]), "caught_up": sum(c[1] for c in cs), "n": len(cs),
            "p50_us_caught_up": med([c[0] for c in cs if c[1]]), "p50_us_ahead": med([c[0] for c in cs if not c[1]]),
            "host_p50_us": med([c[2] for c in cs]), "host_max_us": max(c[2] for c in cs), "calls": cs}
        d = row["kernels"][n][str(spin)]
        print(shape_name, n, spin, "p50", round(d["p50_us"], 1), "caught up", d["caught_up"], "of", d["n"],
              "host p50/max", round(d["host_p50_us"]), round(d["host_max_us"]), flush=True)
    return row


def main():
    run(__doc__, bucket, {"spins": SPINS})

if __name__ == "__main__":
    main()
