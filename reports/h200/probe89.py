"""Probe 89, gate_residual_modulate_fp8 (thirty-first session; outside the judge, not a verdict): the CuTe DSL producer
rsi/templates/gate_residual_modulate_fp8_cute.py (r made as res and branch are loaded, then modulate_fp8_cute's row a
CTA; sm_90a build at 128 threads: 90 registers, no stack) against the Triton template's heuristic
(gate_residual_modulate_fp8_warp, RELOAD 1 with TAIL: one warp a row, 254 registers), the bf16
gate_residual_modulate kernel (issue 12's goal: ratio >= 0.952) and the lock's producer. Probe 88's shape
(reports/h200/probe88.py): --smoke checks every config bitwise at the odd shapes and stage1, every layout and
special case; the timing is probe 73's loop.
Usage: python reports/h200/probe89.py OUT.json [REPS] [--smoke]"""
import sys

sys.path.insert(0, "reports/h200")
import probe73_producers as P
import probe77
import probe88

from rsi.templates import gate_residual_modulate_fp8_cute, gate_residual_modulate_fp8_warp

OP = "gate_residual_modulate_fp8"
TRITON = {"num_warps": 1, "STREAM": 1, "QUOT": 1, "RELOAD": 1, "MAXNREG": 0, "PERSIST": 0, "STAGES": 1, "TAIL": 1,
          "UNPACK": 0, "PREFETCH": 0}
CUTE = {f"cute_t{t}_c{c}": {"THREADS": t, "CHUNKS": c} for t, c in ((128, 8), (64, 16), (256, 4))}
P.VARIANTS = {OP: {"r1_tail": (gate_residual_modulate_fp8_warp.launch, TRITON),
                   **{n: (gate_residual_modulate_fp8_cute.launch, c) for n, c in CUTE.items()}}}
probe77.__doc__ = __doc__

if __name__ == "__main__":
    if "--smoke" in sys.argv:
        probe88.smoke(sys.argv[1], OP, gate_residual_modulate_fp8_cute.launch, CUTE, __doc__)
    else:
        probe77.main()
