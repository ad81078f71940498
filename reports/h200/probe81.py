"""Probe 81, producers (twenty-eighth session; outside the judge, not a verdict): the eight-piece templates with TAIL 1
(the last piece only as wide as the row needs: 256 of 1,024 columns at H3's 5,376, where six full pieces are 12.5%
padding) and UNPACK 1 (the squares' fp32 x from x's bits, which keeps the row's fp32 x from staying live between the
sum of squares and h), against the bf16 ops they replace and the h200 lock's producers (issue 12's goal: the
producer no slower than the bf16 op + 5%, ratio >= 0.952). Counted first on the CPU (Triton 3.6's sm_90a cubin with
a launch's divisibility, cuobjdump; SASS instructions a program): modulate_fp8_warp's heuristic (one warp, the
unpipelined row loop of 1,056 programs, RELOAD 0) 4,896 instructions and a 160-byte stack, with TAIL 4,368 / 96,
with TAIL and UNPACK 4,552 / 0 (254 registers); gate_residual_modulate_fp8_warp's (one warp, RELOAD 1, one program
a row) 6,168 / 56, with TAIL 5,376 / 0; its row loop at RELOAD 0 (probe 80's) 5,904 / 112, with TAIL 5,200 / 64
(tests/unit/test_fp8_compile.py, docs/kernels.md). The loop is probe 73's (reports/h200/probe73_producers.py: one
interleaved loop per op group and bucket, L2 flushed before every call, each variant checked bitwise first; ratio =
paired bf16 op / variant, median and 95% CI).
Usage: python reports/h200/probe81.py OUT.json [REPS]"""
import sys

sys.path.insert(0, "reports/h200")
import probe73_producers as P
import probe77

from rsi.templates import gate_residual_modulate_fp8_warp, modulate_fp8_warp


def _warp(rl, persist, tail, unpack):
    return {"num_warps": 1, "STREAM": 1, "QUOT": 1, "RELOAD": rl, "MAXNREG": 0, "PERSIST": persist, "STAGES": 1,
            "TAIL": tail, "UNPACK": unpack}


# name: (RELOAD, PERSIST, TAIL, UNPACK); the first of each op is its template's heuristic
P.VARIANTS = {
    "modulate_fp8": {n: (modulate_fp8_warp.launch, _warp(*c))
                     for n, c in (("r0_p1056", (0, 1056, 0, 0)), ("r0_p1056_tail", (0, 1056, 1, 0)),
                                  ("r0_p1056_tail_unpack", (0, 1056, 1, 1)), ("r1_tail", (1, 0, 1, 0)),
                                  ("r1_p1056_tail", (1, 1056, 1, 0)))},
    "gate_residual_modulate_fp8": {n: (gate_residual_modulate_fp8_warp.launch, _warp(*c))
                                   for n, c in (("r1", (1, 0, 0, 0)), ("r1_tail", (1, 0, 1, 0)),
                                                ("r0_p1056", (0, 1056, 0, 0)), ("r0_p1056_tail", (0, 1056, 1, 0)),
                                                ("r1_p1056_tail", (1, 1056, 1, 0)))},
}
probe77.__doc__ = __doc__

if __name__ == "__main__":
    probe77.main()
