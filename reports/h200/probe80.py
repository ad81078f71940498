"""Probe 80, producers (twenty-fifth session; outside the judge, not a verdict): gate_residual_modulate_fp8_warp with
modulate_fp8_warp's row loop (PERSIST n: min(rows, n) programs walk the rows; STAGES 1, unpipelined), which run 79
found modulate_fp8's fastest realization on the H100 and the H200 (0.705x the bf16 op at stage1 on the H200 against
0.665x for one program a row), beside the one-warp RELOAD 1 config (run 79 on the H200: 0.722x) and the h200 lock's
kernel (issue 12's goal: the producer no slower than the bf16 op + 5%, ratio >= 0.952). 1,056 programs are 132 SMs
x the 8 one-warp programs the 255-register build allows; 528 half of that.
The loop is probe 73's (reports/h200/probe73_producers.py: one interleaved loop per op group and bucket, L2 flushed
before every call, each variant checked bitwise first; ratio = paired bf16 op / variant, median and 95% CI).
Usage: python reports/h200/probe80.py OUT.json [REPS]"""
import sys

sys.path.insert(0, "reports/h200")
import probe73_producers as P
import probe77

from rsi.templates import gate_residual_modulate_fp8_warp


def _warp(rl, persist=0):
    return {"num_warps": 1, "STREAM": 1, "QUOT": 1, "RELOAD": rl, "MAXNREG": 0, "PERSIST": persist, "STAGES": 1}


P.VARIANTS = {"gate_residual_modulate_fp8": {n: (gate_residual_modulate_fp8_warp.launch, _warp(rl, pst))
                                             for n, rl, pst in (("w1_s1_reload1", 1, 0), ("w1_s1_reload0_p1056", 0, 1056),
                                                                ("w1_s1_reload1_p1056", 1, 1056),
                                                                ("w1_s1_reload0_p528", 0, 528))}}
probe77.__doc__ = __doc__

if __name__ == "__main__":
    probe77.main()
