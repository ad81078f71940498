"""Probe 78, modulate_fp8 (twenty-second session; outside the judge, not a verdict): modulate_fp8_warp's RELOAD 3
(RELOAD 2 with each piece's operands, x, w and the two AdaLN table rows, loaded while the piece before it is made,
and the first piece's issued before the sum of squares) beside RELOAD 1 and 2 at one warp, the locked producer and
the bf16 op. Run 77's Nsight Compute put the one-warp kernel's time in the L1TEX scoreboard stall (it waits on
those loads), not in issue or DRAM. The sm_90a build (divisibility as launched): 160 registers, no stack, 5,936
warp instructions a row. The loop is probe 73's (reports/h200/probe73_producers.py).
Usage: python reports/h200/probe78.py OUT.json [REPS]"""
import sys

sys.path.insert(0, "reports/h200")
import probe73_producers as P
import probe77

from rsi.templates import modulate_fp8_warp

P.VARIANTS = {"modulate_fp8": {f"w1_s{st}_reload{rl}": (modulate_fp8_warp.launch,
                                                        {"num_warps": 1, "STREAM": st, "QUOT": 1, "RELOAD": rl})
                               for st, rl in ((1, 1), (1, 2), (1, 3), (0, 3))}}

if __name__ == "__main__":
    probe77.__doc__ = __doc__
    probe77.main()
