"""H200 runs 34, 34b and 34c: where the fused producers' time goes (a probe, not a search: nothing here is promoted).

Variants of the swiglu_fp8 and modulate_fp8 templates made by replacing one piece of their source, timed side by
side with the bf16 kernel each producer replaces, in one interleaved loop per op
(rsi.harness.timing: shuffled order per repetition, L2 flushed, CUDA events). Variants marked "wrong" compute
something else on purpose (a speed reference: what the kernel would cost without that piece); the rest are checked
bitwise against the op's reference on the first input set before timing.

    python3 reports/h200/probe34.py --out probe34.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile

import torch

from rsi.harness import check
from rsi.harness import timing as T
from rsi.refs import get_op_group
from rsi.spaces import load_space, template_source

SILU64 = "    return (g64 / (1.0 + tl.exp(-g64))).to(tl.float32).to(tl.bfloat16).to(tl.float32)\n"
REDO = "        s = tl.where(near, back, sf.to(tl.bfloat16).to(tl.float32))\n"
FOLD = ("    for i in tl.static_range(LOG):\n        if (N >> i) > 1:\n"
        "            v = tl.sum(tl.reshape(v, [ROWS, 2, (N >> i) // 2]), 1)\n    return tl.reshape(v, [ROWS])\n")

# name -> (config change, [(old, new) source edits], wrong)
SWIGLU = {
    "lock (FAST 0, QUOT 1, 2 rows, 32 warps)": ({}, [], False),
    "FAST 0, 1 row, 16 warps": ({"ROWS": 1, "num_warps": 16}, [], False),
    "FAST 0, QUOT 0 (run 31's)": ({"ROWS": 1, "num_warps": 16, "QUOT": 0}, [], False),
    "FAST 1, 16 warps": ({"FAST": 1, "ROWS": 1, "num_warps": 16}, [], False),
    "FAST 1, 32 warps": ({"FAST": 1, "ROWS": 1, "num_warps": 32}, [], False),
    "FAST 1, no whole-piece branch (wrong)": ({"FAST": 1, "ROWS": 1, "num_warps": 16},
                                              [("    if n_near > MAXN:\n", "    if MAXN < 0:\n")], True),
    "FAST 1, no redo at all (wrong)": ({"FAST": 1, "ROWS": 1, "num_warps": 16},
                                       [("    if n_near > MAXN:\n", "    if MAXN < 0:\n"),
                                        (REDO, "        s = sf.to(tl.bfloat16).to(tl.float32)\n")], True),
    "no silu, 2 rows, 32 warps (wrong)": ({}, [(SILU64, "    return g.to(tl.float32)\n")], True),
    "no silu, 1 row, 16 warps (wrong)": ({"ROWS": 1, "num_warps": 16},
                                         [(SILU64, "    return g.to(tl.float32)\n")], True),
    "no silu, 1 row, 8 warps (wrong)": ({"ROWS": 1, "num_warps": 8},
                                        [(SILU64, "    return g.to(tl.float32)\n")], True),
    "FAST 0, 1 row, 8 warps": ({"ROWS": 1, "num_warps": 8}, [], False),
    "FAST 0, 2 rows, 16 warps": ({"ROWS": 2, "num_warps": 16}, [], False),
    "FAST 0, 1 row, 4 warps": ({"ROWS": 1, "num_warps": 4}, [], False),
    "FAST 0, 4 rows, 32 warps": ({"ROWS": 4, "num_warps": 32}, [], False),
    "FAST 1, no redo at all, 8 warps (wrong)": ({"FAST": 1, "ROWS": 1, "num_warps": 8},
                                                [("    if n_near > MAXN:\n", "    if MAXN < 0:\n"),
                                                 (REDO, "        s = sf.to(tl.bfloat16).to(tl.float32)\n")], True),
}
MODULATE = {
    "heuristic (QUOT 1)": ({}, [], False),
    "QUOT 0": ({"QUOT": 0}, [], False),
    "8 warps": ({"num_warps": 8}, [], False),
    "2 warps": ({"num_warps": 2}, [], False),
    "2 warps, 2 rows": ({"num_warps": 2, "ROWS": 2}, [], False),
    "4 warps, 2 rows": ({"ROWS": 2}, [], False),
    "one 8192 block (SPLIT 0), 4 warps": ({"SPLIT": 0}, [], False),
    "16 warps": ({"num_warps": 16}, [], False),
    "tl.sum instead of the fold, 2 warps (wrong)": ({"num_warps": 2}, [(FOLD, "    return tl.sum(v, 1)\n")], True),
    "tl.sum instead of the fold (wrong)": ({}, [(FOLD, "    return tl.sum(v, 1)\n")], True),
    "no sum of squares (wrong)": ({}, [("    rstd = tl.div_rn(1.0, tl.sqrt_rn(tl.div_rn(ss, n_cols_f) + eps))\n",
                                        "    rstd = tl.full([ROWS], 1.0, tl.float32)\n")], True),
}


def module(src: str, name: str):
    path = os.path.join(tempfile.mkdtemp(prefix="probe34-"), f"{name}.py")
    with open(path, "w") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def probe(op: str, base_op: str, variants: dict, kernels, reps: int) -> list[dict]:
    g, b = get_op_group(op), get_op_group(base_op)
    space = load_space(op)
    src = template_source(space.template)
    shape = g.shapes[0]
    sets = [g.make_inputs(shape, 2000 + i, "cuda") for i in range(2)]
    ref = g.reference(*sets[0])
    impls, rows = {}, []
    for i, (name, (change, edits, wrong)) in enumerate(variants.items()):
        s = src
        for old, new in edits:
            assert s.count(old) >= 1, (name, old)
            s = s.replace(old, new)
        mod = module(s, f"{op}_v{i}")
        cfg = {**space.heuristic(), **change}
        try:
            out = mod.launch(*sets[0], **cfg)
            torch.cuda.synchronize()
        except Exception as e:   # noqa: BLE001
            rows.append({"variant": name, "config": cfg, "error": f"{type(e).__name__}: {str(e)[:300]}"})
            continue
        same = all(check.bitwise_equal(o, r) for o, r in zip(check.as_tuple(out), check.as_tuple(ref)))
        rows.append({"variant": name, "config": cfg, "wrong_on_purpose": wrong, "bitwise": same})
        impls[name] = lambda *a, _m=mod, _c=cfg: _m.launch(*a, **_c)
    impls[f"{base_op} (locked bf16 kernel)"] = lambda *a: kernels.call_or(base_op, b.reference, *a)
    samples = T.time_interleaved(impls, sets, warmup=3, reps=reps, sync_reps=0, device=torch.device("cuda"))
    times = {k: v.summary() for k, v in samples.items()}
    for r in rows:
        if r["variant"] in times:
            r.update(times[r["variant"]])
    rows += [{"variant": k, **times[k]} for k in impls if k not in variants]
    for r in rows:
        print(f"{op} {shape.name}: {r['variant']:<45} {r.get('p50_us', float('nan')):9.1f} us  "
              f"bitwise={r.get('bitwise', '-')}  {r.get('error', '')}", flush=True)
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="probe34.json")
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--only", choices=("swiglu_fp8", "modulate_fp8"), default=None, help="probe one op (run 34c)")
    a = p.parse_args()
    if not torch.cuda.is_available():
        print("probe34 needs a CUDA GPU", file=sys.stderr)
        return 2
    from rsi.env import capture
    from runtime.kernels import Kernels

    kernels = Kernels("verified", root=".")
    res = {"env": capture(), "command": "python3 reports/h200/probe34.py " + " ".join(sys.argv[1:]),
           "method": T.METHOD,
           **{op: probe(op, base, variants, kernels, a.reps)
              for op, base, variants in (("swiglu_fp8", "swiglu", SWIGLU), ("modulate_fp8", "modulate", MODULATE))
              if a.only in (None, op)}}
    with open(a.out, "w") as f:
        json.dump(res, f, indent=2, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
