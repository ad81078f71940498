"""The sol_attn template compiles for Hopper (sm_90) on a machine without a GPU: Triton's CUDA backend lowers its
three kernels at the heuristic config (key pooling, the fp64 selection, block-sparse attention with wgmma) and the
attention kernel at the smallest tiles of the space. The interpreter never runs the GPU compiler, so this is what
catches a template only the interpreter accepts. Runs in a fresh interpreter without TRITON_INTERPRET; skipped when
the CUDA backend or its ptxas is unavailable. The selection is compiled for ltx_video's 126 key blocks (KB_P2 =
128; h3_full's 512 compiles too, in ~4x the time)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

_COMPILE = r"""
import importlib.util, json, sys
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
spec = importlib.util.spec_from_file_location("tpl_sol_attn", sys.argv[1])
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
space = load_space("sol_attn")
i32, cx = "i32", "constexpr"
pool = {"k_ptr": "*bf16", "p64_ptr": "*fp64", "cu_ptr": "*i32", "stride_cu": i32, "n_docs": i32, "stride_ks": i32,
        "stride_kh": i32, "stride_kd": cx, "n_heads": i32, "HEAD_DIM": cx, "SB": cx}
sel = {"q_ptr": "*bf16", "p64_ptr": "*fp64", "m_ptr": "*bf16", "cu_ptr": "*i32", "stride_cu": i32, "n_docs": i32,
       "stride_qs": i32, "stride_qh": i32, "stride_qd": cx, "n_heads": i32, "n_qb": i32, "n_kb": i32, "tau": "fp32",
       "sink_rows": i32, "HEAD_DIM": cx, "SB": cx, "KB_P2": cx, "SEL_DC": cx}
att = {"q_ptr": "*bf16", "k_ptr": "*bf16", "v_ptr": "*bf16", "o_ptr": "*bf16", "m_ptr": "*bf16", "cu_ptr": "*i32",
       "stride_cu": i32, "stride_qs": i32, "stride_qh": i32, "stride_qd": cx, "stride_ks": i32, "stride_kh": i32,
       "stride_kd": cx, "stride_vs": i32, "stride_vh": i32, "stride_vd": cx, "n_heads": i32, "n_qb": i32,
       "n_kb": i32, "qk_scale": "fp32", "HEAD_DIM": cx, "SB": cx, "BLOCK_M": cx, "BLOCK_N": cx, "EXP2": cx}
heur = space.heuristic()
small = min(space.enumerate(), key=lambda c: (c["BLOCK_M"], c["BLOCK_N"], c["num_stages"]))
base = {"HEAD_DIM": 128, "SB": 128}
jobs = [("pool", heur, m._pool_k_kernel, pool, {**base, "stride_kd": 1}, heur["SEL_WARPS"], 1),
        ("select", heur, m._select_kernel, sel, {**base, "stride_qd": 1, "KB_P2": 128, "SEL_DC": heur["SEL_DC"]},
         heur["SEL_WARPS"], 1)]
for cfg in (heur, small):
    const = {**base, "stride_qd": 1, "stride_kd": 1, "stride_vd": 1, **{k: cfg[k] for k in ("BLOCK_M", "BLOCK_N", "EXP2")}}
    jobs.append(("attention", cfg, m._sparse_attention_kernel, att, const, cfg["num_warps"], cfg["num_stages"]))
out = []
for name, cfg, fn, sig, const, warps, stages in jobs:
    try:
        k = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=const), target=GPUTarget("cuda", 90, 32),
                           options={"num_warps": warps, "num_stages": stages})
    except Exception as e:   # noqa: BLE001
        if "ptxas" in str(e) and ("not found" in str(e) or "No such file" in str(e)):
            print(json.dumps({"skip": f"ptxas unavailable: {str(e)[:200]}"})); sys.exit(0)
        raise
    ptx = k.asm["ptx"]
    out.append({"kernel": name, "config": cfg, "cubin": len(k.asm.get("cubin", b"")), "shared": k.metadata.shared,
                "wgmma": ptx.count("wgmma.mma_async"), "f64": ptx.count(".f64")})
print(json.dumps({"results": out}))
"""


def test_sol_attn_compiles_for_sm90():
    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    p = subprocess.run([sys.executable, "-c", _COMPILE, str(root / "rsi" / "templates" / "sol_attn.py")],
                       check=False, capture_output=True, text=True, env=env, cwd=root, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads(p.stdout.strip().splitlines()[-1])
    if "skip" in res:
        pytest.skip(res["skip"])
    pool, select, heuristic, small = res["results"]
    for r in res["results"]:
        assert r["cubin"] > 0 and r["shared"] <= 227 * 1024, r
    assert pool["f64"] > 0 and select["f64"] > 0              # the selection arithmetic stays fp64 in the PTX
    assert heuristic["wgmma"] > 0 and small["wgmma"] > 0      # bf16 tensor-core QK^T and PV
    assert heuristic["config"]["BLOCK_N"] == 128 and small["config"]["BLOCK_N"] == 32
