"""The fp8 templates compile for Hopper (sm_90) on a machine without a GPU, and the PTX holds the instructions their
contracts rely on: fp8_linear's e4m3 wgmma, every quantiser's ``cvt.rn.satfinite.e4m3x2.f32`` (nearest even,
saturating) and ``div.rn.f32`` (IEEE), modulate_fp8's and gate_residual_modulate_fp8's ``sqrt.rn.f32``, no approximate rsqrt/division and no fma
(it launches with ``enable_fp_fusion=False``),
swiglu_fp8's fp64 division and libdevice exp (no ``ex2.approx``); and a plain fp32 ``/`` in Triton is the approximate
``div.full.f32`` (why the templates use ``tl.div_rn``). Runs in a fresh interpreter without TRITON_INTERPRET;
skipped when the CUDA backend or its ptxas is unavailable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

_COMPILE = r"""
import importlib.util, json, os, re, sys
sys.path.insert(0, sys.argv[1])
os.chdir(sys.argv[1])
try:
    import triton
    import triton.language as tl
    from triton.backends import backends
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
except Exception as e:   # noqa: BLE001
    print(json.dumps({"skip": f"triton compiler unavailable: {e}"})); sys.exit(0)
if "nvidia" not in backends:
    print(json.dumps({"skip": "Triton's CUDA backend is not installed"})); sys.exit(0)
from rsi.spaces import load_space

def load(op):
    spec = importlib.util.spec_from_file_location("tpl_" + op, f"rsi/templates/{op}.py")
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m

def resources(cubin):   # (registers, stack bytes: spills live there, SEL instructions choosing e4m3's NaN byte or
    import subprocess, tempfile   # the fp32 NaN) by Triton's cuobjdump; (None, None, None) without it
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    if not os.path.exists(tool):
        return None, None, None
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin); f.flush()
        got = subprocess.run([tool, "--dump-resource-usage", f.name], capture_output=True, text=True).stdout
        sass = subprocess.run([tool, "-sass", f.name], capture_output=True, text=True).stdout
    m = re.search(r"REG:(\d+) STACK:(\d+)", got)
    nan_sel = len(re.findall(r"\bSEL R\d+, R\d+, 0x7f(?:c00000)?,", sass))
    return (int(m.group(1)), int(m.group(2)), nan_sel) if m else (None, None, None)

def sass_count(cubin):   # SASS instructions in the cubin (0 without Triton's cuobjdump)
    import subprocess, tempfile
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    if not os.path.exists(tool):
        return 0
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin); f.flush()
        sass = subprocess.run([tool, "-sass", f.name], capture_output=True, text=True).stdout
    return len(re.findall(r"/\*[0-9a-f]{4,}\*/\s+\S", sass))

def compile_(fn, types, const, div=(), **options):
    # div: the arguments a launch's specialisation sees divisible by 16 (pointers, H3's widths and row strides);
    # without the hint masked loads and stores are not vectorised and the build is not the one that runs
    sig = {n: types.get(n, "constexpr" if n in const else "i32") for n in fn.arg_names}
    attrs = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(fn.arg_names)
             if sig[n] != "constexpr" and (n in div or (div and n.endswith("_ptr")))}
    try:
        k = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=const, attrs=attrs), target=GPUTarget("cuda", 90, 32),
                           options=options)
    except Exception as e:   # noqa: BLE001
        if "ptxas" in str(e) and ("not found" in str(e) or "No such file" in str(e)):
            print(json.dumps({"skip": f"ptxas unavailable: {str(e)[:200]}"})); sys.exit(0)
        raise
    ptx = k.asm["ptx"]
    pats = ("wgmma.mma_async[a-z0-9.]*", r"div\.[a-z.]*f(?:32|64)", r"sqrt\.[a-z.]*f32", r"rsqrt\.[a-z.]*f32",
            r"cvt\.rn\.satfinite\.e4m3x2\.f32", r"ex2\.[a-z.]*", r"fma\.rn\.f32", r"cp\.async\.bulk\.tensor\.[0-9]d",
            r"ld\.shared", r"bar\.sync", r"cp\.async\.cg\.shared\.global")
    return {"cubin": len(k.asm.get("cubin", b"")), "shared": k.metadata.shared, "resources": resources(k.asm["cubin"]),
            "sass": sass_count(k.asm["cubin"]),
            "ops": sorted({m for p in pats for m in re.findall(p, ptx)}), "div_rn_f32": ptx.count("div.rn.f32")}

