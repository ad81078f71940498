"""The interpreter patch for fp8 (rsi/harness/interp.py): fp32/bf16 -> e4m3fn/e5m2 casts round to nearest even and
saturate (what sm_90's ``cvt.rn.satfinite`` does), NaN stays NaN, fp8 -> fp32 widens exactly (NaN included), and
``tl.dot`` on e4m3 operands is exact products with fp32 accumulation. Runs in a fresh interpreter with
TRITON_INTERPRET=1 from the start (``@triton.jit`` reads it at import)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

_PROBE = r"""
import json
import torch, triton, triton.language as tl
from rsi.harness.interp import patch_interpreter_rounding
patch_interpreter_rounding()

@triton.jit
def cast(x_ptr, y_ptr, z_ptr, N: tl.constexpr):
    o = tl.arange(0, N)
    x = tl.load(x_ptr + o)
    tl.store(y_ptr + o, x.to(tl.float8e4nv))
    tl.store(z_ptr + o, x.to(tl.float8e5))

@triton.jit
def widen(x_ptr, y_ptr, N: tl.constexpr):
    o = tl.arange(0, N)
    tl.store(y_ptr + o, tl.load(x_ptr + o).to(tl.float32))

@triton.jit
def dot(a_ptr, b_ptr, c_ptr, M: tl.constexpr):
    r = tl.arange(0, M)
    a = tl.load(a_ptr + r[:, None] * M + r[None, :])
    b = tl.load(b_ptr + r[:, None] * M + r[None, :])
    tl.store(c_ptr + r[:, None] * M + r[None, :], tl.dot(a, b))

res = {}
grid = torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn).float()
fin = grid[torch.isfinite(grid)].unique()                       # the finite e4m3 values, sorted
mid = (fin[1:].double() + fin[:-1].double()) / 2                # ties (exact in fp32)
vals = torch.cat([fin, mid.float(), torch.nextafter(mid.float(), torch.tensor(1e9)),
                  torch.nextafter(mid.float(), torch.tensor(-1e9)),
                  torch.tensor([449.0, 463.9, 464.0, 1e6, -1e30, 6e4, 7e4, float("inf"), -float("inf"), float("nan"),
                                1e-30, -1e-30, 2.0 ** -10, -(2.0 ** -10), 3 * 2.0 ** -11])])
n = triton.next_power_of_2(vals.numel())
for name, src in (("fp32", vals), ("bf16", vals.to(torch.bfloat16))):
    x = torch.zeros(n, dtype=src.dtype); x[:src.numel()] = src
    y = torch.empty(n, dtype=torch.float8_e4m3fn); z = torch.empty(n, dtype=torch.float8_e5m2)
    cast[(1,)](x, y, z, N=n)
    xf = x.float()
    want_y = xf.clamp(-448, 448).to(torch.float8_e4m3fn)
    want_z = xf.clamp(-57344, 57344).to(torch.float8_e5m2)
    same = lambda a, b: bool(((a.view(torch.uint8) == b.view(torch.uint8))
                              | (a.float().isnan() & b.float().isnan())).all())
    res[name] = {"e4m3": same(y, want_y), "e5m2": same(z, want_z), "n": src.numel()}
y = torch.empty(n, dtype=torch.float8_e4m3fn); z = torch.empty(n, dtype=torch.float8_e5m2)
x = torch.tensor([1.0625, 500.0, float("nan"), 1.5 * 2.0 ** -10, -1e6, 2.0 ** -11] + [0.0] * 2)
cast[(1,)](x, y[:8], z[:8], N=8)
res["hand"] = y[:6].float().tolist()
w = torch.empty(256)
widen[(1,)](torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn), w, N=256)
res["widen"] = bool(((w == grid) | (w.isnan() & grid.isnan())).all()) and int(w.isnan().sum()) == 2
g = torch.Generator().manual_seed(0)
# multiples of 1/8 up to 2 (e4m3 values): every partial sum is exact in fp32, so any order gives the exact result
a = (torch.randint(-16, 17, (32, 32), generator=g) / 8).to(torch.float8_e4m3fn)
b = (torch.randint(-16, 17, (32, 32), generator=g) / 8).to(torch.float8_e4m3fn)
c = torch.empty(32, 32)
dot[(1,)](a, b, c, M=32)
res["dot"] = float((c.double() - a.double() @ b.double()).abs().max())
print(json.dumps(res))
"""


def test_fp8_casts_and_dots_under_the_interpreter():
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    p = subprocess.run([sys.executable, "-c", _PROBE], check=False, capture_output=True, text=True, env=env, cwd=root,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads(p.stdout.strip().splitlines()[-1])
    for src in ("fp32", "bf16"):   # every finite value, every tie and its neighbours, overflow, NaN, Inf, tiny
        assert res[src]["e4m3"] and res[src]["e5m2"], res
        assert res[src]["n"] > 700
    # ties to even (1.0625 -> 1.0), saturation (500 -> 448, -1e6 -> -448), NaN, subnormal rounding (1.5 * 2^-10
    # -> 2^-9 = the smallest e4m3 subnormal, 2^-11 -> 0): the interpreter alone gives 1.125, 256, 384, 0, nan
    assert res["hand"][:2] == [1.0, 448.0] and res["hand"][2] != res["hand"][2]
    assert res["hand"][3:] == [2.0 ** -9, -448.0, 0.0]
    assert res["widen"] and res["dot"] == 0.0
