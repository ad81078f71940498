"""Probe 73, producers (prepared and run in the nineteenth session; outside the judge, not a verdict): the fused FP8
producers' new realizations against the bf16 ops they replace (issue 12: "no slower than the bf16 op + 5%").
- swiglu_fp8 with TABLE 1 / 2 (silu_c looked up, rsi/templates/swiglu_fp8.py) at four (ROWS, warps) shapes;
- modulate_fp8 and gate_residual_modulate_fp8 with the eight-piece templates (rsi/templates/*_warp.py) at 1, 2 and
  4 warps.
One interleaved loop per op group and bucket (rsi.harness.timing: shuffled order, L2 flushed before every call):
the bf16 op's verified kernel of the h200 lock, the fp8 producer's locked kernel, the variants (each a plain
launch: no runtime wrapper around any of them). Each variant's
bytes and scales are checked against the op's reference on the first input set before it is timed (a variant that
differs is reported and not timed). Ratios: paired bf16 op / variant, median and 95% CI (> 1: the variant is
faster; the issue's goal is >= 1 / 1.05 = 0.952).
--second: the second sweep (run 73 c): RELOAD (the row read again instead of held) at the first sweep's fastest
shapes and a few beside them, and STREAM 0 for the eight-piece templates.
Usage: python reports/h200/probe73_producers.py OUT.json [REPS] [--second]"""
import json
import sys

import torch

from rsi.harness import check
from rsi.harness import timing as T
from rsi.refs import get_op_group
from rsi.search.stats import paired_ratio_ci
from rsi.spaces import load_space
from rsi.templates import gate_residual_modulate_fp8_warp, modulate_fp8_warp, swiglu_fp8
from rsi.verified import locked_kernel

SW = load_space("swiglu_fp8").heuristic()
SECOND = len(sys.argv) > 3 and sys.argv[3] == "--second"   # the second sweep: RELOAD beside the first's fastest
if not SECOND:
    VARIANTS = {
        "swiglu_fp8": {f"table{t}_r{r}_w{w}": (swiglu_fp8.launch, {**SW, "TABLE": t, "ROWS": r, "num_warps": w})
                       for t in (1, 2) for r, w in ((1, 8), (1, 16), (2, 16), (2, 32))},
        "modulate_fp8": {f"warp_w{w}": (modulate_fp8_warp.launch, {"num_warps": w, "STREAM": 1, "QUOT": 1})
                         for w in (1, 2, 4)},
        "gate_residual_modulate_fp8": {f"warp_w{w}": (gate_residual_modulate_fp8_warp.launch,
                                                      {"num_warps": w, "STREAM": 1, "QUOT": 1}) for w in (1, 2, 4)},
    }
else:
    VARIANTS = {
        "swiglu_fp8": {f"table{t}_r1_w{w}_reload{rl}": (swiglu_fp8.launch, {**SW, "TABLE": t, "ROWS": 1,
                                                                             "num_warps": w, "RELOAD": rl})
                       for t, w, rl in ((2, 8, 0), (2, 8, 1), (2, 16, 1), (1, 8, 1), (1, 16, 1))},
        **{op: {f"warp_w{w}_s{st}_reload{rl}": (fn, {"num_warps": w, "STREAM": st, "QUOT": 1, "RELOAD": rl})
                for w, st, rl in ((1, 1, 0), (1, 0, 0), (1, 1, 1), (2, 1, 1), (4, 1, 1))}
           for op, fn in (("modulate_fp8", modulate_fp8_warp.launch),
                          ("gate_residual_modulate_fp8", gate_residual_modulate_fp8_warp.launch))},
    }
BF16_OP = {"swiglu_fp8": "swiglu", "modulate_fp8": "modulate", "gate_residual_modulate_fp8": "gate_residual_modulate"}


def same(outs, refs) -> bool:
    return all(check.bitwise_equal(o, r) for o, r in zip(check.as_tuple(outs), check.as_tuple(refs)))


def locked(op):
    """The h200 lock's kernel of op (a plain function: its launch bound to the recorded config) and its name; the
    same kernels on an H100 (sm_90 both)."""
    vk = locked_kernel(".", "h200", op)
    return vk.load(), vk.path.name


def bucket_row(op, shape, reps):
    g, base = get_op_group(op), BF16_OP[op]
    sets = [g.make_inputs(shape, 100 + i, "cuda") for i in range(2)]
    ref = g.reference(*sets[0])
    (fb, nb), (fl, nl) = locked(base), locked(op)
    impls = {base: fb, f"{op}_locked": fl}
    row = {"op": op, "bucket": shape.name, "dims": shape.dims, "bitwise": {}}
    for name, (fn, cfg) in VARIANTS[op].items():
        try:
            ok = same(fn(*sets[0], **cfg), ref)
        except Exception as e:   # noqa: BLE001 - a probe: record the failure and go on
            ok = f"{type(e).__name__}: {e}"[:300]
        row["bitwise"][name] = ok
        if ok is True:
            impls[name] = lambda *a, f=fn, c=cfg: f(*a, **c)
    row["bitwise"][f"{op}_locked"] = same(impls[f"{op}_locked"](*sets[0]), ref)
    for f in impls.values():   # compile outside the timed loop
        f(*sets[0])
    torch.cuda.synchronize()
    stats = T.time_interleaved(impls, sets, warmup=2, reps=reps, sync_reps=0)
    b = stats[base].times_us
    row["p50_us"] = {n: x.summary()["p50_us"] for n, x in stats.items()}
    row["bf16_over"] = {n: paired_ratio_ci(b, x.times_us) for n, x in stats.items()}
    row["impl"] = {base: nb, f"{op}_locked": nl}
    print(op, shape.name, {n: (round(p, 1), round(row["bf16_over"][n][0], 3)) for n, p in row["p50_us"].items()},
          {n: ok for n, ok in row["bitwise"].items() if ok is not True}, flush=True)
    return row


def main():
    out_path = sys.argv[1]
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 15
    res = {"note": __doc__, "torch": torch.__version__, "device": torch.cuda.get_device_name(), "variants":
           {op: {n: c for n, (_, c) in v.items()} for op, v in VARIANTS.items()}, "rows": []}
    for op in VARIANTS:
        for shape in get_op_group(op).shapes:
            res["rows"].append(bucket_row(op, shape, reps))
            with open(out_path, "w") as f:
                json.dump(res, f, indent=1, default=str)


if __name__ == "__main__":
    main()
