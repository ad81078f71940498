"""The judge's added wall time per candidate on the CPU (Triton interpreter), old and new side by side.

Old: the in-process worker judge of commit f184865 (``.old/`` = ``git archive f184865 rsi search_spaces
verified_kernels``), one long-lived worker. New: this tree's two-process judge (a fresh sandboxed producer per
candidate). Both judge the swiglu, modulate and qkv_pack templates at their heuristic configs, alternately, 3 times
each; the JSON keeps every wall time and the trial counts. Run from the repo root:
``TRITON_INTERPRET=1 python reports/cpu/judge_overhead.py reports/cpu/judge_overhead.json``.
"""

import json
import os
import subprocess
import sys
import time

OPS = ("swiglu", "modulate", "qkv_pack")
OLD = r"""
import json, sys, time
from rsi.harness.sandbox import Sandbox
from rsi.spaces import load_space, template_source
from rsi.contract import Candidate
op = sys.argv[1]
sp = load_space(op)
src = template_source(sp.template)
cand = Candidate(op, src, sp.heuristic())
with Sandbox("interpret", timeout_s=600) as sb:
    t0 = time.perf_counter()
    v = sb.evaluate({"candidate": {"op": op, "source": src, "config": sp.heuristic()}, "backend": "interpret"},
                    cand.hash)
    wall = time.perf_counter() - t0
print(json.dumps({"status": v["status"], "wall_s": wall, "trials": v["details"]["correctness"]["trials"]}))
"""
NEW = r"""
import json, sys, time
from rsi.contract import Candidate
from rsi.harness.judge import Judge, JudgeOptions
from rsi.spaces import load_space, template_source
op = sys.argv[1]
sp = load_space(op)
with Judge(JudgeOptions(backend="interpret")) as j:
    t0 = time.perf_counter()
    v = j.evaluate(Candidate(op, template_source(sp.template), sp.heuristic()))
    wall = time.perf_counter() - t0
print(json.dumps({"status": v["status"], "wall_s": wall, "trials": v["details"]["correctness"]["trials"],
                  "sandbox": v["details"]["judge"]["sandbox"]}))
"""


SITECUSTOMIZE = """import sys
# an editable install's import hook would hand the old worker the new rsi: drop it in the old tree's processes
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in type(f).__name__.lower()
                    and "editable" not in getattr(f, "__name__", "").lower()]
"""


def one(code: str, op: str, old: bool) -> dict:
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    if old:  # the old worker process must import the old rsi too
        env["PYTHONPATH"] = os.path.abspath(".old")
    r = subprocess.run([sys.executable, "-c", code, op], capture_output=True, text=True, env=env, timeout=900,
                       cwd=".old" if old else ".")  # the current directory comes first on sys.path
    if r.returncode:
        raise RuntimeError(r.stderr[-2000:])
    return json.loads(r.stdout.strip().splitlines()[-1])


def main(out: str) -> None:
    with open(os.path.join(".old", "sitecustomize.py"), "w") as f:
        f.write(SITECUSTOMIZE)
    rows = []
    for rep in range(3):
        for op in OPS:
            for name, code in (("old", OLD), ("new", NEW)):
                r = one(code, op, name == "old") | {"judge": name, "op": op, "rep": rep}
                print(r, flush=True)
                rows.append(r)
    summary = {}
    for op in OPS:
        med = {}
        for name in ("old", "new"):
            ws = sorted(r["wall_s"] for r in rows if r["op"] == op and r["judge"] == name)
            med[name] = ws[len(ws) // 2]
        trials = {n: next(r["trials"] for r in rows if r["op"] == op and r["judge"] == n) for n in ("old", "new")}
        summary[op] = {"old_s": med["old"], "new_s": med["new"], "added_s": med["new"] - med["old"],
                       "trials": trials}
    json.dump({"command": "TRITON_INTERPRET=1 python reports/cpu/judge_overhead.py " + out, "created": time.ctime(),
               "cpus": os.cpu_count(), "rows": rows, "median": summary}, open(out, "w"), indent=1)
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
