"""Full-size H3 on one GPU, random weights: one block, one forward at 1344x768, and the 4-step 672x384 request,
with ``--kernels reference`` and ``--kernels verified`` side by side. Writes JSON.

    python -m runtime.bench_h200 --out bench_h200.json            # ~1 min on an H200 (run 3), 62 GiB peak

The 33B parameters are drawn directly on the GPU (bf16/fp32 as the checkpoint stores them); the AdaLN tables of
both requests are precomputed (and checked bitwise against per-step recomputation), then adaln_proj (13B params)
is released. Text conditioning is synthetic [L, 5120] (L = 538 -> 38,248 used rows at 1344x768, L = 512 ->
10,250 at 672x384: the rows of the op groups' "full" and "stage1" buckets). Eager PyTorch, no torch.compile;
attention is SDPA on [1, 56, rows, 128] per document (used rows, then the pad rows alone), no mask.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

from runtime.adaln import AdaLNCache, step_modulation
from runtime.attention import Attention, AttentionConfig
from runtime.cli import parse_resolution
from runtime.config import get_config
from runtime.kernels import Kernels, lock_sha256
from runtime.model import build_dit, param_counts
from runtime.packing import AUDIO_CH, build_sequence, patchify_video, plan_request
from runtime.pipeline import Timer, build_vaes, generate, setup_triton_interpreter
from runtime.sampler import initial_noise, make_schedule

GIB = 2**30
# fused producers --precision fp8 may use; the block timing starts from modulate's bf16 output, so modulate_fp8
# (block 0's qkv input) shows in the forward, not in the block rows
FP8_PRODUCERS = ("modulate_fp8", "gate_residual_modulate_fp8", "swiglu_fp8", "head_merge_fp8")


def timed(fn: Callable[[], Any], warmup: int, reps: int, device: torch.device) -> list[float]:
    """Milliseconds per call after ``warmup`` untimed calls: CUDA events on the GPU, perf_counter on the CPU."""
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(reps):
        if device.type == "cuda":
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            torch.cuda.synchronize()
            out.append(a.elapsed_time(b))
        else:
            t0 = time.perf_counter()
            fn()
            out.append((time.perf_counter() - t0) * 1e3)
    return out


def synthetic_text(L: int, dim: int, seed: int, device: torch.device) -> torch.Tensor:
    g = torch.Generator(device=device).manual_seed(seed + 0x7E47)
    return torch.randn(L, dim, generator=g, device=device).to(torch.bfloat16)


def mem(device: torch.device) -> dict[str, float]:
    if device.type != "cuda":
        return {}
    return {"allocated_gib": torch.cuda.memory_allocated() / GIB, "peak_gib": torch.cuda.max_memory_allocated() / GIB}


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def median(ms: list[float]) -> float:
    return sorted(ms)[len(ms) // 2]


def time_block_and_forward(model, seq, step, cond, plan, kernels, a, dev) -> dict[str, Any]:
    """One block (its attention + MLP + the fused residual/norm feeding the next block) and one full forward."""
    rope = model.rope.table(seq.positions)                                                  # [S, 96]
    x = torch.randn(seq.total, model.cfg.hidden, device=dev, dtype=torch.bfloat16)
    c = step.block_chunks(0)
    h = kernels.call("modulate", x, model.blocks[0].norm1.weight, c[0], c[1], step.mod_idx)
    block = timed(lambda: model.block(0, x, h, step, rope, seq.cu_seqlens, kernels), 2, a.block_reps, dev)
    text_h = model.encode_text(cond, kernels)
    vz, az = initial_noise(plan.latent_shape, plan.audio_rows, AUDIO_CH, a.seed)
    v, au = patchify_video(vz).to(dev), az.to(dev)
    fwd = timed(lambda: model(v, au, text_h, seq, rope, step, kernels), 1, a.forward_reps, dev)
    return {"block_ms": {"rows": seq.total, "times": block, "median": median(block)},
            "forward_1344x768_ms": {"rows": seq.total, "times": fwd, "median": median(fwd)}}


def time_block_attention(model, seq, step, kernels, classes: list[str], a, dev, baseline=None,
                         lossy_linears: bool = False) -> tuple[dict[str, Any], torch.Tensor]:
    """The block with each attention class (as inside the denoising loop), with the block output's error against
    the dense class's on the same input (or against ``baseline``, the bf16 block's output, for every class) and the
    attention milliseconds per block (runtime.attention's events). Returns (rows, the first class's output)."""
    rope = model.rope.table(seq.positions)
    g = torch.Generator(device=dev).manual_seed(a.seed + 0xB10C)     # the same block input on every call
    x = torch.randn(seq.total, model.cfg.hidden, device=dev, generator=g).to(torch.bfloat16)
    c = step.block_chunks(0)
    h = kernels.call("modulate", x, model.blocks[0].norm1.weight, c[0], c[1], step.mod_idx)
    out, dense, first = {}, baseline, None
    for cls in classes:
        kernels.attention = Attention(AttentionConfig(cls), kernels)
        kernels.attention.at("stage1")
        y = model.block(0, x, h, step, rope, seq.cu_seqlens, kernels)[0]
        kernels.attention.reset()
        ms = timed(lambda: model.block(0, x, h, step, rope, seq.cu_seqlens, kernels), 2, a.block_reps, dev)
        rep = kernels.attention.report()
        row = {"rows": seq.total, "times": ms, "median": median(ms), "lossy": cls != "dense" or lossy_linears,
               "attention_ms_per_block": 1e3 * rep["seconds"].get("stage1", 0.0) / (2 + a.block_reps)}
        if first is None:
            first = y.float()
        if dense is None:
            dense = y.float()
        else:
            d = y.float() - dense
            row["error_vs_dense"] = {"rel_l2": (d.norm() / dense.norm()).item(), "max_abs": d.abs().max().item(),
                                     "cosine": torch.nn.functional.cosine_similarity(
                                         y.float().flatten(), dense.flatten(), dim=0).item()}
        out[cls] = row
        log(f"block with {cls} attention{' and fp8 linears' if lossy_linears else ''}: {row['median']:.1f} ms "
            f"(attention {row['attention_ms_per_block']:.1f} ms)")
    kernels.attention = Attention(kernels=kernels)
    return out, first


def time_block_fp8_linears(model, seq, step, kernels, classes: list[str], a, dev) -> dict[str, Any]:
    """Block 0 with its four linears converted to e4m3 (runtime.precision.to_fp8_, as ``--precision fp8`` does at
    load), with each attention class; errors against the bf16 block with dense attention on the same input."""
    from runtime.precision import to_fp8_

    _, ref = time_block_attention(model, seq, step, kernels, ["dense"], a, dev)
    summary = to_fp8_(model.blocks[0], kernels)
    rows, _ = time_block_attention(model, seq, step, kernels, classes, a, dev, baseline=ref, lossy_linears=True)
    fused = sorted({c["op"] for c in kernels.summary()} & set(FP8_PRODUCERS))   # modulate_fp8 feeds block 0 only
    log(f"fused producers in the fp8 block: {', '.join(fused) or 'none'}; now the block without them")
    prev = kernels.__dict__.get("verified")          # a caller's own override, if any, is put back after
    kernels.verified = lambda op, *args: False      # every activation quantised inside its Fp8Linear instead
    try:
        unfused, _ = time_block_attention(model, seq, step, kernels, classes, a, dev, baseline=ref,
                                          lossy_linears=True)
    finally:
        if prev is None:
            del kernels.verified                    # the class's method again
        else:
            kernels.verified = prev
    return {"conversion": summary, "by_attention": rows, "fused_producers": fused,
            "by_attention_without_producers": unfused}


@torch.no_grad()
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m runtime.bench_h200", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="bench_h200.json", help="JSON results (default bench_h200.json)")
    p.add_argument("--modes", nargs="+", default=["reference", "verified"], choices=["reference", "verified"],
                   help="kernel modes to run, in order (default: reference verified)")
    p.add_argument("--root", default=".", help="workspace root holding verified_kernels/ (default .)")
    p.add_argument("--seed", type=int, default=0, help="seed of weights and noise (default 0)")
    p.add_argument("--text-len-full", type=int, default=538, help="text rows at 1344x768 (default 538)")
    p.add_argument("--text-len-s1", type=int, default=512, help="text rows at 672x384 (default 512)")
    p.add_argument("--block-reps", type=int, default=5, help="timed block forwards (default 5, after 2 warm-ups)")
    p.add_argument("--forward-reps", type=int, default=1, help="timed full forwards (default 1, after 1 warm-up)")
    p.add_argument("--blocks", type=int, default=None, help="build only N blocks (a quick check; default all 50)")
    p.add_argument("--skip-request", action="store_true", help="skip the 4-step 672x384 request")
    p.add_argument("--mp4", default=None, help="also mux the request's output to this MP4 (needs PyAV)")
    p.add_argument("--full-res", default="1344x768", help="resolution of the block/forward timing (default 1344x768)")
    p.add_argument("--s1-res", default="672x384", help="resolution of the 4-step request (default 672x384)")
    p.add_argument("--duration", type=float, default=5.0, help="seconds of both requests (default 5)")
    p.add_argument("--config", default="full", choices=["full", "tiny"], help="model sizes (tiny: CPU smoke test)")
    p.add_argument("--device", default="cuda", help="cuda (default) or cpu (with --config tiny, for tests)")
    p.add_argument("--precision", nargs="+", default=["bf16"], choices=["bf16", "fp8"],
                   help="with fp8: also time block 0 with its linears in e4m3 (runtime/precision.py), after the "
                        "modes, with each --attention class (lossy rows, error against the bf16 dense block)")
    p.add_argument("--attention", nargs="+", default=["dense"], choices=["dense", "fp8"],
                   help="attention classes to time the block with (runtime/attention.py; default dense; fp8 is "
                        "lossy, reported in its own rows with its error against dense)")
    a = p.parse_args(argv)
    setup_triton_interpreter()
    dev = torch.device(a.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        print("bench_h200 needs a CUDA GPU (or --config tiny --device cpu for a smoke test)", file=sys.stderr)
        return 2
    from rsi.env import capture

    cfg = get_config(a.config)
    if a.blocks:
        import dataclasses

        cfg = dataclasses.replace(cfg, dit=dataclasses.replace(cfg.dit, blocks=a.blocks))
    res: dict[str, Any] = {"env": capture(), "lock_sha256": lock_sha256(a.root), "args": vars(a), "notes": [
        "random weights (33B drawn on the GPU from --seed); synthetic text conditioning",
        "eager PyTorch; attention = SDPA per document (used rows; pad rows alone), no mask",
        "block time = attention + MLP + the fused residual/norm of the next block's input"]}

    t0 = time.perf_counter()
    model = build_dit(cfg.dit, dev, seed=a.seed)
    sync(dev)
    res["init"] = {"seconds": time.perf_counter() - t0, "params": param_counts(model), **mem(dev)}
    log(f"init {res['init']['seconds']:.1f} s, {res['init'].get('allocated_gib', 0):.1f} GiB")

    sched = make_schedule("fasth3")
    plans = {k: plan_request(a.duration, *parse_resolution(r)) for k, r in (("full", a.full_res), ("s1", a.s1_res))}
    seqs = {"full": build_sequence(plans["full"], a.text_len_full).to(dev),
            "s1": build_sequence(plans["s1"], a.text_len_s1).to(dev)}
    conds = {"full": synthetic_text(a.text_len_full, cfg.dit.text_dim, a.seed, dev),
             "s1": synthetic_text(a.text_len_s1, cfg.dit.text_dim, a.seed, dev)}
    t0 = time.perf_counter()
    caches = {k: AdaLNCache(model, s, sched) for k, s in seqs.items()}
    sync(dev)
    t_pre = time.perf_counter() - t0
    recomputed = step_modulation(model, seqs["s1"], *sched.timesteps(2))                  # per-step, step 2
    bitwise = torch.equal(recomputed.blocks, caches["s1"][2].blocks) and \
        torch.equal(recomputed.final, caches["s1"][2].final)
    del recomputed
    before = mem(dev).get("allocated_gib", 0.0)
    released = AdaLNCache.release(model)
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    res["adaln"] = {"precompute_s": t_pre, "bitwise_equal_to_per_step": bitwise, "released_params": released["params"],
                    "released_gib": released["bytes"] / GIB,
                    "freed_gib": before - mem(dev).get("allocated_gib", 0.0),
                    "tables_gib": sum(c.nbytes() for c in caches.values()) / GIB, **mem(dev)}
    log(f"adaln: released {released['params'] / 1e9:.2f}B params, freed {res['adaln']['freed_gib']:.1f} GiB, "
        f"bitwise {bitwise}")
    video_vae, audio_vae = build_vaes(cfg, dev, a.seed)
    res["rows"] = {k: {"used": s.used, "total": s.total, "text": s.text_len, "video": s.video_rows,
                       "audio": s.audio_rows} for k, s in seqs.items()}

    ref_out, peak = None, mem(dev).get("peak_gib", 0.0)
    res["modes"] = {}
    for mode in a.modes:
        kernels = Kernels(mode, root=a.root)
        r: dict[str, Any] = {}
        r.update(time_block_and_forward(model, seqs["full"], caches["full"][0], conds["full"], plans["full"],
                                        kernels, a, dev))
        lossy = [c for c in a.attention if c != "dense"]
        if lossy:
            r["block_by_attention"] = time_block_attention(model, seqs["full"], caches["full"][0], kernels,
                                                           ["dense", *lossy], a, dev)[0]
        log(f"{mode}: block {r['block_ms']['median']:.1f} ms, forward "
            f"{r['forward_1344x768_ms']['median'] / 1e3:.2f} s at S={seqs['full'].total}")
        if not a.skip_request:
            peak = max(peak, mem(dev).get("peak_gib", 0.0))
            if dev.type == "cuda":
                torch.cuda.reset_peak_memory_stats()
            timer = Timer(dev)
            out = generate(model, video_vae, audio_vae, conds["s1"], seqs["s1"], caches["s1"], sched, plans["s1"],
                           a.seed, kernels, timer, progress=log)
            if a.mp4:
                from runtime.mux import check_mp4, write_mp4

                with timer("mux"):
                    write_mp4(a.mp4, out["frames"], plans["s1"].fps, out["wave"], cfg.audio_vae.sample_rate)
                audio_s = out["wave"].shape[1] / cfg.audio_vae.sample_rate
                r["mp4"] = check_mp4(a.mp4, plans["s1"].frames, plans["s1"].fps, audio_s)
            r["request_672x384_4step"] = {"timings_s": timer.stages, "peak_gib": mem(dev).get("peak_gib"),
                                          "frames": list(out["frames"].shape)}
            if ref_out is None:
                ref_out = out["z_video"]
            else:
                d = (out["z_video"] - ref_out).float()
                r["z_video_vs_first_mode"] = {"max_abs": d.abs().max().item(),
                                              "rel_l2": (d.norm() / ref_out.float().norm()).item()}
            log(f"{mode}: request denoise {timer.stages['denoise']:.2f} s, decode video "
                f"{timer.stages['decode_video']:.2f} s, audio {timer.stages['decode_audio']:.2f} s")
            del out
        r["kernels"] = kernels.summary()
        res["modes"][mode] = r
    if "fp8" in a.precision:   # last: it converts block 0 in place
        kernels = Kernels(a.modes[-1], root=a.root)
        res["block_fp8_linears"] = time_block_fp8_linears(model, seqs["full"], caches["full"][0], kernels,
                                                          a.attention, a, dev)
    res["peak_gib"] = max(peak, mem(dev).get("peak_gib", 0.0))
    with open(a.out, "w") as f:
        json.dump(res, f, indent=2, default=str)
    log(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