out = {}
m = load("fp8_linear")
cfg = load_space("fp8_linear").heuristic()
types = {"x_ptr": "*bf16", "w_ptr": "*fp8e4nv", "ws_ptr": "*fp32", "o_ptr": "*bf16"}
const = {"stride_xk": 1, "stride_wk": 1, **{k: cfg[k] for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "RCP",
                                                                  "PREC", "PERSIST")}}
out["fp8_linear"] = compile_(m._gemm_kernel, types, const, num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
out["fp8_linear_amax"] = compile_(m._amax_kernel, {"x_ptr": "*bf16", "o_ptr": "*bf16"},
                                  {"stride_xk": 1, "ROWS": m.AMAX_ROWS, "COLS": m.AMAX_COLS}, num_warps=4)
m = load("modulate_fp8")
cfg = load_space("modulate_fp8").heuristic()
types = {"x_ptr": "*bf16", "w_ptr": "*bf16", "shift_ptr": "*bf16", "scale_ptr": "*bf16", "idx_ptr": "*i64",
         "q_ptr": "*fp8e4nv", "s_ptr": "*fp32", "n_cols_f": "fp32", "eps": "fp32"}
const = {"stride_xc": 1, "stride_w": 1, "BLOCK_A": 4096, "BLOCK_B": 2048, "LOG": m.LOG2_MAX, "ROWS": cfg["ROWS"],
         "EVICT": cfg["EVICT"], "XMOD": ".cg" if cfg["STREAM"] else "", "SMOD": ".cs" if cfg["STREAM"] else "",
         "QUOT": 0}   # QUOT 0 here: the no-fma check below is about the sum of squares (QUOT 1's fmas are explicit)
out["modulate_fp8"] = compile_(m._modulate_fp8_kernel, types, const, num_warps=cfg["num_warps"],
                               enable_fp_fusion=False)
out["modulate_fp8_fused"] = compile_(m._modulate_fp8_kernel, types, const, num_warps=cfg["num_warps"])
out["modulate_fp8_quot"] = compile_(m._modulate_fp8_kernel, types, {**const, "QUOT": 1}, num_warps=cfg["num_warps"],
                                    enable_fp_fusion=False)
m = load("fp8_gemm_tma")
tma = next(a for a in load_space("fp8_gemm").alternatives if a.template == "fp8_gemm_tma").heuristic()
out["fp8_gemm_tma"] = compile_(m._fp8_gemm_tma_kernel, {"x_ptr": "*fp8e4nv", "xs_ptr": "*fp32", "w_ptr": "*fp8e4nv",
                                                        "ws_ptr": "*fp32", "o_ptr": "*bf16"},
                               {k: tma[k] for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "PERSIST", "PREC", "FLATTEN")},
                               num_warps=tma["num_warps"], num_stages=tma["num_stages"])
m = load("gate_residual_modulate_fp8")
types.update({"hs_ptr": "*bf16", "res_ptr": "*bf16", "gate_ptr": "*bf16", "branch_ptr": "*bf16", "r_ptr": "*bf16"})
const = {**{k: v for k, v in const.items() if k != "stride_xc"}, "stride_ec": 1, "stride_gc": 1, "stride_bc": 1}
out["gate_residual_modulate_fp8"] = compile_(m._gate_residual_modulate_fp8_kernel, types, const,
                                             num_warps=cfg["num_warps"], enable_fp_fusion=False)
out["gate_residual_modulate_fp8_fused"] = compile_(m._gate_residual_modulate_fp8_kernel, types, const,
                                                   num_warps=cfg["num_warps"])
out["gate_residual_modulate_fp8_quot"] = compile_(m._gate_residual_modulate_fp8_kernel, types, {**const, "QUOT": 1},
                                                  num_warps=cfg["num_warps"], enable_fp_fusion=False)
