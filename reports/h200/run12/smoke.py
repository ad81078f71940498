"""Run 12: the two-process judge on the H200 (see run12.sh)."""
import json
import sys
import time

from rsi.contract import Candidate
from rsi.harness import jail
from rsi.harness.judge import Judge, JudgeOptions

HONEST = open("reports/h200/run12/honest_swiglu.py").read()
# skips the work after 200 calls (past the correctness phase): the timed-output sample must catch it
COUNTER = HONEST.replace("def launch(x):", "_N = [0]\n\n\ndef launch(x):\n    _N[0] += 1\n    if _N[0] > 200:\n"
                                           "        return K.empty((x.shape[0], x.shape[1] // 2), dtype=x.dtype, "
                                           "device=x.device)")
print("bwrap:", jail.available(), flush=True)
out = {"bwrap": jail.available()}
with Judge(JudgeOptions(backend="cuda", timing={"warmup": 3, "reps": 12, "input_sets": 2}, drawn_shapes=1)) as j:
    for name, src, skip in (("honest", HONEST, False), ("counter_cheat", COUNTER, True)):
        j.opt.skip_static = skip
        t0 = time.perf_counter()
        v = j.evaluate(Candidate("swiglu", src))
        wall = time.perf_counter() - t0
        print(name, v["status"], v["stage"], v["reason"][:600], f"{wall:.1f}s", flush=True)
        for r in v["timings"]:
            print("  ", r["bucket"], f"{r['p50_us']:.1f}us", f"{r['pct_copy']:.0f}%",
                  {k: round(b["speedup"], 3) for k, b in r["baselines"].items()},
                  "wall_min_ratio", round(r["wall_min_ratio"], 2), "checked", r["timed_outputs_checked"], flush=True)
        out[name] = {"status": v["status"], "stage": v["stage"], "reason": v["reason"], "wall_s": wall,
                     "details": {k: v["details"].get(k) for k in ("judge", "judge_wall_s", "timing_wall_s",
                                                                  "timed_outputs_checked", "correctness")},
                     "timings": v["timings"]}
json.dump(out, open(sys.argv[1], "w"), indent=1, default=str)
