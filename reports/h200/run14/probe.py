"""Run 14, step 1: does the strict producer sandbox (PID/IPC namespaces, minimal /dev) keep CUDA IPC working?"""
import sys

from rsi.contract import Candidate
from rsi.harness.judge import Judge, JudgeOptions

src = open("reports/h200/run12/honest_swiglu.py").read()
with Judge(JudgeOptions(backend="cuda", measure=False, drawn_shapes=0)) as j:
    v = j.evaluate(Candidate("swiglu", src))
print("probe", v["details"]["judge"]["sandbox"], v["status"], v["stage"], v["reason"][:400],
      f"{v['details']['judge_wall_s']:.1f}s", flush=True)
sys.exit(0 if v["status"] == "accepted" else 1)