m = load("swiglu_fp8")
cfg = load_space("swiglu_fp8").heuristic()
const = {k: cfg.get(k, 0) for k in ("BLOCK_A", "BLOCK_B", "BLOCK_C", "ROWS", "EVICT", "QUOT", "TABLE", "RELOAD")}
sw_types = {"x_ptr": "*bf16", "t_ptr": "*bf16", "q_ptr": "*fp8e4nv", "s_ptr": "*fp32"}
out["swiglu_fp8"] = compile_(m._swiglu_fp8_kernel, sw_types, {**const, "TABLE": 0}, num_warps=cfg["num_warps"])
for table, rows, warps in ((1, 2, 16), (2, 1, 16)):
    out[f"swiglu_fp8_table{table}"] = compile_(m._swiglu_fp8_kernel, sw_types,
                                               {**const, "TABLE": table, "ROWS": rows}, num_warps=warps)
out["swiglu_fp8_table_build"] = compile_(m._silu_table_kernel, {"t_ptr": "*bf16"}, {"TABLE": 1, "BLOCK": 1024},
                                         num_warps=4)
for op, kern in (("modulate_fp8_warp", "_modulate_fp8_warp_kernel"),
                 ("gate_residual_modulate_fp8_warp", "_gate_residual_modulate_fp8_warp_kernel")):
    m = load(op)
    wconst = {"stride_xc": 1, "stride_ec": 1, "stride_gc": 1, "stride_bc": 1, "stride_w": 1, "stride_shc": 1,
              "stride_scc": 1, "PIECE": 1024, "LOG": m.LOG2_MAX, "NP": 6, "NFULL": 5, "XMOD": ".cg", "SMOD": ".cs", "QUOT": 0,
              "RELOAD": 0, "PERSIST": 0, "STAGES": 1, "TW": 1024, "UNPACK": 0, "PREFETCH": 0}
    fn = getattr(m, kern)
    wconst = {k: v for k, v in wconst.items() if k in fn.arg_names}
    out[op] = compile_(fn, types, wconst, num_warps=1, enable_fp_fusion=False)
    out[op + "_quot"] = compile_(fn, types, {**wconst, "QUOT": 1}, num_warps=1, enable_fp_fusion=False)
    out[op + "_reload"] = compile_(fn, types, {**wconst, "RELOAD": 1}, num_warps=4, enable_fp_fusion=False)
    div = ("n_cols", "stride_xr", "stride_er", "stride_br", "stride_rr", "stride_shr", "stride_scr", "stride_q",
           "stride_hs")
    for reload in (1, 2):
        out[f"{op}_reload{reload}_w1"] = compile_(fn, types, {**wconst, "QUOT": 1, "RELOAD": reload}, div, num_warps=1,
                                                  enable_fp_fusion=False)
    if "PERSIST" in fn.arg_names:   # the row loop, pipelined over two stages
        out[op + "_persist"] = compile_(fn, types, {**wconst, "QUOT": 1, "PERSIST": 1, "STAGES": 2}, div, num_warps=1,
                                        enable_fp_fusion=False)
    # the heuristics' builds (modulate_fp8_warp: the unpipelined row loop, RELOAD 0; the residual: RELOAD 1) with and
    # without TAIL 1 (the last piece 256 columns wide) and UNPACK 1
    heur = {"modulate_fp8_warp": {"RELOAD": 0, "PERSIST": 1056}}.get(op, {"RELOAD": 1, "PERSIST": 0})
    for tw, unpack in ((1024, 0), (256, 0), (256, 1)):
        out[f"{op}_tw{tw}_u{unpack}"] = compile_(fn, types, {**wconst, "QUOT": 1, **heur, "TW": tw, "UNPACK": unpack},
                                                 div, num_warps=1, enable_fp_fusion=False)
    if "PREFETCH" in fn.arg_names:   # the row loop carrying the next row's pieces (TAIL 1)
        for unpack in (0, 1):
            out[f"{op}_prefetch_u{unpack}"] = compile_(fn, types, {**wconst, "QUOT": 1, "RELOAD": 0, "PERSIST": 1056,
                                                                   "TW": 256, "UNPACK": unpack, "PREFETCH": 1}, div,
                                                       num_warps=1, enable_fp_fusion=False)
    if "hs_ptr" in fn.arg_names:   # RELOAD 4: h through the program's scratch row, in the row loop (TAIL 1)
        out[op + "_reload4"] = compile_(fn, types, {**wconst, "QUOT": 1, "RELOAD": 4, "PERSIST": 1056, "TW": 256}, div,
                                        num_warps=1, enable_fp_fusion=False)
