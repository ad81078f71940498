"""Probe 85, modulate_fp8 (twenty-ninth session; outside the judge, not a verdict): modulate_fp8_warp's PREFETCH row
loop with a register cap (MAXNREG) and as many programs as the cap lets an SM hold. Nsight Compute on an H100 (run
84, reports/h200/run84/) found the PREFETCH loop issuing on 45% of cycles with 1.96 warps a scheduler (255 registers:
8 one-warp programs an SM) and DRAM at 55% of peak, against the bf16 modulate kernel's 50%, 5.5 warps and 77%; it
executes fewer instructions than that kernel (33.1M against 37.7M at stage1). So more warps, at the cost of spills
(Triton 3.6's sm_90a build, a launch's divisibility; registers / stack bytes / SASS instructions, TAIL 1): uncapped
255 / 0 / 4,448; capped at 224 (9 programs an SM) 224 / 248 / 4,664, without PREFETCH 224 / 48 / 4,336; at 200 (10)
200 / 208 / 4,592. The loop is probe 73's (reports/h200/probe73_producers.py; ratio = paired bf16 op / variant).
Usage: python reports/h200/probe85.py OUT.json [REPS]"""
import sys

sys.path.insert(0, "reports/h200")
import probe73_producers as P
import probe77

from rsi.templates import modulate_fp8_warp


def _warp(persist, cap, prefetch):
    return {"num_warps": 1, "STREAM": 1, "QUOT": 1, "RELOAD": 0, "MAXNREG": cap, "PERSIST": persist, "STAGES": 1,
            "TAIL": 1, "UNPACK": 0, "PREFETCH": prefetch}


# name: (PERSIST, MAXNREG, PREFETCH), all with RELOAD 0 and TAIL 1; 132 SMs x the programs the cap fits
P.VARIANTS = {
    "modulate_fp8": {n: (modulate_fp8_warp.launch, _warp(*c))
                     for n, c in (("pf", (1056, 0, 1)), ("pf_cap224", (1188, 224, 1)), ("cap224", (1188, 224, 0)),
                                  ("pf_cap200", (1320, 200, 1)))},
}
probe77.__doc__ = __doc__

if __name__ == "__main__":
    probe77.main()
