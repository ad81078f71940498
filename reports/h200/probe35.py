"""H200 run 35: how far swiglu_fp8's fp32 silu (FAST: ``gf / (1.0 + tl.exp(-gf))``, ``ex2.approx`` and the
approximate division as Triton compiles them) is from silu evaluated in fp64, for every bf16 gate value. The error
in fp32 ulps of the result, largest per |g| range, sets the FAST template's near-midpoint window; the GPU test on
every bf16 gate then checks the window. Writes JSON.

    python3 reports/h200/probe35.py --out probe35.json
"""

from __future__ import annotations

import argparse
import json
import sys

import torch
import triton
import triton.language as tl


@triton.jit
def _fast_silu(g_ptr, o_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    gf = tl.load(g_ptr + i, mask=i < n, other=0.0).to(tl.float32)
    tl.store(o_ptr + i, gf / (1.0 + tl.exp(-gf)), mask=i < n)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="probe35.json")
    a = p.parse_args()
    from rsi.env import capture

    g = torch.arange(0, 1 << 16, dtype=torch.int32, device="cuda").to(torch.int16).view(torch.bfloat16)
    g = g[torch.isfinite(g)].contiguous()
    out = torch.empty(g.shape, dtype=torch.float32, device="cuda")
    _fast_silu[(triton.cdiv(g.numel(), 1024),)](g, out, g.numel(), BLOCK=1024)
    g64 = g.double()
    exact = g64 / (1 + torch.exp(-g64))
    ulp = torch.from_numpy(__import__("numpy").spacing(out.abs().cpu().numpy())).double().cuda()
    err = (out.double() - exact).abs() / ulp
    ag = g.float().abs()
    rows = []
    for lo, hi in ((0, 2**-60), (2**-60, 1), (1, 2), (2, 4), (4, 8), (8, 16), (16, 32), (32, 64), (64, 88), (88, 1e39)):
        sel = (ag >= lo) & (ag < hi) & torch.isfinite(err)
        rows.append({"abs_g": [lo, hi], "n": int(sel.sum()), "max_err_ulps": float(err[sel].max()) if sel.any() else None,
                     "nonfinite": int(((ag >= lo) & (ag < hi) & ~torch.isfinite(err)).sum())})
        print(rows[-1], flush=True)
    res = {"env": capture(), "command": "python3 reports/h200/probe35.py " + " ".join(sys.argv[1:]), "bins": rows}
    with open(a.out, "w") as f:
        json.dump(res, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
