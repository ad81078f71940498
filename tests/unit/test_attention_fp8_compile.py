"""The attention_fp8 template compiles for Hopper (sm_90) on a machine without a GPU: the heuristic config, the
smallest config of the space and one with every other choice flipped (bf16 P, division quantiser, V as stored, tl.exp)
lower to cubins whose QKᵀ product is an e4m3 wgmma, whose PV product is an e4m3 wgmma (P8 = 1) or a bf16 one
(P8 = 0), whose quantiser is ``cvt.rn.satfinite.e4m3x2.f32`` (nearest even, saturating: what the reference's clamp +
cast computes) and, with RCP = 0, the correctly rounded ``div.rn.f32``; the amax kernel compiles too. Runs in a fresh
interpreter without TRITON_INTERPRET; skipped when the CUDA backend or its ptxas is unavailable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

_COMPILE = r"""
import importlib.util, json, re, sys
from rsi.spaces import load_space
try:
    import triton
    from triton.backends import backends
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
except Exception as e:   # noqa: BLE001
    print(json.dumps({"skip": f"triton compiler unavailable: {e}"})); sys.exit(0)
if "nvidia" not in backends:
    print(json.dumps({"skip": "Triton's CUDA backend is not installed"})); sys.exit(0)
spec = importlib.util.spec_from_file_location("tpl_attention_fp8", sys.argv[1])
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
space = load_space("attention_fp8")
strides = {f"stride_{t}{a}": "i32" for t in "qkv" for a in "sh"}
sig = {"q_ptr": "*bf16", "k_ptr": "*bf16", "v_ptr": "*bf16", "o_ptr": "*bf16", "cu_ptr": "*i32", "stride_cu": "i32",
       "stride_qs": "i32", "stride_qh": "i32", "stride_qd": "constexpr", "stride_ks": "i32", "stride_kh": "i32",
       "stride_kd": "constexpr", "stride_vs": "i32", "stride_vh": "i32", "stride_vd": "constexpr", "n_heads": "i32",
       "n_split": "i32", "sm_scale": "fp32", "HEAD_DIM": "constexpr", "BLOCK_M": "constexpr",
       "BLOCK_N": "constexpr", "EXP2": "constexpr", "P8": "constexpr", "RCP": "constexpr", "VT": "constexpr",
       "ROW0": "constexpr", "SPLITS": "constexpr"}
heuristic = space.heuristic()
small = min(space.enumerate(), key=lambda c: (c["BLOCK_M"], c["BLOCK_N"], c["num_stages"]))
flipped = {**heuristic, "P8": 0, "RCP": 0, "VT": 0, "EXP2": 0}
assert space.valid(flipped)[0]
out = []
try:
    for cfg in (heuristic, small, flipped):
        const = {"stride_qd": 1, "stride_kd": 1, "stride_vd": 1, "HEAD_DIM": 128, "ROW0": 0, "SPLITS": m.AMAX_SPLITS,
                 **{k: cfg[k] for k in ("BLOCK_M", "BLOCK_N", "EXP2", "P8", "RCP", "VT")}}
        k = triton.compile(ASTSource(fn=m._attention_kernel, signature=sig, constexprs=const),
                           target=GPUTarget("cuda", 90, 32),
                           options={"num_warps": cfg["num_warps"], "num_stages": cfg["num_stages"]})
        ptx = k.asm["ptx"]
        wg = sorted(set(re.findall(r"wgmma\.mma_async\.sync\.aligned\.(m64n\d+k\d+)\.f32\.(\w+)\.(\w+)", ptx)))
        out.append({"config": cfg, "cubin": len(k.asm.get("cubin", b"")), "wgmma": wg,
                    "mma_sync": len(re.findall(r"\bmma\.sync", ptx)), "satfinite": "cvt.rn.satfinite.e4m3x2.f32" in ptx,
                    "div_rn": "div.rn.f32" in ptx, "shared": k.metadata.shared})
    asig = {"q_ptr": "*bf16", "k_ptr": "*bf16", "v_ptr": "*bf16", "o_ptr": "*bf16", "n_rows": "i32", "n_split": "i32",
            **{n: t for n, t in sig.items() if n.startswith("stride_") and n != "stride_cu"},
            "HEAD_DIM": "constexpr", "BLOCK_S": "constexpr", "SPLITS": "constexpr"}
    a = triton.compile(ASTSource(fn=m._amax_kernel, signature=asig,
                                 constexprs={"stride_qd": 1, "stride_kd": 1, "stride_vd": 1, "HEAD_DIM": 128,
                                             "BLOCK_S": m.AMAX_ROWS, "SPLITS": m.AMAX_SPLITS}),
                       target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
except Exception as e:   # noqa: BLE001
    if "ptxas" in str(e) and ("not found" in str(e) or "No such file" in str(e)):
        print(json.dumps({"skip": f"ptxas unavailable: {str(e)[:200]}"})); sys.exit(0)
    raise
print(json.dumps({"results": out, "amax_cubin": len(a.asm.get("cubin", b""))}))
"""


def test_attention_fp8_compiles_for_sm90():
    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    p = subprocess.run([sys.executable, "-c", _COMPILE, str(root / "rsi" / "templates" / "attention_fp8.py")],
                       check=False, capture_output=True, text=True, env=env, cwd=root, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads(p.stdout.strip().splitlines()[-1])
    if "skip" in res:
        pytest.skip(res["skip"])
    heuristic, small, flipped = res["results"]
    for r in (heuristic, small, flipped):
        assert r["cubin"] > 0 and r["mma_sync"] == 0 and r["satfinite"], r
        assert r["shared"] <= 227 * 1024, r
        wg = {tuple(w) for w in r["wgmma"]}
        assert (f"m64n{r['config']['BLOCK_N']}k32", "e4m3", "e4m3") in wg, r       # QKᵀ: e4m3 wgmma
        pv = ("m64n128k32", "e4m3", "e4m3") if r["config"]["P8"] else ("m64n128k16", "bf16", "bf16")
        assert pv in wg, r                                                          # PV: e4m3 or bf16 wgmma
    assert heuristic["config"] == {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "num_stages": 2, "EXP2": 1,
                                   "P8": 1, "RCP": 1, "VT": 1}
    assert flipped["div_rn"]            # the correctly rounded quantiser (RCP = 0)
    assert res["amax_cubin"] > 0
