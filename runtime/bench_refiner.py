"""Side by side, one process, one GPU: diffusers' LTX2VideoTransformer3DModel.forward vs this runtime's refiner
forward (runtime/refiner.py) on the same model and inputs, at the stage-2 shapes of a 5 s 1344x768 request
(16 latent frames x 24 x 42 = 16,128 video rows, 126 audio rows, 1024 text rows), with ``--layers`` blocks at
the full widths (48 in the real model; fewer keep the run short: per-layer time = forward / layers, embeddings
and output layer included, stated). Modes: diffusers (its own attention dispatch and ops), ours with the
reference ops, ours with the verified kernels. CUDA-event timing, median of ``--reps`` after ``--warmup`` calls;
also the max abs difference of ours vs diffusers' output (bf16). Ours runs ``Refiner.prepare`` once outside the
timed forward, as the pipeline does once per request: the RoPE tables, the caption projections and every block's
text K/V; diffusers' forward recomputes them on every call.

    python -m runtime.bench_refiner --layers 8 --out bench_refiner.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from runtime.kernels import Kernels
from runtime.refiner import Refiner, build_refiner, pack_video


def cuda_time(fn, reps: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        out.append(a.elapsed_time(b))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m runtime.bench_refiner")
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--frames", type=int, default=16)
    ap.add_argument("--height", type=int, default=24)
    ap.add_argument("--width", type=int, default=42)
    ap.add_argument("--audio", type=int, default=126)
    ap.add_argument("--text", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--root", default=".")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    dev = torch.device("cuda")
    t0 = time.perf_counter()
    m = build_refiner({"num_layers": a.layers}, dev, seed=0)
    build_s = time.perf_counter() - t0
    g = torch.Generator(device=dev).manual_seed(1)
    z = torch.randn(1, 128, a.frames, a.height, a.width, generator=g, device=dev, dtype=torch.bfloat16)
    au = torch.randn(1, a.audio, 128, generator=g, device=dev, dtype=torch.bfloat16)
    ctx = torch.randn(1, a.text, 3840, generator=g, device=dev, dtype=torch.bfloat16)
    actx = torch.randn(1, a.text, 3840, generator=g, device=dev, dtype=torch.bfloat16)
    x = pack_video(z)
    sigma = 0.725
    res = {"args": vars(a), "rows": {"video": x.shape[1], "audio": a.audio, "text": a.text}, "build_s": build_s,
           "method": "CUDA events around one full forward, median of reps after warmup calls; per layer = "
                     "forward / layers (embeddings and output layer included); ours: RoPE tables, caption "
                     "projections and text K/V made once in prepare (per request), outside the timed forward",
           "modes": {}}
    with torch.no_grad():
        def diffusers_fwd():
            return m(hidden_states=x, audio_hidden_states=au, encoder_hidden_states=ctx,
                     audio_encoder_hidden_states=actx, timestep=torch.full((1,), 1000 * sigma, device=dev),
                     num_frames=a.frames, height=a.height, width=a.width, audio_num_frames=a.audio, return_dict=False)
        ref_out = diffusers_fwd()
        times = cuda_time(diffusers_fwd, a.reps, a.warmup)
        res["modes"]["diffusers"] = {"forward_ms": statistics.median(times), "times": times}
        for mode in ("reference", "verified"):
            k = Kernels(mode, root=a.root)
            r = Refiner(m, k)
            t1 = time.perf_counter()
            st = r.prepare(ctx, actx, a.frames, a.height, a.width, a.audio)
            torch.cuda.synchronize()
            prep = time.perf_counter() - t1
            out = r.forward(x, au, sigma, st)
            times = cuda_time(lambda r=r, st=st: r.forward(x, au, sigma, st), a.reps, a.warmup)
            res["modes"][mode] = {"forward_ms": statistics.median(times), "times": times, "prepare_s": prep,
                                  "max_abs_vs_diffusers": [float((o - ro.float()).abs().max()) for o, ro in
                                                           zip(out, ref_out)],
                                  "kernels": k.summary()}
    for mode, d in res["modes"].items():
        d["per_layer_ms"] = d["forward_ms"] / a.layers
        print(f"{mode:10s} forward {d['forward_ms']:8.2f} ms  per layer {d['per_layer_ms']:6.2f} ms  "
              + (f"max|diff| {d['max_abs_vs_diffusers']}" if "max_abs_vs_diffusers" in d else ""), flush=True)
    base = res["modes"]["diffusers"]["forward_ms"]
    res["speedup_vs_diffusers"] = {m_: base / d["forward_ms"] for m_, d in res["modes"].items()}
    print("speedup vs diffusers (same run):", {k_: round(v, 3) for k_, v in res["speedup_vs_diffusers"].items()})
    from rsi.env import capture

    res["env"] = capture()
    with open(a.out, "w") as f:
        json.dump(res, f, indent=2, default=str)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
