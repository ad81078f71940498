"""H200 run 5, exploration: every valid config of a search space timed against torch.compile, plus copy_ at the
op's own byte count and a launch-overhead check (the same calls with the GPU held busy before each flush).

Timing only (no correctness: the search's harness does that); all timing goes through rsi.harness.timing.
Usage: python3 reports/h200/run5/sweep.py OUT.json [op[@AXIS=V,AXIS=V] ...]   (ops default: modulate head_merge
gate_residual_modulate qk_norm_rope; ``@...`` keeps only the configs with those axis values). Results are written
after every shape, so a cut-off run keeps what it did. Run 8 reuses it with filters (reports/h200/run8.sh).
"""

import functools
import importlib
import json
import sys
import time

import torch

from rsi import env as envmod
from rsi.harness import timing as T
from rsi.refs import get_op_group
from rsi.spaces import load_space

QUEUE_CYCLES = 2_000_000  # ~1 ms of GPU spin before each flush: the host is surely ahead of the GPU


def main(out_path, ops):
    dev = torch.device("cuda")
    res = {"env": envmod.capture(), "copy": T.measure_copy_bandwidth(dev), "ops": {}, "copy_same_bytes": {}}
    copy_gbps = res["copy"]["gbps"]
    print(f"copy {copy_gbps:.0f} GB/s", flush=True)
    for spec in ops:
        name, _, where = spec.partition("@")
        fixed = dict(kv.split("=") for kv in where.split(",")) if where else {}
        op, space = get_op_group(name), load_space(name)
        launch = importlib.import_module(f"rsi.templates.{space.template}").launch
        compiled = torch.compile(op.reference, dynamic=False)
        configs = [c for c in space.enumerate() if all(str(c.get(k)) == v for k, v in fixed.items())]
        res["ops"][name] = {}
        for shape in op.shapes:
            if shape.name not in space.buckets:
                continue
            t0 = time.time()
            nbytes = op.bytes_moved(shape)
            sets = [op.make_inputs(shape, 1000 + k, dev) for k in range(2)]
            src = torch.empty(nbytes // 4, dtype=torch.bfloat16, device=dev).normal_()
            dst = torch.empty_like(src)
            impls = {"compile": compiled, "copy_same_bytes": lambda *a, d=dst, s_=src: d.copy_(s_)}
            failed = {}
            for i, c in enumerate(configs):
                fn = functools.partial(launch, **c)
                try:  # compile here; a config the GPU cannot run is reported, not fatal
                    fn(*sets[0])
                    impls[f"cfg{i}"] = fn
                except Exception as e:  # noqa: BLE001
                    failed[str(c)] = f"{type(e).__name__}: {str(e)[:200]}"
            s = T.time_interleaved(impls, sets, warmup=2, reps=15, sync_reps=0, device=dev)
            rows = {k: v.summary()["p50_us"] for k, v in s.items()}
            ranked = sorted((k for k in rows if k.startswith("cfg")), key=rows.get)
            top = ranked[:3]
            check = {k: impls[k] for k in ["compile", "copy_same_bytes"] + top}
            s1 = T.time_interleaved(check, sets, warmup=2, reps=30, sync_reps=0, device=dev)
            s2 = T.time_interleaved(check, sets, warmup=2, reps=30, sync_reps=0, device=dev, queue_cycles=QUEUE_CYCLES)

            def pct(us, nb=nbytes):
                return 100.0 * nb / (us * 1e-6) / 1e9 / copy_gbps

            out = {"bytes": nbytes, "dims": dict(shape.dims), "seconds": time.time() - t0, "failed": failed,
                   "all": [{"config": configs[int(k[3:])], "p50_us": rows[k], "pct_copy": pct(rows[k])}
                           for k in ranked],
                   "compile_p50_us": rows["compile"], "compile_pct": pct(rows["compile"]),
                   "copy_same_bytes_p50_us": rows["copy_same_bytes"], "copy_same_bytes_pct": pct(rows["copy_same_bytes"]),
                   "recheck": {k: {"config": configs[int(k[3:])] if k.startswith("cfg") else k,
                                   "p50_us": s1[k].summary()["p50_us"], "pct_copy": pct(s1[k].summary()["p50_us"]),
                                   "queued_p50_us": s2[k].summary()["p50_us"],
                                   "queued_pct_copy": pct(s2[k].summary()["p50_us"])} for k in check}}
            res["ops"][name][shape.name] = out
            best = out["recheck"][top[0]]
            print(f"{name} {shape.name}: {len(configs)} configs in {out['seconds']:.0f}s; compile "
                  f"{out['compile_pct']:.1f}%, copy_ same bytes {out['copy_same_bytes_pct']:.1f}%, best "
                  f"{best['pct_copy']:.1f}% (queued {best['queued_pct_copy']:.1f}%) {best['config']}", flush=True)
            for k, v in out["recheck"].items():
                print(f"    {k:16s} {v['p50_us']:8.1f} us {v['pct_copy']:5.1f}%  queued {v['queued_p50_us']:8.1f} us "
                      f"{v['queued_pct_copy']:5.1f}%", flush=True)
            with open(out_path, "w") as f:
                json.dump(res, f, indent=1, default=str)
            del sets, impls, check, src, dst
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:] or ["modulate", "head_merge", "gate_residual_modulate", "qk_norm_rope"])
