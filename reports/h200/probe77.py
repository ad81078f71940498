"""Probe 77, producers (twenty-second session; outside the judge, not a verdict): the eight-piece templates' RELOAD 2
(h made twice from x read again, for the row's amax and then for the bytes; nothing held across pieces) against the
bf16 ops they replace and the locked producers (issue 12's goal: the producer no slower than the bf16 op + 5%, ratio
>= 0.952). Measured first on the CPU (Triton 3.6's sm_90a cubin with a launch's divisibility, cuobjdump): at one
warp and H3's width modulate_fp8_warp with RELOAD 1 (the locked config) holds 255 registers (8 programs an SM) and
runs 5,560 warp instructions a row; RELOAD 2 95 registers and 7,032 (docs/kernels.md).
The loop is probe 73's (reports/h200/probe73_producers.py: one interleaved loop per op group and bucket, L2 flushed
before every call, each variant checked bitwise first; ratio = paired bf16 op / variant, median and 95% CI).
Usage: python reports/h200/probe77.py OUT.json [REPS]"""
import json
import sys

import torch

sys.path.insert(0, "reports/h200")
import probe73_producers as P

from rsi.refs import get_op_group
from rsi.templates import gate_residual_modulate_fp8_warp, modulate_fp8_warp

P.VARIANTS = {op: {f"w{w}_s{st}_reload{rl}": (fn, {"num_warps": w, "STREAM": st, "QUOT": 1, "RELOAD": rl})
                   for w, st, rl in ((1, 1, 1), (4, 1, 1), (1, 1, 2), (1, 0, 2), (2, 1, 2), (4, 1, 2))}
              for op, fn in (("modulate_fp8", modulate_fp8_warp.launch),
                             ("gate_residual_modulate_fp8", gate_residual_modulate_fp8_warp.launch))}


def main():
    out_path = sys.argv[1]
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 15
    res = {"note": __doc__, "torch": torch.__version__, "device": torch.cuda.get_device_name(), "variants":
           {op: {n: c for n, (_, c) in v.items()} for op, v in P.VARIANTS.items()}, "rows": []}
    for op in P.VARIANTS:
        for shape in get_op_group(op).shapes:
            res["rows"].append(P.bucket_row(op, shape, reps))
            with open(out_path, "w") as f:
                json.dump(res, f, indent=1, default=str)


if __name__ == "__main__":
    main()
