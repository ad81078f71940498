"""The CuTe DSL template compiles for Hopper (sm_90a) on a machine without a GPU, through K.cute_launch's argument
binding (rsi.kernel._cute_args, _cute_bind): CuTe DSL traces and compiles to PTX on the CPU; only running needs the
GPU. Checks what the template's docstring claims of the PTX: 16-byte accesses where rows and base are 16-byte
aligned, narrower loads where they are not (the op group's layout 2), and MATH=1 compiling to the Triton template's
ex2.approx and div.full. Runs in a fresh interpreter (CUTE_DSL_ARCH and the dump directory are read when cutlass is
imported); skipped without the [cute] extra."""

from __future__ import annotations

import collections
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

_COMPILE = r"""
import collections, glob, importlib.util, json, os, re, sys
import torch
import cuda.bindings.driver as cuda
from cutlass import cute
from cutlass.cute.runtime import from_dlpack
from rsi import kernel as K
from rsi.spaces import load_space
spec = importlib.util.spec_from_file_location("tpl_gelu_tanh_cute", sys.argv[1])
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
space = load_space("gelu_tanh").select("gelu_tanh_cute")
out = []
# (rows, cols, row padding, storage offset): contiguous, and the op group's layout 2 (odd stride, odd offset)
for (rows, cols, pad, off), math in (((126, 8192, 0, 0), 1), ((333, 1000, 3, 1), 0)):
    cfg = {**space.heuristic(), "MATH": math, "VEC": 8}
    base = torch.zeros(rows * (cols + pad) + off, dtype=torch.bfloat16)
    x = base[off:].view(rows, cols + pad)[:, :cols]
    y = torch.empty(rows, cols, dtype=torch.bfloat16)
    key, positional = K._cute_args(m._gelu_host, (x, y), cfg, cuda.CUstream(0), from_dlpack)
    compile_args, layout = K._cute_bind(m._gelu_host, positional, cfg)
    for f in glob.glob(os.path.join(os.environ["CUTE_DSL_DUMP_DIR"], "*.ptx")):
        os.remove(f)
    cute.compile(m._gelu_host, *compile_args)
    ptx = "".join(open(f).read() for f in glob.glob(os.path.join(os.environ["CUTE_DSL_DUMP_DIR"], "*.ptx")))
    ops = collections.Counter(re.findall(r"(?:ld|st)\.global[.a-z0-9]*|ex2[.a-z0-9]*|div\.[a-z0-9.]*", ptx))
    out.append({"layout": [rows, cols, pad, off], "math": math, "ops": dict(ops), "call": list(layout)})
print(json.dumps(out))
"""



