"""Probe 91 (thirty-second session; outside the judge, not a verdict): the fused producers and the bf16 ops they
replace, each timed right after the work a runtime runs before it. Probe 90 found modulate_fp8_cute slower in the
calls after the judge's eager reference (13.5 ms at full: 236 us quiet, 270-306 us in the three calls after it)
while the locked Triton kernel was not. Here every timed call is preceded, in the same stream and without a gap, by
one of:
- quiet: nothing (probe 88's setting);
- eager: modulate_fp8's eager reference at the bucket (the judge's neighbour);
- gemm: a bf16 matrix product of fc2's shape at the bucket's rows ([R, 14336] x [14336, 5376]: what runs before
  the next block's modulate in an H3 block).
then a GPU spin of SPIN cycles between two events (its duration gives the SM clock: cycles / us = MHz), the
L2 flush, and the events around the kernel. Each kernel's outputs are checked bitwise against its op's reference
first (the first input set). Kernels: the h200 lock's bf16 modulate and gate_residual_modulate, the
lock's modulate_fp8 and gate_residual_modulate_fp8 (Triton), and the CuTe producers (128 x 8 and 256 x 4), each in
a freshly shuffled order per repetition and condition. Ratios: bf16 op / producer, paired by repetition, per
condition (the issue's goal: >= 0.952).
Usage: python reports/h200/probe91.py OUT.json [REPS]"""
import json
import random
import statistics
import sys

import torch

from rsi.harness import check
from rsi.harness import timing as T
from rsi.refs import get_op_group
from rsi.search.stats import paired_ratio_ci
from rsi.templates import gate_residual_modulate_fp8_cute, modulate_fp8_cute
from rsi.verified import locked_kernel

SPIN = 500_000  # the judge's QUEUE_CYCLES when run 90 c ran (4M since the thirty-third session)

FFN, HIDDEN = 14336, 5376
PAIRS = {"modulate_fp8": "modulate", "gate_residual_modulate_fp8": "gate_residual_modulate"}
CUTE = {"modulate_fp8": (modulate_fp8_cute.launch, {"THREADS": 128, "CHUNKS": 8}),
        "gate_residual_modulate_fp8": (gate_residual_modulate_fp8_cute.launch, {"THREADS": 256, "CHUNKS": 4})}


def kernels():
    """name -> (op group, function)."""
    out = {}
    for op, base in PAIRS.items():
        out[base] = (base, locked_kernel(".", "h200", base).load())
        out[f"{op}_locked"] = (op, locked_kernel(".", "h200", op).load())
        fn, cfg = CUTE[op]
        out[f"{op}_cute"] = (op, lambda *a, f=fn, c=cfg: f(*a, **c))
    return out


def timed(fn, args, pre, flush):
    """(kernel us, spin us) of one call after ``pre`` (queued, no gap)."""
    if pre is not None:
        pre()
    e0, e1, s, e = (torch.cuda.Event(enable_timing=True) for _ in range(4))
    e0.record()
    torch.cuda._sleep(SPIN)
    e1.record()
    flush()
    s.record()
    fn(*args)
    e.record()
    e.synchronize()
    return s.elapsed_time(e) * 1e3, e0.elapsed_time(e1) * 1e3


def bucket(shape_name, reps, ks, flush):
    groups = {op: get_op_group(op) for op in {*PAIRS, *PAIRS.values()}}
    shape = {op: next(s for s in g.shapes if s.name == shape_name) for op, g in groups.items()}
    inputs = {op: [g.make_inputs(shape[op], 100 + i, "cuda") for i in range(2)] for op, g in groups.items()}
    rows = shape["modulate_fp8"].dims["rows"]
    a = torch.randn(rows, FFN, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(FFN, HIDDEN, device="cuda", dtype=torch.bfloat16)
    mref = groups["modulate_fp8"].reference
    pres = {"quiet": None, "eager": lambda: mref(*inputs["modulate_fp8"][1]), "gemm": lambda: torch.mm(a, b)}
    bitwise = {}
    for name, (op, fn) in ks.items():   # compile and warm outside the loop; each kernel against its reference
        for _ in range(3):
            fn(*inputs[op][0])
        ref = groups[op].reference(*inputs[op][0])
        bitwise[name] = all(check.bitwise_equal(o, r) for o, r in zip(check.as_tuple(fn(*inputs[op][0])),
                                                                       check.as_tuple(ref)))
        del ref
    for p in pres.values():
        if p is not None:
            p()
    torch.cuda.synchronize()
    res = {c: {n: [] for n in ks} for c in pres}
    mhz = {c: [] for c in pres}
    rng = random.Random(0)
    for r in range(reps):
        conds = list(pres)
        rng.shuffle(conds)
        for c in conds:
            order = list(ks)
            rng.shuffle(order)
            for n in order:
                op, fn = ks[n]
                us, spin = timed(fn, inputs[op][r % 2], pres[c], flush)
                res[c][n].append(us)
                mhz[c].append(SPIN / spin)
    row = {"bucket": shape_name, "rows": rows, "bitwise": bitwise, "conditions": {}}
    print(shape_name, "bitwise", bitwise, flush=True)
    for c in pres:
        p50 = {n: statistics.median(v) for n, v in res[c].items()}
        ratio = {}
        for op, base in PAIRS.items():
            for n in (f"{op}_locked", f"{op}_cute"):
                ratio[n] = paired_ratio_ci(res[c][base], res[c][n])
        row["conditions"][c] = {"p50_us": p50, "bf16_over": ratio, "sm_mhz_p50": statistics.median(mhz[c]),
                                "sm_mhz_min": min(mhz[c]), "times_us": res[c]}
        print(shape_name, c, f"{statistics.median(mhz[c]):.0f} MHz", {n: round(v, 1) for n, v in p50.items()},
              {n: round(v[0], 3) for n, v in ratio.items()}, flush=True)
    return row


def run(note, bucket_fn, extra):
    """OUT.json [REPS] from argv: ``bucket_fn(name, reps, kernels(), flush)`` at stage1 and full, written after each
    (probe 92 runs its own buckets through this)."""
    out_path = sys.argv[1]
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 15
    ks, flush = kernels(), T.Flusher("cuda")
    res = {"note": note, "torch": torch.__version__, "device": torch.cuda.get_device_name(), "reps": reps, **extra,
           "rows": []}
    for name in ("stage1", "full"):
        res["rows"].append(bucket_fn(name, reps, ks, flush))
        with open(out_path, "w") as f:
            json.dump(res, f, indent=1)


def main():
    run(__doc__, bucket, {"cute": {op: c for op, (_, c) in CUTE.items()}})


if __name__ == "__main__":
    main()
