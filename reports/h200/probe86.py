"""Probe 86, the two modulate producers on the H200 (thirtieth session; outside the judge, not a verdict): the
configs the H100 promoted in runs 81 h and 82 h, timed for the first time on an H200, where the h200 lock's kernels
are older (run 79: modulate_fp8 0.705x, gate_residual_modulate_fp8 0.722x the bf16 ops at stage1).
modulate_fp8_warp (one warp, RELOAD 0, the unpipelined row loop, TAIL 1): UNPACK 1 (the h100 lock's of run 81 h),
PREFETCH 1 (the h100 lock's of run 82 h, modulate_fp8_warp's heuristic), both at 1,056 programs (8 an SM), and
RELOAD 4 (h in the program's scratch row, 106 registers; probe 87) at 2,112 and 2,376 programs (16 and 18 an SM). gate_residual_modulate_fp8_warp (one warp, TAIL 1): RELOAD 1 at one program a row (the h100 lock's of run
81 h, the heuristic) and the row loop at RELOAD 0 (1,056 programs; on the H100 faster at stage1 only). Against the
bf16 ops (issue 12's goal: the producer no slower than the bf16 op + 5%, ratio >= 0.952) and the h200 lock's
producers. The loop is probe 73's (reports/h200/probe73_producers.py: one interleaved loop per bucket, L2 flushed
before every call, each variant checked bitwise first; ratio = paired bf16 op / variant, median and 95% CI).
Usage: python reports/h200/probe86.py OUT.json [REPS]"""
import sys

sys.path.insert(0, "reports/h200")
import probe73_producers as P
import probe77

from rsi.templates import gate_residual_modulate_fp8_warp, modulate_fp8_warp


def _warp(rl, persist, unpack, prefetch):
    return {"num_warps": 1, "STREAM": 1, "QUOT": 1, "RELOAD": rl, "MAXNREG": 0, "PERSIST": persist, "STAGES": 1,
            "TAIL": 1, "UNPACK": unpack, "PREFETCH": prefetch}


# name: (RELOAD, PERSIST, UNPACK, PREFETCH), all with TAIL 1; the first of each op is its template's heuristic
P.VARIANTS = {
    "modulate_fp8": {n: (modulate_fp8_warp.launch, _warp(*c))
                     for n, c in (("tail_pf", (0, 1056, 0, 1)), ("tail_unpack", (0, 1056, 1, 0)),
                                  ("r4_p2112", (4, 2112, 0, 0)), ("r4_p2376", (4, 2376, 0, 0)))},
    "gate_residual_modulate_fp8": {n: (gate_residual_modulate_fp8_warp.launch, _warp(*c))
                                   for n, c in (("r1_tail", (1, 0, 0, 0)), ("r0_p1056_tail", (0, 1056, 0, 0)),
                                                ("r4_p1584", (4, 1584, 0, 0)))},
}
probe77.__doc__ = __doc__

if __name__ == "__main__":
    probe77.main()
