"""Probe 82, modulate_fp8 (twenty-ninth session; outside the judge, not a verdict): modulate_fp8_warp's row loop with
PREFETCH 1, each piece of the program's next row loaded once the same piece of this row is stored, so that the
loads are in flight while the rest of the row is quantised (without it a program's loads wait for its previous
row's stores, and only the SM's other programs hide them), beside TAIL 1 with and without UNPACK (run 81 h: the
h100 lock's kernel is TAIL 1, UNPACK 1), against the bf16 modulate kernel (issue 12's goal: the producer no slower
than the bf16 op + 5%, ratio >= 0.952) and the h200 lock's producer. Counted first on the CPU (Triton 3.6's sm_90a
cubin with a launch's divisibility, cuobjdump; registers / stack bytes / SASS instructions a program, one warp,
1,056 programs, RELOAD 0, TAIL 1): 255 / 96 / 4,368; with UNPACK 254 / 0 / 4,552; with PREFETCH 255 / 0 / 4,448;
both 255 / 0 / 4,704 (tests/unit/test_fp8_compile.py). The loop is probe 73's (reports/h200/probe73_producers.py:
one interleaved loop per bucket, L2 flushed before every call, each variant checked bitwise first; ratio = paired
bf16 op / variant, median and 95% CI).
Usage: python reports/h200/probe82.py OUT.json [REPS]"""
import sys

sys.path.insert(0, "reports/h200")
import probe73_producers as P
import probe77

from rsi.templates import modulate_fp8_warp


def _warp(persist, unpack, prefetch):
    return {"num_warps": 1, "STREAM": 1, "QUOT": 1, "RELOAD": 0, "MAXNREG": 0, "PERSIST": persist, "STAGES": 1,
            "TAIL": 1, "UNPACK": unpack, "PREFETCH": prefetch}


# name: (PERSIST, UNPACK, PREFETCH), all with RELOAD 0 and TAIL 1
P.VARIANTS = {
    "modulate_fp8": {n: (modulate_fp8_warp.launch, _warp(*c))
                     for n, c in (("tail", (1056, 0, 0)), ("tail_unpack", (1056, 1, 0)), ("tail_pf", (1056, 0, 1)),
                                  ("tail_unpack_pf", (1056, 1, 1)), ("tail_pf_p528", (528, 0, 1)))},
}
probe77.__doc__ = __doc__

if __name__ == "__main__":
    probe77.main()