m = load("head_merge_fp8")
cfg = load_space("head_merge_fp8").heuristic()
const = {"s_d": 1, "D": 128, "BLOCK_D": 128, "BLOCK_P": 64, "ROWS": cfg["ROWS"], "EVICT": cfg["EVICT"],
         "QUOT": 0}   # the IEEE quotient per element; head_merge_fp8_quot below is the heuristic's QUOT 1
out["head_merge_fp8"] = compile_(m._merge_fp8_kernel, {"x_ptr": "*bf16", "q_ptr": "*fp8e4nv", "s_ptr": "*fp32"},
                                 const, num_warps=cfg["num_warps"])
out["head_merge_fp8_quot"] = compile_(m._merge_fp8_kernel, {"x_ptr": "*bf16", "q_ptr": "*fp8e4nv", "s_ptr": "*fp32"},
                                      {**const, "QUOT": 1}, num_warps=cfg["num_warps"])
m = load("swiglu_fp8")
const = {"BLOCK_A": 8192, "BLOCK_B": 4096, "BLOCK_C": 2048, "SUB": 16, "MAXN": 16, "EVICT": "", "QUOT": 1}
out["swiglu_fp8_fast"] = compile_(m._swiglu_fp8_fast_kernel, {"x_ptr": "*bf16", "q_ptr": "*fp8e4nv", "s_ptr": "*fp32"},
                                  const, num_warps=16)

@triton.jit
def _plain_div(x_ptr, y_ptr, o_ptr, N: tl.constexpr):
    c = tl.arange(0, N)
    tl.store(o_ptr + c, tl.load(x_ptr + c) / tl.load(y_ptr + c))

out["plain_div"] = compile_(_plain_div, {"x_ptr": "*fp32", "y_ptr": "*fp32", "o_ptr": "*fp32"}, {"N": 128},
                            num_warps=4)
