"""Compile fp8_gemm_cute for sm_90a on a machine without a GPU and check the PTX.

Run:  python compile_check.py            (re-executes itself with CUTE_DSL_ARCH=sm_90a, CUTE_DSL_KEEP=ptx)
Tensors are CPU torch tensors (torch.empty: never touched) bound with from_dlpack the way K.cute_launch does
(static shapes / strides, actual alignment); only tracing + compilation happen, nothing runs.
"""
import collections
import glob
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DUMP = os.path.join(HERE, "ptx_dump")

if os.environ.get("_FP8_CC_CHILD") != "1":
    os.makedirs(DUMP, exist_ok=True)
    env = {**os.environ, "_FP8_CC_CHILD": "1", "CUTE_DSL_ARCH": "sm_90a", "CUTE_DSL_KEEP": "ptx",
           "CUTE_DSL_DUMP_DIR": DUMP, "CUTE_DSL_CACHE_DIR": os.path.join(DUMP, "cache")}
    sys.exit(subprocess.call([sys.executable, os.path.abspath(__file__), *sys.argv[1:]], env=env))

import torch  # noqa: E402
import cuda.bindings.driver as cuda  # noqa: E402
from cutlass import cute  # noqa: E402
from cutlass.cute.runtime import from_dlpack  # noqa: E402

sys.path.insert(0, HERE)
import fp8_gemm_cute as G  # noqa: E402

CASES = [((200, 256, 256), G.HEURISTIC),
         ((38248, 5376, 21504), G.HEURISTIC),
         ((200, 256, 256), dict(BM=128, BN=128, STAGES=6, GROUP_M=8)),
         ((1000, 4096, 4096), dict(BM=64, BN=128, STAGES=6, GROUP_M=8))]
if "--quick" in sys.argv:
    CASES = CASES[:1]

ok = True
for (R, K, N), cfg in CASES:
    x8 = torch.empty(R, K, dtype=torch.float8_e4m3fn)
    w8 = torch.empty(N, K, dtype=torch.float8_e4m3fn)
    xs = torch.empty(R, dtype=torch.float32)
    ws = torch.empty(N, dtype=torch.float32)
    out = torch.empty(R, N, dtype=torch.bfloat16)
    G._check(x8, xs, w8, ws, **cfg)
    args = [from_dlpack(t, assumed_align=G._alignment(t)) for t in (x8, xs, w8, ws, out)]
    for f in glob.glob(os.path.join(DUMP, "*.ptx")):
        os.remove(f)
    t0 = time.time()
    cute.compile(G._fp8_gemm_host, *args, cuda.CUstream(0), **cfg)
    dt = time.time() - t0
    ptxs = glob.glob(os.path.join(DUMP, "*.ptx"))
    ptx = "".join(open(f).read() for f in ptxs)
    tag = f"R{R}_K{K}_N{N}_BM{cfg['BM']}_BN{cfg['BN']}_S{cfg['STAGES']}"
    with open(os.path.join(HERE, f"gemm_{tag}.ptx"), "w") as f:
        f.write(ptx)
    ops = collections.Counter(re.findall(
        r"wgmma\.[a-z_]+[.a-z0-9_]*|cp\.async\.bulk\.tensor[.a-z0-9_:]*|mbarrier\.[a-z_.]+[a-z0-9]*|"
        r"setmaxnreg[.a-z0-9]*|st\.global[.a-z0-9]*|ld\.global[.a-z0-9]*|cvt\.rn\.bf16[x2]*\.f32|"
        r"\.target sm_[0-9a]+|local\.[a-z0-9.]*|prefetch\.tensormap", ptx))
    need = ["wgmma.mma_async.sync.aligned.m64n%dk32.f32.e4m3.e4m3" % cfg["BN"], "cp.async.bulk.tensor.2d"]
    missing = [n for n in need if not any(k.startswith(n) for k in ops)]
    ok &= not missing and bool(ptx)
    print(f"== {tag}: compiled in {dt:.1f}s, {len(ptxs)} ptx file(s), {len(ptx)} chars; missing: {missing or 'none'}")
    for k, v in sorted(ops.items()):
        print(f"   {v:6d}  {k}")
    regs = re.findall(r"\.reg \.(\w+) \s*%(\w+)<(\d+)>", ptx)
    print("   regs declared:", ", ".join(f"{t}:{n}" for t, _, n in regs))
    smem = re.findall(r"\.extern \.shared[^\n]*|\.shared \.align[^\n]*", ptx)
    print("   smem decl:", smem[:3])
print("ALL OK" if ok else "FAILED")
sys.exit(0 if ok else 1)
