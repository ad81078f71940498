"""Probe 83, gate_residual_modulate_fp8 (twenty-ninth session; outside the judge, not a verdict): the eight-piece
residual template's row loop with PREFETCH 1 (probe 82's for modulate_fp8, here for res and branch: each piece of
the program's next row loaded once the same piece of this row's bytes is stored), beside the h100 lock's config (one
program a row, RELOAD 1, TAIL 1) and the row loop without it, against the bf16 gate_residual_modulate kernel
(issue 12's goal: ratio >= 0.952) and the h200 lock's producer. Counted first on the CPU (Triton 3.6's sm_90a cubin
with a launch's divisibility, cuobjdump; registers / stack bytes / SASS instructions a program, one warp, 1,056
programs, RELOAD 0, TAIL 1): with PREFETCH 255 / 160 / 5,456, with UNPACK too 255 / 64 / 5,752 (two inputs a
piece carried: more than modulate_fp8_warp's, which has no stack); the row loop without it 255 / 64 / 5,200. The
loop is probe 73's (reports/h200/probe73_producers.py: one interleaved loop per bucket, L2 flushed before every
call, each variant checked bitwise first; ratio = paired bf16 op / variant, median and 95% CI).
Usage: python reports/h200/probe83.py OUT.json [REPS]"""
import sys

sys.path.insert(0, "reports/h200")
import probe73_producers as P
import probe77

from rsi.templates import gate_residual_modulate_fp8_warp


def _warp(rl, persist, unpack, prefetch):
    return {"num_warps": 1, "STREAM": 1, "QUOT": 1, "RELOAD": rl, "MAXNREG": 0, "PERSIST": persist, "STAGES": 1,
            "TAIL": 1, "UNPACK": unpack, "PREFETCH": prefetch}


# name: (RELOAD, PERSIST, UNPACK, PREFETCH), all with TAIL 1
P.VARIANTS = {
    "gate_residual_modulate_fp8": {n: (gate_residual_modulate_fp8_warp.launch, _warp(*c))
                                   for n, c in (("r1_tail", (1, 0, 0, 0)), ("r0_p1056_tail", (0, 1056, 0, 0)),
                                                ("r0_p1056_tail_pf", (0, 1056, 0, 1)),
                                                ("r0_p1056_tail_unpack_pf", (0, 1056, 1, 1)))},
}
probe77.__doc__ = __doc__

if __name__ == "__main__":
    probe77.main()