print(json.dumps({"results": out}))
"""


def test_fp8_templates_compile_for_sm90(tmp_path):
    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    script = tmp_path / "compile_fp8.py"      # a file: @triton.jit needs its kernels' source on disk
    script.write_text(_COMPILE)
    p = subprocess.run([sys.executable, str(script), str(root)], check=False, capture_output=True, text=True, env=env,
                       cwd=root, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads(p.stdout.strip().splitlines()[-1])
    if "skip" in res:
        pytest.skip(res["skip"])
    r = res["results"]
    for name, got in r.items():
        assert got["cubin"] > 0 and got["shared"] <= 227 * 1024, (name, got)
    quantisers = ("fp8_linear", "modulate_fp8", "gate_residual_modulate_fp8", "swiglu_fp8", "head_merge_fp8")
    for name in quantisers:
        ops = r[name]["ops"]
        assert "cvt.rn.satfinite.e4m3x2.f32" in ops and "div.rn.f32" in ops, (name, ops)
        assert "div.full.f32" not in ops and not any(o.startswith("rsqrt") for o in ops), (name, ops)
    assert "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3" in r["fp8_linear"]["ops"]
    # fp8_gemm_tma: the operand tiles by TMA (2-D bulk tensor copies), the widest e4m3 wgmma
    assert {"cp.async.bulk.tensor.2d", "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3"} <= set(
        r["fp8_gemm_tma"]["ops"]), r["fp8_gemm_tma"]
    assert "cp.async.bulk.tensor.2d" not in r["fp8_linear"]["ops"]
    assert "sqrt.rn.f32" in r["modulate_fp8"]["ops"]
    # Triton contracts x * x + y * y into an fma by default (H200 run 20: 4% of modulate_fp8's bytes differed); the
    # template launches with enable_fp_fusion=False, and its sum of squares then rounds every product as torch does
    assert "fma.rn.f32" in r["modulate_fp8_fused"]["ops"] and "fma.rn.f32" not in r["modulate_fp8"]["ops"]
    # gate_residual_modulate_fp8 likewise, and its gate * branch + res is not one fma either (the product rounds to
    # bf16 first; the eager r is an output, bitwise)
    g = "gate_residual_modulate_fp8"
    assert "sqrt.rn.f32" in r[g]["ops"]
    assert "fma.rn.f32" in r[g + "_fused"]["ops"] and "fma.rn.f32" not in r[g]["ops"]
    assert "div.rn.f64" in r["swiglu_fp8"]["ops"] and not any(o.startswith("ex2") for o in r["swiglu_fp8"]["ops"])
    assert r["plain_div"]["ops"] == ["div.full.f32"]
    # QUOT: the per-element quotient is a reciprocal and fmas (one div.rn.f32 a row), fast swiglu's silu is ex2 with
    # the fp64 fallback still compiled in
    for name in ("head_merge_fp8_quot", "swiglu_fp8_fast", "modulate_fp8_quot", "gate_residual_modulate_fp8_quot"):
        assert {"fma.rn.f32", "div.rn.f32", "cvt.rn.satfinite.e4m3x2.f32"} <= set(r[name]["ops"]), (name, r[name])
    assert any(o.startswith("ex2.approx") for o in r["swiglu_fp8_fast"]["ops"]), r["swiglu_fp8_fast"]
    # and no division per element left: one div.rn.f32 for the scale and one for the reciprocal a row (modulate_fp8
    # two more for its rstd; head_merge's QUOT 0 build has one per element a thread holds)
    for name, most in (("head_merge_fp8_quot", 2), ("modulate_fp8_quot", 4), ("gate_residual_modulate_fp8_quot", 4),
                       ("swiglu_fp8_fast", 2)):
        assert r[name]["div_rn_f32"] <= most, (name, r[name]["div_rn_f32"])
    assert r["head_merge_fp8"]["div_rn_f32"] >= 16, r["head_merge_fp8"]["div_rn_f32"]
    assert "div.rn.f64" in r["swiglu_fp8_fast"]["ops"] and "div.full.f32" in r["swiglu_fp8_fast"]["ops"]
    # TABLE: no fp64 silu per element in the row kernel (the table kernel has it); TABLE 1 gathers from shared memory
    for name in ("swiglu_fp8_table1", "swiglu_fp8_table2"):
        assert "div.rn.f64" not in r[name]["ops"] and "cvt.rn.satfinite.e4m3x2.f32" in r[name]["ops"], r[name]
    assert "ld.shared" in r["swiglu_fp8_table1"]["ops"] and "div.rn.f64" in r["swiglu_fp8_table_build"]["ops"]
    # the eight-piece templates at one warp: the canonical tree in registers and lane shuffles (no shared memory, no
    # barrier), no fma (QUOT 0; QUOT 1's are explicit), the IEEE square root and quotients
    for name in ("modulate_fp8_warp", "gate_residual_modulate_fp8_warp"):
        ops = r[name]["ops"]
        assert r[name]["shared"] == 0 and "bar.sync" not in ops and "ld.shared" not in ops, (name, r[name])
        assert {"sqrt.rn.f32", "div.rn.f32", "cvt.rn.satfinite.e4m3x2.f32"} <= set(ops), (name, ops)
        assert "fma.rn.f32" not in ops and "fma.rn.f32" in r[name + "_quot"]["ops"], name
        assert "div.full.f32" not in ops and not any(o.startswith("rsqrt") for o in ops), (name, ops)
        # RELOAD at 4 warps (gate_residual_modulate_fp8_warp's heuristic until run 79 h2): the tree's cross-warp levels
        # and, for the residual, the barrier before r is read back take shared memory and bar.sync
        assert "bar.sync" in r[name + "_reload"]["ops"] and "sqrt.rn.f32" in r[name + "_reload"]["ops"], name
        # at one warp, as a launch at H3's width builds it: RELOAD 1 (the locked configs) holds h, 255 registers; RELOAD
        # 2 (h made twice, nothing held across pieces) no stack, and modulate_fp8_warp's under half the registers
        (reg1, _, ins1), (reg2, stack2, _) = r[name + "_reload1_w1"]["resources"], r[name + "_reload2_w1"]["resources"]
        if reg1 is not None:
            assert reg1 == 255 and stack2 == 0, (name, reg1, reg2, stack2)
            assert name != "modulate_fp8_warp" or reg2 < 128, reg2
            # a non-finite row's NaN bytes are a branch of the program, not a select per element: selecting among
            # the converted bytes (4,927 instructions in modulate_fp8_warp's program) unpacked and repacked them, a
            # select in fp32 cost one a byte (4,399); the branches' common path has about 4,015 (docs/kernels.md)
            assert ins1 == 0, (name, ins1)
    # TAIL 1 drops the sixth piece's 768 padding columns: fewer instructions and, with UNPACK (modulate_fp8_warp) or
    # RELOAD 1 (the residual's heuristic), no stack, where the full-width builds spill (twenty-eighth session: 4,896
    # -> 4,552 and 160 -> 0 bytes; 6,168 -> 5,376 and 56 -> 0)
    for name, tail in (("modulate_fp8_warp", "_tw256_u1"), ("gate_residual_modulate_fp8_warp", "_tw256_u0")):
        (_, stack0, _), (_, stack1, _) = r[name + "_tw1024_u0"]["resources"], r[name + tail]["resources"]
        if stack0 is not None:
            assert stack0 > 0 and stack1 == 0, (name, stack0, stack1)
        assert r[name + tail]["shared"] == 0, (name, r[name + tail])   # the widening is register selects
        if r[name + tail]["sass"]:
            assert r[name + tail]["sass"] < 0.95 * r[name + "_tw1024_u0"]["sass"], (name, r[name + tail]["sass"])
    # PREFETCH (modulate_fp8_warp's row loop carrying the next row's pieces, each loaded after the same piece's bytes):
    # no stack and no shared memory (the whole next row loaded before the bytes spilled 360 bytes; twenty-ninth
    # session: 255 registers, 4,448 instructions with TAIL, against a 96-byte stack and 4,368 without PREFETCH)
    # (gate_residual_modulate_fp8_warp's carries res and branch, twice the bytes: 160- and 64-byte stacks, not checked)
    for name in ("modulate_fp8_warp_prefetch_u0", "modulate_fp8_warp_prefetch_u1",
                 "gate_residual_modulate_fp8_warp_prefetch_u0", "gate_residual_modulate_fp8_warp_prefetch_u1"):
        reg, stack, _ = r[name]["resources"]
        assert r[name]["shared"] == 0
        if stack is not None and name.startswith("modulate"):
            assert stack == 0, (name, reg, stack)
    # RELOAD 4 holds nothing across pieces (h goes to the scratch row): at most 128 registers (16 one-warp programs
    # an SM or more; thirtieth session: 106 registers, 4,904 instructions), no stack, no shared memory
    # (gate_residual_modulate_fp8_warp: r made in the tree's order, at most 168: 12 programs an SM; 162 registers)
    for name, cap in (("modulate_fp8_warp", 128), ("gate_residual_modulate_fp8_warp", 168)):
        reg, stack, _ = r[name + "_reload4"]["resources"]
        assert r[name + "_reload4"]["shared"] == 0
        if reg is not None:
            assert reg <= cap and stack == 0, (name, reg, stack)
    # the eight-piece templates' PERSIST loop with STAGES 2: Triton pipelines the next rows' loads into shared memory
    # (cp.async, no stack); one program a row has neither
    for name in ("modulate_fp8_warp", "gate_residual_modulate_fp8_warp"):
        p, one = r[name + "_persist"], r[name + "_reload1_w1"]
        assert "cp.async.cg.shared.global" in p["ops"] and p["shared"] > 0, (name, p)
        assert "cp.async.cg.shared.global" not in one["ops"] and one["shared"] == 0, (name, one)
        assert p["resources"][1] in (None, 0), (name, p["resources"])
