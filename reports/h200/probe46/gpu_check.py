"""Run fp8_gemm_cute on an H100/H200: correctness against a torch fp32 reference and timing against torch._scaled_mm.

Needs only torch (CUDA build) and nvidia-cutlass-dsl 4.8.1; fp8_gemm_cute.py must sit beside this file.
  python gpu_check.py                 # heuristic config + two alternatives, sizes below
  python gpu_check.py --quick         # heuristic only, small + mid sizes, no timing
Prints, per size and config: max|out - ref| / max|ref|, rel-L2, mismatching bf16 values vs the reference and vs
_scaled_mm, whether rows >= R of a guard buffer stayed untouched, run-to-run determinism, then median-of-20 CUDA-event
times and TFLOP/s for the kernel and torch._scaled_mm (rowwise scales, bf16 out). Exit status 1 on a failed check.
"""
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fp8_gemm_cute as G  # noqa: E402

SIZES = [(200, 256, 256), (1000, 5376, 21504), (38248, 5376, 21504)]
CONFIGS = [G.HEURISTIC, dict(BM=128, BN=128, STAGES=6, GROUP_M=8), dict(BM=64, BN=128, STAGES=6, GROUP_M=8)]
QUICK = "--quick" in sys.argv
if QUICK:
    SIZES, CONFIGS = SIZES[:2], CONFIGS[:1]
TOL = 1e-2  # max abs err relative to max|ref|: bf16 rounding is 2**-9 relative, fp32 accumulation order adds little


def make_inputs(R, K, N, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x8 = (torch.randn(R, K, device="cuda", generator=g) * 2).to(torch.float8_e4m3fn)
    w8 = (torch.randn(N, K, device="cuda", generator=g) * 2).to(torch.float8_e4m3fn)
    xs = torch.rand(R, device="cuda", generator=g) * 0.02 + 0.001
    ws = torch.rand(N, device="cuda", generator=g) * 0.02 + 0.001
    return x8, xs, w8, ws


def reference(x8, xs, w8, ws):
    torch.backends.cuda.matmul.allow_tf32 = False
    acc = x8.float() @ w8.float().t()
    return (acc * ws[None]) * xs[:, None]  # fp32; .to(bf16) rounds to nearest even


def time_ms(fn, warmup=5, iters=20):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    return statistics.median(ts)


def main():
    print(torch.cuda.get_device_name(), "torch", torch.__version__, flush=True)
    ok = True
    for R, K, N in SIZES:
        x8, xs, w8, ws = make_inputs(R, K, N)
        ref32 = reference(x8, xs, w8, ws)
        ref = ref32.to(torch.bfloat16)
        del ref32
        sm = torch._scaled_mm(x8, w8.t(), scale_a=xs[:, None], scale_b=ws[None, :], out_dtype=torch.bfloat16)
        refmax = ref.float().abs().max().item()
        flop = 2.0 * R * N * K
        for cfg in CONFIGS:
            tag = f"R={R} K={K} N={N} {cfg}"
            try:
                t0 = time.time()
                out = G.launch(x8, xs, w8, ws, **cfg)
                torch.cuda.synchronize()
                first = time.time() - t0
            except Exception as e:  # noqa: BLE001
                print(f"[FAIL] {tag}: {type(e).__name__}: {e}", flush=True)
                ok = False
                continue
            d = (out.float() - ref.float())
            max_rel = d.abs().max().item() / refmax
            rel_l2 = (d.norm() / ref.float().norm()).item()
            n_bad = (out != ref).sum().item()
            n_bad_sm = (out != sm).sum().item()
            finite = bool(torch.isfinite(out.float()).all())
            # guard band: the kernel writes into rows [0, R) of a NaN-filled (R + 128, N) buffer, never below
            big = torch.full((R + 128, N), float("nan"), dtype=torch.bfloat16, device="cuda")
            G.cute_launch(G._fp8_gemm_host, x8, xs, w8, ws, big[:R], **cfg)
            torch.cuda.synchronize()
            guard = bool(torch.isnan(big[R:].float()).all())
            same = torch.equal(big[:R], out)  # determinism (same bits on a second run)
            good = finite and max_rel < TOL and rel_l2 < TOL and guard and same
            ok &= good
            print(f"[{'ok' if good else 'FAIL'}] {tag}: first call {first:.2f}s; max|d|/max|ref| {max_rel:.3e}, "
                  f"rel-L2 {rel_l2:.3e}, bf16 != ref {n_bad}/{out.numel()}, != _scaled_mm {n_bad_sm}, "
                  f"guard {'ok' if guard else 'WRITTEN'}, deterministic {same}", flush=True)
            if not QUICK and good:
                t = time_ms(lambda: G.launch(x8, xs, w8, ws, **cfg))
                # the compiled function alone, arguments bound once (no from_dlpack / allocation per call)
                from cutlass import cute
                from cutlass.cute.runtime import from_dlpack
                import cuda.bindings.driver as cuda
                stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
                args = [from_dlpack(a, assumed_align=G._alignment(a)) for a in (x8, xs, w8, ws, out)]
                fn = cute.compile(G._fp8_gemm_host, *args, stream, **cfg)
                t2 = time_ms(lambda: fn(*args, stream))
                print(f"      cute   {t * 1e3:9.1f} us  {flop / t / 1e9:7.1f} TFLOP/s  via launch(); "
                      f"{t2 * 1e3:9.1f} us  {flop / t2 / 1e9:7.1f} TFLOP/s compiled fn only", flush=True)
            del out, big
        if not QUICK:
            t = time_ms(lambda: torch._scaled_mm(x8, w8.t(), scale_a=xs[:, None], scale_b=ws[None, :],
                                                 out_dtype=torch.bfloat16))
            print(f"      _scaled_mm {t * 1e3:9.1f} us  {flop / t / 1e9:7.1f} TFLOP/s  (R={R} K={K} N={N})",
                  flush=True)
        del x8, w8, xs, ws, ref, sm
        torch.cuda.empty_cache()
    print("ALL OK" if ok else "SOME CHECKS FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
