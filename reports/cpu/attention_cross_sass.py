"""CPU record (fourteenth session): the attention template's pointer kernel compiled for sm_90 here (no GPU), before
cross-attention (5399fcc), with it and absolute key rows (880b17f), and as it is now (document-relative key rows), at
the heuristic config (128 x 128, 8 warps, 3 stages, EXP2, SPLIT) with a launch's divisibility specialisation.
Prints per kernel: registers and spills (ptxas -v), PTX lines, SASS instructions, and how many SASS lines differ from
5399fcc's after register numbers, constants and labels are normalised (difflib). Usage, from the project root:
python reports/cpu/attention_cross_sass.py  (Triton 3.6 with its CUDA backend and ptxas; no GPU needed)"""
import difflib
import importlib.util
import os
import re
import subprocess

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

BIN = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
FILES = {"5399fcc": "reports/h200/probe62_attention_5399fcc.py", "880b17f": "reports/h200/probe63/attention_880b17f.py",
         "current": "rsi/templates/attention.py"}


def compile_kernel(path: str, cross: bool):
    spec = importlib.util.spec_from_file_location("tpl_" + os.path.basename(path)[:-3], path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    sig = {"q_ptr": "*bf16", "k_ptr": "*bf16", "v_ptr": "*bf16", "o_ptr": "*bf16", "cu_ptr": "*i32", "stride_cu": "i32"}
    if cross:
        sig.update({"cuk_ptr": "*i32", "stride_cuk": "i32"})
    sig.update({"stride_qs": "i32", "stride_qh": "i32", "stride_qd": "constexpr", "stride_ks": "i32",
                "stride_kh": "i32", "stride_kd": "constexpr", "stride_vs": "i32", "stride_vh": "i32",
                "stride_vd": "constexpr", "n_heads": "i32", "qk_scale": "fp32", "HEAD_DIM": "constexpr",
                "BLOCK_M": "constexpr", "BLOCK_N": "constexpr", "EXP2": "constexpr", "SPLIT": "constexpr"})
    div = ["q_ptr", "k_ptr", "v_ptr", "o_ptr", "cu_ptr", "stride_qs", "stride_qh", "stride_ks", "stride_kh",
           "stride_vs", "stride_vh"] + (["cuk_ptr"] if cross else [])
    attrs = {(list(sig).index(n),): [["tt.divisibility", 16]] for n in div}
    const = {"stride_qd": 1, "stride_kd": 1, "stride_vd": 1, "HEAD_DIM": 128, "BLOCK_M": 128, "BLOCK_N": 128,
             "EXP2": 1, "SPLIT": 1}
    return triton.compile(ASTSource(fn=m._attention_kernel, signature=sig, constexprs=const, attrs=attrs),
                          target=GPUTarget("cuda", 90, 32), options={"num_warps": 8, "num_stages": 3})


def normalised_sass(cubin: bytes) -> list[str]:
    with open("/tmp/attention_cross_sass.cubin", "wb") as f:
        f.write(cubin)
    out = subprocess.run([os.path.join(BIN, "nvdisasm"), "-c", "/tmp/attention_cross_sass.cubin"],
                         capture_output=True, text=True, check=True).stdout
    lines = []
    for line in out.splitlines():
        line = re.sub(r"^\s*/\*[0-9a-f]+\*/\s*", "", line)
        line = re.sub(r";.*$", "", line)
        for pat, rep in ((r"UR[0-9]+", "UR"), (r"R[0-9]+", "R"), (r"P[0-9]", "P"), (r"0x[0-9a-f]+", "X"),
                         (r"\.L_x_[0-9]+", "L")):
            line = re.sub(pat, rep, line)
        if line.strip() and not line.lstrip().startswith("."):
            lines.append(line)
    return lines


def main():
    sass = {}
    for name, path in FILES.items():
        k = compile_kernel(path, cross=name != "5399fcc")
        with open("/tmp/attention_cross_sass.ptx", "w") as f:
            f.write(k.asm["ptx"])
        v = subprocess.run([os.path.join(BIN, "ptxas"), "-arch=sm_90a", "-v", "/tmp/attention_cross_sass.ptx", "-o",
                            "/tmp/attention_cross_sass.o"], capture_output=True, text=True, check=True).stderr
        regs = re.search(r"Used (\d+) registers", v).group(1)
        spills = re.search(r"(\d+) bytes spill stores", v).group(1)
        sass[name] = normalised_sass(k.asm["cubin"])
        diff = sum(1 for d in difflib.unified_diff(sass["5399fcc"], sass[name], n=0)
                   if d[:1] in "+-" and d[:3] not in ("+++", "---"))
        print(f"{name:8s} registers {regs}, spill stores {spills} B, PTX lines {k.asm['ptx'].count(chr(10))}, "
              f"SASS instructions {len(sass[name])}, SASS lines differing from 5399fcc's {diff}")


if __name__ == "__main__":
    main()