def _compile(tmp_path, script: str, template: str) -> subprocess.CompletedProcess:
    """Run ``script`` on rsi/templates/<template>.py in a fresh interpreter that compiles for sm_90a and keeps the
    PTX in tmp_path (skipped without the [cute] extra); its exit status is asserted."""
    pytest.importorskip("cutlass.cute", reason="CuTe DSL is not installed (pip install -e '.[cute]')")
    env = {**os.environ, "CUTE_DSL_ARCH": "sm_90a", "CUTE_DSL_KEEP": "ptx", "CUTE_DSL_DUMP_DIR": str(tmp_path),
           "CUTE_DSL_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("TRITON_INTERPRET", None)
    tpl = Path(__file__).resolve().parents[2] / "rsi" / "templates" / f"{template}.py"
    r = subprocess.run([sys.executable, "-c", script, str(tpl)], capture_output=True, text=True, timeout=600,
                       env=env, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    return r

def test_cute_template_compiles_for_sm90(tmp_path):
    r = _compile(tmp_path, _COMPILE, "gelu_tanh_cute")
    aligned, odd = json.loads(r.stdout.strip().splitlines()[-1])
    assert aligned["call"] == odd["call"] == [0, 1, 2]  # x, out, stream: the Constexpr config is compiled in
    assert aligned["ops"].get("ld.global.v4.b32") and aligned["ops"].get("st.global.v4.b32")
    assert not any(k.startswith("ld.global.b16") for k in aligned["ops"])
    assert aligned["ops"].get("div.full.f32") and aligned["ops"].get("ex2.approx.ftz.f32")  # MATH=1: Triton's
    assert odd["ops"].get("ld.global.b16") and not odd["ops"].get("ld.global.v4.b32")     # unaligned rows
    assert odd["ops"].get("div.rn.f32") and not odd["ops"].get("div.full.f32")            # MATH=0: IEEE


_COMPILE_GEMM = r"""
import collections, glob, importlib.util, json, os, re, sys
import torch
import cuda.bindings.driver as cuda
from cutlass import cute
from cutlass.cute.runtime import from_dlpack
from rsi import kernel as K
from rsi.spaces import load_space
spec = importlib.util.spec_from_file_location("tpl_fp8_gemm_cute", sys.argv[1])
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
out = []
# the heuristic at a production-like shape; one consumer warpgroup with N and K tails (the odd shape)
for (rows, k, n), cfg in (((200, 5376, 21504), load_space("fp8_gemm").heuristic()),
                          ((333, 1008, 200), {"BM": 64, "BN": 128, "STAGES": 6, "GROUP_M": 8, "PERSIST": 0})):
    x8, w8 = torch.empty(rows, k, dtype=torch.float8_e4m3fn), torch.empty(n, k, dtype=torch.float8_e4m3fn)
    xs, ws, y = torch.empty(rows), torch.empty(n), torch.empty(rows, n, dtype=torch.bfloat16)
    key, positional = K._cute_args(m._fp8_gemm_host, (x8, xs, w8, ws, y), cfg, cuda.CUstream(0), from_dlpack)
    compile_args, layout = K._cute_bind(m._fp8_gemm_host, positional, cfg)
    for f in glob.glob(os.path.join(os.environ["CUTE_DSL_DUMP_DIR"], "*.ptx")):
        os.remove(f)
    cute.compile(m._fp8_gemm_host, *compile_args)
    ptx = "".join(open(f).read() for f in glob.glob(os.path.join(os.environ["CUTE_DSL_DUMP_DIR"], "*.ptx")))
    ops = collections.Counter(re.findall(r"wgmma\.mma_async[.a-z0-9_]*|cp\.async\.bulk\.tensor\.2d\.shared[^.]*|"
                                         r"setmaxnreg[.a-z0-9]*|cvt\.rn\.bf16\.f32|fma\.rn\.f32", ptx))
    out.append({"cfg": cfg, "ops": dict(ops), "call": list(layout)})
print(json.dumps(out))
"""


def test_fp8_gemm_template_compiles_for_sm90(tmp_path):
    """rsi/templates/fp8_gemm_cute.py: TMA loads, e4m3 warpgroup MMAs of the configured width, the register split
    with two consumer warpgroups only, and an epilogue of separate fp32 products (no fma) rounded once to bf16."""
    r = _compile(tmp_path, _COMPILE_GEMM, "fp8_gemm_cute")
    wide, narrow = json.loads(r.stdout.strip().splitlines()[-1])
    assert wide["call"] == narrow["call"] == [0, 1, 2, 3, 4, 5]   # x8, x_scale, w8, w_scale, out, stream
    assert wide["ops"].get("wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3")
    assert narrow["ops"].get("wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3")
    for c in (wide, narrow):
        assert c["ops"].get("cp.async.bulk.tensor.2d.shared::cta") and c["ops"].get("cvt.rn.bf16.f32")
        assert not c["ops"].get("fma.rn.f32")
    assert wide["ops"].get("setmaxnreg.inc.sync.aligned.u32") and not narrow["ops"].get("setmaxnreg.inc.sync.aligned.u32")


_COMPILE_ATTENTION = r"""
import collections, glob, importlib.util, json, os, re, sys
import torch
import cuda.bindings.driver as cuda
from cutlass import cute
from cutlass.cute.runtime import from_dlpack
from rsi import kernel as K
from rsi.refs import get_op_group
spec = importlib.util.spec_from_file_location("tpl_attention_cute", sys.argv[1])
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
op = get_op_group("attention")
shape = next(s for s in op.interp_shapes if s.name == "cross_docs")
out = []
for layout, cfg, dynamic in ((0, {"BM": 128, "BN": 128, "STAGES": 2, "PINGPONG": 0, "OVERLAP": 0}, False),
                             (2, {"BM": 128, "BN": 64, "STAGES": 3, "PINGPONG": 1, "OVERLAP": 1}, False),
                             (2, {"BM": 128, "BN": 128, "STAGES": 2, "PINGPONG": 0, "OVERLAP": 1}, True)):
    q, k, v, cu_q, cu_k = op.make_inputs(shape, 7, "cpu", layout)
    packed = [t for t in (q, k, v) if not (t.stride(-1) == 1 and t.stride(0) % 8 == 0 and t.stride(1) % 8 == 0
                                           and t.storage_offset() % 8 == 0)]
    ptxs = {}
    for fn, args in [(m._attention_host, (q.contiguous(), k.contiguous(), v.contiguous(), torch.empty_like(q), cu_q,
                                           cu_k))] + [(m._pack_host, (t, torch.empty(t.shape, dtype=t.dtype)))
                                                      for t in packed[:1]]:
        c = cfg if fn is m._attention_host else {}
        key, positional = K._cute_args(fn, args, c, cuda.CUstream(0), from_dlpack, dynamic)
        compile_args, call = K._cute_bind(fn, positional, c)
        for f in glob.glob(os.path.join(os.environ["CUTE_DSL_DUMP_DIR"], "*.ptx")):
            os.remove(f)
        cute.compile(fn, *compile_args)
        dump = os.environ["CUTE_DSL_DUMP_DIR"]
        ptxs[fn.__name__] = "".join(open(f).read() for f in glob.glob(os.path.join(dump, "*.ptx")))
    ptx = ptxs["_attention_host"]
    ops = collections.Counter(re.findall(r"wgmma\.mma_async[.a-z0-9_]*|cp\.async\.bulk\.tensor\.3d\.shared[^.]*|"
                                         r"setmaxnreg[.a-z0-9]*|ex2\.approx[.a-z0-9]*|cvt\.rn\.bf16x2\.f32|"
                                         r"fence\.proxy\.async\.shared::cta|[ld|st]+\.local|bar\.arrive", ptx))
    out.append({"cfg": cfg, "layout": layout, "dynamic": dynamic, "packed": len(packed),
                "pack_ptx": "_pack_host" in ptxs,
                "ops": dict(ops)})
print(json.dumps(out))
"""


def test_attention_template_compiles_for_sm90(tmp_path):
    """rsi/templates/attention_cute.py in its plain form (128 keys a block) and at 64 keys, 3 stages, ping-pong and
    intra-warpgroup overlap: Q, K and V by 3-D TMA, the register split, BN / 16 + 8 bf16 warpgroup MMAs a key block
    (S = Q K^T over the head dim, O += P V over the keys; the overlap peels one of each off its loop), one ex2.approx
    per score and two per row pair for the rescale, P converted in pairs, the proxy fence before the zeroed V rows
    are read by wgmma, and nothing in local memory. The odd layout (2) has tensors TMA cannot read, which the launch
    packs first: that copy kernel compiles too. The same with dynamic layouts (DYNAMIC 1: K.cute_launch_dynamic) at
    128 keys with OVERLAP: the same instructions."""
    r = _compile(tmp_path, _COMPILE_ATTENTION, "attention_cute")
    wide, narrow, dynamic = json.loads(r.stdout.strip().splitlines()[-1])
    # OVERLAP 1: the first block's QK^T and softmax and the last block's PV are peeled off the loop
    for c, bn, copies in ((wide, 128, 1), (narrow, 64, 2), (dynamic, 128, 2)):
        ops = c["ops"]
        assert ops.get("cp.async.bulk.tensor.3d.shared::cta") and ops.get("fence.proxy.async.shared::cta")
        assert ops.get("setmaxnreg.inc.sync.aligned.u32") and ops.get("setmaxnreg.dec.sync.aligned.u32")
        want = collections.Counter({f"m64n{bn}k16": copies * 128 // 16})   # QK^T: the head dim in steps of 16
        want["m64n128k16"] += copies * bn // 16                              # PV: the block's keys in steps of 16
        got = {k.split(".")[4]: n for k, n in ops.items() if k.startswith("wgmma.mma_async")}
        assert got == dict(want) and all(k.endswith(".f32.bf16.bf16") for k in ops if k.startswith("wgmma"))
        assert ops.get("ex2.approx.ftz.f32") == copies * (bn // 2 + 2) and ops.get("cvt.rn.bf16x2.f32", 0) >= bn // 4
        assert not ops.get("ld.local") and not ops.get("st.local")
    assert wide["packed"] == 0 and narrow["packed"] >= 1 and narrow["pack_ptx"] and dynamic["pack_ptx"]
    # PINGPONG 1 with OVERLAP 1: the GEMM turn handed on at the start, after the first QK^T, in the loop and at the end
    assert not wide["ops"].get("bar.arrive") and narrow["ops"].get("bar.arrive") == 4


_COMPILE_FP8_ATTENTION = r"""
import collections, glob, importlib.util, json, os, re, sys
import torch
import cuda.bindings.driver as cuda
from cutlass import cute
from cutlass.cute.runtime import from_dlpack
from rsi import kernel as K
from rsi.refs import get_op_group
spec = importlib.util.spec_from_file_location("tpl_attention_fp8_cute", sys.argv[1])
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
op = get_op_group("attention_fp8")
shape = next(s for s in op.interp_shapes if s.name == "three_docs")
q, k, v, cu = op.make_inputs(shape, 7, "cpu", 2)          # odd strides: the quantisers read any layout
S, H, D = q.shape
n_pad = (S + 31) // 32 * 32 + 32 * (cu.numel() - 1)
part, scales = torch.empty(3, H, m.AMAX_CTAS), torch.empty(3, H)
q8 = torch.empty(S, H, D, dtype=torch.float8_e4m3fn)
vt = torch.empty(H, D, n_pad, dtype=torch.float8_e4m3fn)
out = {}
calls = [("amax", m._amax_host, (v, part[2]), {}, True),
         ("rows", m._quant_rows_host, (q, part[0], q8, scales[0]), {}, True),
         ("vt", m._quant_vt_host, (v, part[2], cu, vt, scales[2]), {}, True)]
# QVEC 1's passes, static layouts: layout 0 (16-byte rows) and layout 2's v (odd offset: 2-byte loads)
q0, k0, v0, _ = op.make_inputs(shape, 7, "cpu", 0)
calls += [("amax_vec", m._amax_vec_host, (q0, part[0]), {}, False),
          ("amax_vec_odd", m._amax_vec_host, (v, part[2]), {}, False),
          ("rows_vec", m._quant_rows_vec_host, (q0, part[0], q8, scales[0]), {}, False),
          ("vt_vec", m._quant_vt_vec_host, (v0, part[2], cu, vt, scales[2]), {}, False),
          ("vt_vec_odd", m._quant_vt_vec_host, (v, part[2], cu, vt, scales[2]), {}, False),
          ("vt_vec_first", m._quant_vt_vec_host, (v0, part[2], cu, vt, scales[2]), {"LOADS_FIRST": 1}, False),
          ("amax_batch", m._amax_vec_host, (q0, part[0]), {"BATCH": 8}, False),
          ("rows_batch", m._quant_rows_vec_host, (q0, part[0], q8, scales[0]), {"BATCH": 8}, False)]
for bn, stages, pp, ov, dyn, emu in ((128, 2, 0, 1, False, 0), (64, 3, 1, 0, False, 0), (128, 2, 0, 1, True, 0),
                                     (192, 2, 1, 1, False, 0), (192, 2, 1, 1, False, 3)):
    cfg = {"BM": 128, "BN": bn, "STAGES": stages, "PINGPONG": pp, "OVERLAP": ov, "EMU": emu}
    calls.append((f"attn_{bn}_{stages}_{pp}_{ov}_{int(dyn)}" + (f"_emu{emu}" if emu else ""), m._attention_host,
                  (q8, q8, vt, torch.empty_like(q), cu, cu, scales), cfg, dyn))
for name, fn, args, cfg, dyn in calls:
    _, positional = K._cute_args(fn, args, cfg, cuda.CUstream(0), from_dlpack, dyn)
    compile_args, _ = K._cute_bind(fn, positional, cfg)
    for f in glob.glob(os.path.join(os.environ["CUTE_DSL_DUMP_DIR"], "*.ptx")):
        os.remove(f)
    cute.compile(fn, *compile_args)
    ptx = "".join(open(f).read() for f in glob.glob(os.path.join(os.environ["CUTE_DSL_DUMP_DIR"], "*.ptx")))
    out[name] = dict(collections.Counter(re.findall(
        r"wgmma\.mma_async[.a-z0-9_]*|cvt\.rn\.satfinite\.e4m3x2\.f32|div\.[a-z0-9.]*|ex2\.approx[.a-z0-9]*|"
        r"cp\.async\.bulk\.tensor\.3d\.shared[^.]*|[ld|st]+\.local|max\.f32|shfl\.sync\.bfly\.b32|"
        r"(?:ld|st)\.global[.a-z0-9]*|fma\.rn\.f32|shl\.b32", ptx)))
print(json.dumps(out))
"""


def test_fp8_attention_template_compiles_for_sm90(tmp_path):
    """rsi/templates/attention_fp8_cute.py: its three quantisation passes (IEEE division, the saturating e4m3
    conversion, the amax by max and shuffles) and its attention kernel at 128 keys with OVERLAP (static and dynamic
    layouts), at 64 keys, 3 stages with PINGPONG and at 192 keys (the 64-byte swizzle) with both: e4m3 x e4m3
    warpgroup MMAs, D / 32 for Q K^T and BN / 32 for P V
    a key block (the overlap peels one of each off its loop), P converted to e4m3 in pairs, one ex2 per score and two
    per row pair, Q, K and V^T by 3-D TMA and nothing in local memory; and QVEC 1's vectorised passes (16-byte
    loads where the layout allows them, the Markstein quotient, 8-byte e4m3 stores), and EMU's exponentials off
    the MUFU."""
    r = _compile(tmp_path, _COMPILE_FP8_ATTENTION, "attention_fp8_cute")
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["amax"].get("max.f32") and res["amax"].get("shfl.sync.bfly.b32") and not res["amax"].get("div.rn.f32")
    for name in ("rows", "vt"):
        assert res[name].get("div.rn.f32") and res[name].get("cvt.rn.satfinite.e4m3x2.f32")
        assert not any(k.startswith(("div.full", "div.approx")) for k in res[name])
    # QVEC 1: 16-byte loads where the layout allows them, 2-byte ones where it does not (v at an odd offset); the
    # quotient by the head's reciprocal and two fmas an element (two IEEE divisions a CTA: the scale, its reciprocal);
    # e4m3 in pairs, stored 8 bytes at a time
    assert res["amax_vec"].get("ld.global.v4.b32") and not res["amax_vec"].get("ld.global.b16")
    assert res["amax_vec_odd"].get("ld.global.b16") and not res["amax_vec_odd"].get("ld.global.v4.b32")
    for name, vecs in (("rows_vec", 2), ("vt_vec", 8), ("vt_vec_odd", 8), ("vt_vec_first", 8)):
        ops = res[name]
        assert ops.get("div.rn.f32") == 2 and ops.get("fma.rn.f32") == 2 * 8 * vecs, ops
        assert ops.get("cvt.rn.satfinite.e4m3x2.f32") == 4 * vecs and ops.get("st.global.v2.b32") == vecs, ops
        assert not ops.get("ld.local") and not ops.get("st.local")
    assert res["rows_vec"].get("ld.global.v4.b32") == 2 and res["vt_vec"].get("ld.global.v4.b32") == 8
    assert res["vt_vec_first"].get("ld.global.v4.b32") == 8   # QVEC 2: the same loads, issued before the quotients
    assert res["vt_vec_odd"].get("ld.global.b16") == 64 and not res["vt_vec_odd"].get("ld.global.v4.b32")
    # QVEC 3: the amax and row passes' 8 vectors a thread (one loop trip: 8 loads, not the 4 of QVEC 1's unrolled
    # amax loop nor the 2 of its row loop), the row pass's 8 quotients and 8-byte stores per vector
    assert res["amax_vec"].get("ld.global.v4.b32") == 4 and res["amax_batch"].get("ld.global.v4.b32") == 8
    assert res["amax_batch"].get("max.f32") == 8 * 8 + 8 and not res["amax_batch"].get("ld.local")
    ops = res["rows_batch"]
    assert ops.get("ld.global.v4.b32") == 8 and ops.get("st.global.v2.b32") == 8 and ops.get("fma.rn.f32") == 2 * 64
    assert ops.get("div.rn.f32") == 2 and not ops.get("ld.local") and not ops.get("st.local")
    for (bn, copies), name in zip(((128, 2), (64, 1), (128, 2), (192, 2)),
                                  ("attn_128_2_0_1_0", "attn_64_3_1_0_0", "attn_128_2_0_1_1", "attn_192_2_1_1_0")):
        ops = res[name]
        got = {k.split(".")[4]: n for k, n in ops.items() if k.startswith("wgmma.mma_async")}
        assert got == ({f"m64n{bn}k32": copies * 128 // 32, "m64n128k32": copies * bn // 32} if bn != 128
                       else {"m64n128k32": copies * (128 + bn) // 32}), got
        assert all(k.endswith(".f32.e4m3.e4m3") for k in ops if k.startswith("wgmma"))
        assert ops.get("cvt.rn.satfinite.e4m3x2.f32") == copies * bn // 4
        assert ops.get("ex2.approx.ftz.f32") == copies * (bn // 2 + 2)
        assert ops.get("cp.async.bulk.tensor.3d.shared::cta") and not ops.get("ld.local") and not ops.get("st.local")
    # EMU 3: 3 of every 8 score columns by _exp2_fma (three fmas and a shift each), the rest and the row factors on
    # the MUFU
    plain, emu = res["attn_192_2_1_1_0"], res["attn_192_2_1_1_0_emu3"]
    emulated = 2 * 2 * (192 // 4) * 3 // 8          # two copies of the softmax (OVERLAP 1), two rows a thread
    assert emu.get("ex2.approx.ftz.f32") == plain.get("ex2.approx.ftz.f32") - emulated, (plain, emu)
    assert emu.get("fma.rn.f32", 0) - plain.get("fma.rn.f32", 0) == 3 * emulated
    assert emu.get("shl.b32", 0) - plain.get("shl.b32", 0) == emulated
    assert not emu.get("ld.local") and not emu.get("st.local")


_COMPILE_FP8_SINK = r"""
import glob, importlib.util, json, os, sys
import torch
import cuda.bindings.driver as cuda
from cutlass import cute
from cutlass.cute.runtime import from_dlpack
from rsi import kernel as K
from rsi.refs import get_op_group
spec = importlib.util.spec_from_file_location("tpl_attention_fp8_cute", sys.argv[1])
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
op = get_op_group("attention_fp8")
shape = next(s for s in op.interp_shapes if s.name == "three_docs")
q, k, v, cu = op.make_inputs(shape, 7, "cpu", 0)
S, H, D = q.shape
n_pad = (S + 31) // 32 * 32 + 32 * (cu.numel() - 1)
q8 = torch.empty(S, H, D, dtype=torch.float8_e4m3fn)
vt = torch.empty(H, D, n_pad, dtype=torch.float8_e4m3fn)
paths = {}
for sink in (0, 1):
    cfg = {"BM": 128, "BN": 192, "STAGES": 2, "PINGPONG": 1, "OVERLAP": 1, "EMU": 0, "SINK": sink}
    args = (q8, q8, vt, torch.empty_like(q), cu, cu, torch.empty(3, H))
    _, positional = K._cute_args(m._attention_host, args, cfg, cuda.CUstream(0), from_dlpack, False)
    compile_args, _ = K._cute_bind(m._attention_host, positional, cfg)
    for f in glob.glob(os.path.join(os.environ["CUTE_DSL_DUMP_DIR"], "*.ptx")):
        os.remove(f)
    cute.compile(m._attention_host, *compile_args)
    ptx = "".join(open(f).read() for f in glob.glob(os.path.join(os.environ["CUTE_DSL_DUMP_DIR"], "*.ptx")))
    paths[sink] = os.path.join(os.environ["CUTE_DSL_DUMP_DIR"], f"sink{sink}.ptx.txt")
    open(paths[sink], "w").write(ptx)
print(json.dumps(paths))
"""


def _sass(ptx_path: str, tmp_path) -> list[str]:
    """SASS of a CuTe DSL PTX file through Triton's bundled ptxas and nvdisasm (sm_90a): the PTX's .version is
    lowered to the one that ptxas takes (CuTe DSL 4.8 writes 9.4, Triton 3.6's ptxas reads up to 8.7); skipped
    where either tool is missing or refuses the PTX."""
    import re
    import shutil

    triton = pytest.importorskip("triton")
    bin_dir = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    ptxas, nvdisasm = bin_dir / "ptxas", bin_dir / "nvdisasm"
    if not (ptxas.exists() and nvdisasm.exists()) or shutil.which(str(ptxas)) is None:
        pytest.skip("Triton's ptxas / nvdisasm are not installed")
    ver = subprocess.run([str(ptxas), "--version"], capture_output=True, text=True, check=False).stdout
    cuda_ver = re.search(r"release (\d+)\.(\d+)", ver)
    ptx_ver = {(12, 8): "8.7", (12, 9): "8.8"}.get((int(cuda_ver[1]), int(cuda_ver[2]))) if cuda_ver else None
    if ptx_ver is None:
        pytest.skip(f"unknown ptxas version: {ver.strip()[-80:]}")
    src = re.sub(r"^\.version \d+\.\d+", f".version {ptx_ver}", Path(ptx_path).read_text(), flags=re.MULTILINE)
    (tmp_path / "k.ptx").write_text(src)
    r = subprocess.run([str(ptxas), "-arch=sm_90a", str(tmp_path / "k.ptx"), "-o", str(tmp_path / "k.cubin")],
                       capture_output=True, text=True, check=False)
    if r.returncode != 0:
        pytest.skip(f"ptxas refused the lowered PTX: {r.stderr[-300:]}")
    out = subprocess.run([str(nvdisasm), str(tmp_path / "k.cubin")], capture_output=True, text=True, check=True)
    return [re.sub(r"^\s*/\*[0-9a-f]+\*/\s*", "", ln) for ln in out.stdout.splitlines()
            if re.match(r"^\s*/\*[0-9a-f]{4,6}\*/", ln)]


def _loop_exponentials(ins: list[str]) -> tuple[int, int]:
    """The OVERLAP loop's exponentials (MUFU.EX2) between its wait for S (DEPBAR.LE gsb0, 0x1) and its wait for the
    PV product (DEPBAR.LE gsb0, 0x0), and from there to the loop's branch back."""
    i1 = next(i for i, x in enumerate(ins) if "DEPBAR.LE gsb0, 0x1" in x)
    i0 = next(i for i in range(i1, len(ins)) if "DEPBAR.LE gsb0, 0x0" in ins[i])
    ib = next(i for i in range(i0, len(ins)) if " BRA " in f" {ins[i]}")
    return (sum("MUFU.EX2" in x for x in ins[i1:i0]), sum("MUFU.EX2" in x for x in ins[i0:ib]))


def test_fp8_attention_sink_keeps_the_softmax_before_the_pv_wait(tmp_path):
    """SINK 1 (rsi/templates/attention_fp8_cute.py, _sink_row_sums): with the row sums stored to shared memory
    before the wait for the PV product, ptxas schedules all 98 exponentials of a 192-key block (96 scores, 2 row
    factors) before that wait, under the PV product; with SINK 0 it schedules most of them after it (82 of 98 with
    ptxas 12.8), so OVERLAP's softmax does not overlap the PV product. H100 run 76 b: SINK 1 1.02-1.06x SINK 0 at
    h3_full."""
    r = _compile(tmp_path, _COMPILE_FP8_SINK, "attention_fp8_cute")
    paths = {int(k): v for k, v in json.loads(r.stdout.strip().splitlines()[-1]).items()}
    before0, after0 = _loop_exponentials(_sass(paths[0], tmp_path))
    before1, after1 = _loop_exponentials(_sass(paths[1], tmp_path))
    assert before0 + after0 == before1 + after1 == 98
    assert (before1, after1) == (98, 0)
    assert after0 > before0


_COMPILE_MODULATE_FP8 = r"""
import collections, glob, importlib.util, json, os, re, subprocess, sys
import torch
import triton
import cuda.bindings.driver as cuda
from cutlass import cute
from cutlass.cute.runtime import from_dlpack
from rsi import kernel as K
from rsi.refs import get_op_group
spec = importlib.util.spec_from_file_location("tpl_fp8_producer_cute", sys.argv[1])
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
residual = hasattr(m, "_residual_fp8_host")   # gate_residual_modulate_fp8_cute, else modulate_fp8_cute
g = get_op_group("gate_residual_modulate_fp8" if residual else "modulate_fp8")
host = m._residual_fp8_host if residual else m._modulate_fp8_host
out = []
for shape, layout in ((g.shapes[0], 0), (g.odd_shapes[1], 2)):
    args = g.make_inputs(shape.__class__(shape.name, {**shape.dims, "rows": 4}), 0, "cpu", layout)
    x = args[0]
    outs = ((torch.empty(x.shape, dtype=x.dtype),) if residual else ()) + (
        torch.empty(x.shape, dtype=torch.float8_e4m3fn), torch.empty(x.shape[0]))
    cfg = {"THREADS": 128, "CHUNKS": 8, "VEC": 8}
    key, positional = K._cute_args(host, (*args, *outs, float(x.shape[1])), cfg, cuda.CUstream(0), from_dlpack)
    compile_args, lay = K._cute_bind(host, positional, cfg)
    d = os.environ["CUTE_DSL_DUMP_DIR"]
    for f in glob.glob(os.path.join(d, "*.ptx")):
        os.remove(f)
    cute.compile(host, *compile_args)
    ptx = "".join(open(f).read() for f in glob.glob(os.path.join(d, "*.ptx")))
    ops = collections.Counter(re.findall(r"div\.rn\.f32\s+%r\d+, %r\d+, %r\d+|bar\.sync|sqrt\.[a-z0-9.]+|"
                                         r"div\.[a-z0-9.]+|rcp\.[a-z0-9.]+|\.ftz|"
                                         r"cvt\.rn\.satfinite\.e4m3x2\.f32|(?:ld|st)\.local|"
                                         r"(?:ld|st)\.global\.v[24]\.b32", ptx))
    row = {"layout": layout, "ops": dict(ops), "hfma2": None}
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
    if layout == 0 and os.path.exists(os.path.join(tool, "ptxas")):
        src = os.path.join(d, "k.ptx")
        open(src, "w").write(re.sub(r"^\.version 9\.\d+", ".version 8.7", ptx, flags=re.M))
        subprocess.run([os.path.join(tool, "ptxas"), "-arch=sm_90a", src, "-o", src + ".cubin"], check=True)
        sass = subprocess.run([os.path.join(tool, "cuobjdump"), "-sass", src + ".cubin"], capture_output=True,
                              text=True, check=True).stdout
        row["hfma2"] = re.findall(r"HFMA2[.A-Z0-9_]*BF16_V2 [^;]*;", sass)
    out.append(row)
print(json.dumps(out))
"""


@pytest.mark.parametrize("template", ["modulate_fp8_cute", "gate_residual_modulate_fp8_cute"])
def test_fp8_producer_templates_compile_for_sm90(tmp_path, template):
    """rsi/templates/modulate_fp8_cute.py and gate_residual_modulate_fp8_cute.py (a row a CTA) at H3's width and at the odd shape's layout 2 (x at an odd
    offset with an odd row stride, the table transposed): two barriers a row (the tree's warp levels, the amax), the
    IEEE square root and divisions (1 / x as rcp.rn), nothing flushed to zero, e4m3 bytes by cvt.rn.satfinite in
    pairs, nothing in local memory; 16-byte loads where the layout allows them. H reaches the kernel as a run-time
    parameter (the mean divides by a register, not by a constant). In the sm_90a SASS (ptxas from
    Triton's backend) every bf16 fma whose two factors are registers adds the broadcast -0 of the row (z, .H0_H0) or
    zero: n * (1 + scale) is never contracted with the + shift into one rounding (modulate's eager order rounds the
    product first; a plain bf16 product before the add was contracted, found here); in the residual's template
    gate * branch is not contracted with the + res either."""
    r = _compile(tmp_path, _COMPILE_MODULATE_FP8, template)
    h3, odd = json.loads(r.stdout.strip().splitlines()[-1])
    for c in (h3, odd):
        ops = c["ops"]
        assert ops.get("bar.sync") == 2 and ops.get("sqrt.rn.f32") == 1 and not ops.get(".ftz")
        assert ops.get("cvt.rn.satfinite.e4m3x2.f32") and not ops.get("ld.local") and not ops.get("st.local")
        assert ops.get("div.rn.f32", 0) + ops.get("rcp.rn.f32", 0) >= 2
        assert any(k.startswith("div.rn.f32") and k.count("%r") == 3 for k in ops)   # ss / H, H a parameter
    assert h3["ops"].get("ld.global.v4.b32") and not odd["ops"].get("ld.global.v4.b32")
    if h3["hfma2"] is not None:
        products = [i for i in h3["hfma2"] if re.search(r"BF16_V2 R\d+, -?R\d+(\.H\d_H\d)?, -?R\d+(\.H\d_H\d)?, ", i)]
        assert products and all(re.search(r", -?(RZ|R\d+(\.reuse)?\.H0_H0) ;", i) for i in products), products
