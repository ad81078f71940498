"""CPU record (fifteenth session; DYNAMIC and the SASS instruction count added in the sixteenth):
rsi/templates/attention_cute.py compiled for sm_90a here (no GPU) at several BN, STAGES, PINGPONG, OVERLAP and
DYNAMIC (K.cute_launch_dynamic's layouts), then its PTX assembled by a CUDA 13 ptxas (the DSL writes PTX 9.4; the
header is read as 9.0, which ptxas 13.0 takes) and disassembled by Triton's nvdisasm. Prints per config: wgmma
count, registers at launch, spills, SASS instructions, and the highest register the SASS names (the consumers run
under setmaxnreg 232). Needs the [cute] extra and a CUDA 13 ptxas.
Usage, from the project root: python reports/cpu/attention_cute_ptxas.py [PTXAS]"""
import glob
import importlib.util
import os
import re
import subprocess
import sys
import tempfile

import triton

PTXAS = sys.argv[1] if len(sys.argv) > 1 else "/usr/local/cuda-13.0/bin/ptxas"
NVDISASM = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "nvdisasm")
CONFIGS = [(64, 2, 0, 0, 0), (64, 3, 0, 0, 0), (128, 2, 0, 0, 0), (128, 3, 0, 0, 0), (176, 2, 0, 0, 0),
           (192, 2, 0, 0, 0), (128, 2, 1, 0, 0), (128, 2, 0, 1, 0), (128, 2, 1, 1, 0), (128, 3, 1, 1, 0),
           (64, 3, 1, 1, 0), (128, 2, 0, 1, 1), (128, 2, 0, 0, 1), (64, 2, 1, 1, 1)]


def main():
    tmp = tempfile.mkdtemp()
    os.environ.update(CUTE_DSL_ARCH="sm_90a", CUTE_DSL_KEEP="ptx", CUTE_DSL_DUMP_DIR=tmp,
                      CUTE_DSL_CACHE_DIR=os.path.join(tmp, "cache"))
    import cuda.bindings.driver as cuda
    import torch
    from cutlass import cute
    from cutlass.cute.runtime import from_dlpack

    from rsi import kernel as K

    spec = importlib.util.spec_from_file_location("tpl_attention_cute", "rsi/templates/attention_cute.py")
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    S, H = 1024, 4
    q, k = torch.zeros(S, H, 128, dtype=torch.bfloat16), torch.zeros(S, H, 128, dtype=torch.bfloat16)
    v = torch.zeros(S, 3 * H * 128, dtype=torch.bfloat16)[:, 2 * H * 128:].view(S, H, 128)
    out, cu = torch.empty(S, H, 128, dtype=torch.bfloat16), torch.tensor([0, S - 24, S], dtype=torch.int32)
    for bn, stages, pingpong, overlap, dynamic in CONFIGS:
        cfg = {"BM": 128, "BN": bn, "STAGES": stages, "PINGPONG": pingpong, "OVERLAP": overlap}
        _, positional = K._cute_args(m._attention_host, (q, k, v, out, cu, cu), cfg, cuda.CUstream(0), from_dlpack,
                                     bool(dynamic))
        args, _ = K._cute_bind(m._attention_host, positional, cfg)
        for f in glob.glob(os.path.join(tmp, "*.ptx")):
            os.remove(f)
        cute.compile(m._attention_host, *args)
        ptx = ""
        for name in glob.glob(os.path.join(tmp, "*.ptx")):
            with open(name) as f:
                ptx += f.read()
        src, cubin = os.path.join(tmp, "a.ptx"), os.path.join(tmp, "a.cubin")
        with open(src, "w") as f:
            f.write(re.sub(r"^\.version 9\.4", ".version 9.0", ptx, flags=re.MULTILINE))
        r = subprocess.run([PTXAS, "-arch=sm_90a", "-v", src, "-o", cubin], capture_output=True, text=True, check=True)
        regs = re.search(r"Used (\d+) registers", r.stderr).group(1)
        spill = re.search(r"(\d+) bytes spill stores", r.stderr).group(1)
        sass = subprocess.run([NVDISASM, cubin], capture_output=True, text=True, check=True).stdout
        top = max(int(x) for x in re.findall(r"\bR(\d+)\b", sass))
        n_sass = len(re.findall(r"^\s+/\*[0-9a-f]{4,}\*/", sass, flags=re.MULTILINE))
        print(f"BN {bn:3d} STAGES {stages} PINGPONG {pingpong} OVERLAP {overlap} DYNAMIC {dynamic}  wgmma "
              f"{len(re.findall(r'wgmma.mma_async', ptx)):2d}  registers {regs} at launch, spill stores {spill} B, "
              f"{n_sass} SASS instructions, highest register R{top}")


if __name__ == "__main__":
    main()
