"""Probe 75 (twentieth session; outside the judge, not a verdict): swiglu_fp8 FLAT beside the h200 lock's kernel of
run 74 b (TABLE 2, 32 warps, PERSIST 132, evict_first), with fewer barriers a row (PART 1: a piece's amax per warp
first, one max across warps a row; a single 16,384-column piece) and two or four programs an SM (MAXNREG: the
launch's register cap; PERSIST 264 / 528). Method as probe 74's (reports/h200/probe74.py: every variant bitwise on
the bucket's input and on every bf16 gate before it is timed; one interleaved loop a bucket with the h200 lock's
bf16 swiglu and swiglu_fp8 kernels; bf16 / variant, median and 95% CI).
Usage: python reports/h200/probe75.py OUT.json [REPS]"""
import sys

sys.path.insert(0, "reports/h200")
import probe74

BASE = {**probe74.SW, "TABLE": 2, "FLAT": 1, "EVICT": "evict_first"}
ONE = {"BLOCK_A": 16384, "BLOCK_B": 0, "BLOCK_C": 0}
probe74.VARIANTS = {
    "w32_p132": {**BASE, "num_warps": 32, "PERSIST": 132},
    "w32_p132_part": {**BASE, "num_warps": 32, "PERSIST": 132, "PART": 1},
    "w32_p132_one_part": {**BASE, **ONE, "num_warps": 32, "PERSIST": 132, "PART": 1},
    "w16_p264_m64": {**BASE, "num_warps": 16, "PERSIST": 264, "MAXNREG": 64},
    "w16_p264_m64_part": {**BASE, "num_warps": 16, "PERSIST": 264, "MAXNREG": 64, "PART": 1},
    "w8_p264_m128_part": {**BASE, "num_warps": 8, "PERSIST": 264, "MAXNREG": 128, "PART": 1},
    "w8_p528_m64_part": {**BASE, "num_warps": 8, "PERSIST": 528, "MAXNREG": 64, "PART": 1},
}
probe74.__doc__ = __doc__

if __name__ == "__main__":
    probe74.main()
