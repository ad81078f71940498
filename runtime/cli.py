"""``rsi run-pipeline``: one H3 request end to end, with a per-stage timing table and the same as JSON.

Wiring: rsi/cli.py calls ``add_parser(sub)``; the subparser's default ``fn`` is ``run``. Standalone:
``python -m runtime.cli run-pipeline --prompt ...``. Exit codes (EXIT_CODES): 0 ok, 1 the run failed, 2 usage error
(found before any work), 130 interrupted (Ctrl-C). Every failure is one line naming the flag, key or file.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

console = Console() if sys.stdout.isatty() else Console(width=160)     # logs and pipes: no 80-column wrap
log = logging.getLogger("runtime.cli")
EXIT_CODES = "exit codes: 0 ok, 1 the run failed, 2 usage error (nothing was run), 130 interrupted (Ctrl-C)"


def parse_resolution(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"\s*(\d+)\s*[xX]\s*(\d+)\s*", text)
    if not m:
        raise ValueError(f"--resolution {text!r}: use WIDTHxHEIGHT (e.g. 1344x768, 672x384) or an aspect ratio W:H "
                         "(e.g. 16:9, 21:9)")
    return int(m.group(1)), int(m.group(2))


def parse_aspect(text: str) -> tuple[float, float] | None:
    """W:H -> (W, H), a ratio for the canvas rule (runtime.packing.canvas_for_aspect); None for anything else."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*:\s*(\d+(?:\.\d+)?)\s*", text)
    return (float(m.group(1)), float(m.group(2))) if m else None


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("run-pipeline", help="run one MiniMax-H3 text-to-video+audio request end to end "
                                                   "(random weights unless --weights) and write an MP4",
                              description="Run one MiniMax-H3 text-to-video+audio request end to end and write an "
                                          "MP4 plus a timing/summary JSON. Every usage error is found before any "
                                          "work. " + EXIT_CODES + ".", epilog=EXIT_CODES)
    p.add_argument("--prompt", required=True, help="text prompt")
    p.add_argument("--duration", type=float, default=5.0, help="seconds of video, 0 < d <= 10 (default 5; frames "
                                                                 "snap up to 17n+5 at 24 fps: 5 s -> 124)")
    p.add_argument("--resolution", default="672x384", help="WIDTHxHEIGHT, multiples of 32, area <= 1344x768 "
                                                          "(default 672x384); or an aspect ratio W:H (16:9, 21:9, "
                                                          "1:4..4:1) on the H3 canvas rule (21:9 -> 1536x672)")
    p.add_argument("--steps", type=int, default=None, help="denoising forwards (default: the checkpoint's "
                                                           "base_schedule length, else 4; 49: the base 50-point "
                                                           "schedule)")
    p.add_argument("--schedule", default="auto", choices=["auto", "base", "fasth3"],
                   help="sigma schedule; auto = the base_schedule --weights declares in model_index.json, else "
                        "fasth3 for 4 steps on random weights, else base with steps+1 points (shifts from the "
                        "checkpoint's sigma_shift_scales when present)")
    p.add_argument("--seed", type=int, default=0, help="seed of the noise and of the random weights (default 0)")
    p.add_argument("--config", default="tiny", choices=["tiny", "full"],
                   help="model sizes: tiny (CPU tests) or full (the real 33B H3; needs a GPU) (default tiny)")
    p.add_argument("--kernels", default="verified", choices=["reference", "verified"],
                   help="fused ops from the rsi.refs references, or from verified_kernels/ LOCK.json for this GPU "
                        "(falls back to the reference per op, logged; default verified)")
    p.add_argument("--weights", default=None, help="checkpoint folder (partition with transformer/, or the "
                                                   "transformer folder; native or diffusers safetensors)")
    p.add_argument("--out", default="out.mp4", help="output MP4 (H.264 + AAC stereo) (default out.mp4)")
    p.add_argument("--json", default=None, help="timing/summary JSON (default: --out with .json)")
    p.add_argument("--text-encoder", default="hash", choices=["hash", "qwen3vl"],
                   help="hash: deterministic untrained embedding (default); qwen3vl: random-weight Qwen3-VL-shaped "
                        "encoder at the config's size")
    p.add_argument("--lora", default=None, help="LoRA adapter: a .safetensors file or a folder (PEFT save_pretrained with "
                        "adapter_config.json, FastVideo-v2 with adapter_manifest.json); diffusers or native key names")
    p.add_argument("--lora-mode", default="merged", choices=["merged", "native", "consumer"],
                   help="merge into bf16 weights, keep native branches, or fuse fc1's branch into the consumer op")
    p.add_argument("--lora-strength", type=float, default=1.0, help="multiplier on the adapter's scale (finite)")
    p.add_argument("--lora-qkv-layout", default="interleaved", choices=["interleaved", "contiguous"],
                   help="row order of a native-named LoRA's fused attn.qkv_proj: per-head interleaved like the raw "
                        "checkpoint (default) or already [Q; K; V]")
    route = p.add_mutually_exclusive_group()
    route.add_argument("--two-stage", dest="two_stage", action="store_const", const=True, default=None,
                       help="H3 draft at half size (4 steps) -> x2 latent upscaler -> H3->LTX adapter -> LTX-2 "
                            "refiner (3 updates) -> LTX-2 VAE; H3 audio muxed (default when the canvas is 1344x768, "
                            "e.g. --resolution 1344x768 or 16:9)")
    route.add_argument("--stage1-only", dest="two_stage", action="store_const", const=False,
                       help="H3 alone at the requested size, decoded by the H3 VAEs (default for every other canvas)")
    p.add_argument("--stage2-prompt", default="generic", choices=["generic", "prompt"],
                   help="two-stage: refiner text context: one generic context cached for every request (default, as the Sol-H3 "
                        "report), or the prompt's own (cached per prompt and encoder)")
    p.add_argument("--prompt-cache", default=".rsi/prompt_cache",
                   help="two-stage: folder of cached stage-2 text contexts (default .rsi/prompt_cache)")
    p.add_argument("--warmup", action="store_true",
                   help="before the timed request, run every stage once on its shapes (one forward per "
                        "transformer) so JIT and backend selection are outside the request; reported separately "
                        "(two-stage route)")
    p.add_argument("--repeat", type=int, default=1,
                   help="requests in this process (two-stage route): the first is reported as the first request, "
                        "the last as the steady state (default 1)")
    p.add_argument("--refiner", default=None, help="two-stage: the LTX-2 transformer as a diffusers folder "
                                                   "(config.json + diffusion_pytorch_model*.safetensors); else random")
    p.add_argument("--adapter", default=None, help="two-stage: the H3->LTX adapter (h3_ltx_adapter_safetensors_v1 "
                                                   "file, or a folder with model.safetensors + manifest.json); else "
                                                   "random")
    p.add_argument("--ltx-vae", default=None, help="two-stage: the LTX-2 video VAE as a diffusers folder; else random")
    p.add_argument("--attention", default="dense", choices=["dense", "fp8", "sol"],
                   help="attention class: dense (exact: the verified `attention` kernel where locked, else "
                        "FlashAttention-4 where installed, else SDPA cuDNN-first), fp8 (lossy: the denoising blocks' "
                        "self-attention with Q/K/V in e4m3, both stages: the verified kernel, else cuDNN's FP8 "
                        "attention where nvidia-cudnn-frontend is installed, else the reference), sol (lossy: Sol-Attn block-sparse video self-attention in the refiner; needs the "
                        "two-stage route) (default dense)")
    p.add_argument("--precision", default="bf16", choices=["bf16", "fp8"],
                   help="the transformer blocks' linear layers (both stages): bf16 (default), or fp8 (lossy: weights "
                        "quantised to e4m3 per output channel once at load, activations per row, the fp8_linear op "
                        "group: its verified kernel, else torch._scaled_mm on CUDA; where the lock has a fused "
                        "producer (swiglu_fp8, head_merge_fp8, modulate_fp8, gate_residual_modulate_fp8) the "
                        "activation is quantised where it is made and the fp8_gemm op group multiplies it)")
    p.add_argument("--sol-tau", default="1.0,1.25,1.5",
                   help="sol: threshold tau per refiner update, comma-separated; the last holds for later updates "
                        "(default 1.0,1.25,1.5, the Sol-H3 report's)")
    p.add_argument("--sol-dense-layers", type=int, default=None,
                   help="sol: refiner layers kept dense (default 2; 1 on --config tiny, whose refiner has 2)")
    p.add_argument("--sol-block", type=int, default=None,
                   help="sol: selection block in rows (default 128, the sol_attn op group's; 8 on --config tiny; "
                        "a size other than 128 runs the op group's reference)")
    p.add_argument("--device", default="auto", help="auto (cuda if visible), cpu, cuda, cuda:N")
    p.add_argument("--gpus", type=int, default=1, help="Ulysses sequence parallelism over N processes (one GPU each, "
                   "NCCL; gloo on the CPU): re-runs this command under torchrun; N divides the heads (default 1)")
    p.add_argument("--wire", default="bf16", choices=["bf16", "int8", "fp8"],
                   help="format of the Ulysses exchanges with --gpus > 1: bf16 (exact, default), int8 (UE5M3 "
                        "block-int8 records both ways) or fp8 (e4m3 output records); int8 and fp8 are lossy")
    p.add_argument("--no-mux", action="store_true", help="skip writing the MP4 (timing runs without PyAV)")
    p.add_argument("--save-latents", default=None, help="also save the run's latents (draft, upscaled, refined, "
                   "audio) and decoded frames to this .pt file, for `python -m runtime.latent_error A.pt B.pt` (bf16 vs fp8, dense vs "
                   "sol from one seed)")
    p.add_argument("--dry-run", action="store_true", help="validate the request and print the plan; run nothing")
    p.add_argument("--verbose", action="store_true", help="log every kernel choice as it is made")
    p.set_defaults(fn=run)
    return p


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(name)s: %(message)s")
    try:
        return _run(args)
    except KeyboardInterrupt:
        console.print("[red]interrupted[/] (Ctrl-C): no partial MP4 is left at --out", soft_wrap=True)
        return 130


def _fail(kind: str, e: BaseException) -> None:
    """One line: ``error: ...`` (usage, exit 2) or ``failed: Type: ...`` (run, exit 1)."""
    msg = str(e) if kind == "error" else f"{type(e).__name__}: {e}"
    console.print(f"[red]{kind}:[/] {escape(' '.join(msg.split()))}", soft_wrap=True)


def _run(args: argparse.Namespace) -> int:
    from rsi.verified import find_root
    from runtime.packing import RequestError
    from runtime.pipeline import (
        PARTS,
        Request,
        attention_config,
        fmt_gib,
        pick_schedule,
        run_pipeline,
        summary_rows,
        validate,
    )

    out_json = Path(args.json) if args.json else Path(args.out).with_suffix(".json")
    lock_root, lock_how = find_root(getattr(args, "root_explicit", None))
    if args.kernels == "verified":
        console.print(f"[dim]verified kernels: {escape(str(lock_root / 'verified_kernels'))} ({lock_how})[/]")
    try:
        aspect = parse_aspect(args.resolution)
        width, height = (0, 0) if aspect else parse_resolution(args.resolution)      # aspect: set by validate
        req = Request(prompt=args.prompt, duration_s=args.duration, width=width, height=height, aspect=aspect, steps=args.steps, schedule=args.schedule, seed=args.seed, config=args.config,
                      kernels=args.kernels, weights=args.weights, out=args.out, json=str(out_json),
                      text_encoder=args.text_encoder, lora=args.lora, lora_mode=args.lora_mode,
                      lora_strength=args.lora_strength, lora_qkv_layout=args.lora_qkv_layout, device=args.device,
                      root=str(lock_root), mux=not args.no_mux)
        from runtime.packing import canvas_for_aspect

        canvas = canvas_for_aspect(*aspect) if aspect else (width, height)
        req.two_stage = args.two_stage if args.two_stage is not None else canvas == (1344, 768)
        req.stage2_prompt, req.prompt_cache = args.stage2_prompt, args.prompt_cache
        req.warmup, req.repeat = args.warmup, args.repeat
        req.refiner, req.adapter, req.ltx_vae = args.refiner, args.adapter, args.ltx_vae
        from runtime.attention import parse_taus

        req.attention, req.sol_taus, req.precision = args.attention, parse_taus(args.sol_tau), args.precision
        req.sol_dense_layers, req.sol_block = args.sol_dense_layers, args.sol_block
        req.gpus, req.wire = args.gpus, args.wire
        rank = int(os.environ.get("RANK", "0"))
        req.mux = req.mux and rank == 0       # under torchrun only rank 0 writes the MP4 and the JSON
        if not req.two_stage and any((args.refiner, args.adapter, args.ltx_vae)):
            raise ValueError("--refiner, --adapter and --ltx-vae are stage-2 components: add --two-stage")
        if not req.two_stage and (args.warmup or args.repeat != 1):
            raise ValueError("--warmup and --repeat belong to the two-stage route: add --two-stage (the default "
                             "at 1344x768)")
        plan = validate(req)
    except (ValueError, RequestError) as e:
        _fail("error", e)
        return 2
    except Exception as e:      # a check that breaks is a failure with its message, not a traceback wall
        log.debug("run-pipeline failed", exc_info=True)
        _fail("failed", e)
        return 1
    if args.dry_run:
        info = {"route": "two-stage" if req.two_stage else "stage 1 only", "plan": plan.to_json(),
                "attention": attention_config(req).to_json(),
                "schedule": pick_schedule(req).to_json()}
        if req.two_stage:
            from runtime.refiner import SIGMAS
            from runtime.two_stage import draft_plan, ltx_audio_frames, ltx_latent_frames

            info["draft_plan"] = draft_plan(plan).to_json()
            info["stage2"] = {"ltx_latent_frames": ltx_latent_frames(plan), "audio_latents": ltx_audio_frames(plan),
                              "sigmas": list(SIGMAS)}
        console.print_json(json.dumps(info))
        return 0
    if req.gpus > 1 and int(os.environ.get("WORLD_SIZE", "1")) == 1:
        import subprocess

        from runtime.ulysses import torchrun_argv

        argv = torchrun_argv(req.gpus, list(getattr(args, "argv", None) or sys.argv[1:]))
        console.print(escape(f"--gpus {req.gpus}: running under torchrun: {' '.join(argv)}"), soft_wrap=True)
        return subprocess.run(argv, check=False).returncode
    try:
        if req.two_stage:
            from runtime.two_stage import run_pipeline_two_stage as run_pipeline
        res = run_pipeline(req, progress=lambda s: console.print(f"[dim]{s}[/]"))
    except RequestError as e:
        _fail("error", e)
        return 2
    except Exception as e:      # a run that breaks is a failure with its message, not a traceback wall
        log.debug("run-pipeline failed", exc_info=True)
        _fail("failed", e)
        return 1

    if rank != 0:
        return 0
    route = "two-stage" if req.two_stage else "stage 1 only"
    t = Table(title=f"H3 {route} {req.config} {plan.width}x{plan.height} {plan.frames} frames, "
                    f"{res.schedule['steps']} steps ({res.schedule['name']}), kernels={req.kernels}, {res.device}")
    t.add_column("stage")
    t.add_column("seconds", justify="right")
    if req.two_stage:
        from runtime.two_stage import summary_rows
    for name, sec in summary_rows(res):
        t.add_row(name, sec)
    console.print(t)
    k = Table(title="kernel dispatch")
    for col in ("op", "dims", "kernel", "calls", "why"):
        k.add_column(col)
    for c in res.kernels:
        k.add_row(c["op"], ",".join(f"{a}={b}" for a, b in c["dims"].items()), c["kernel"], str(c["calls"]), c["why"])
    console.print(k)
    if req.two_stage:
        w, f = res.timings_s.get("warmup"), res.timings_s["first_request"]
        console.print(f"first request {f['request_total']:.3f} s; steady state (request {req.repeat}) "
                      f"{res.timings_s['request_total']:.3f} s"
                      + (f"; warm-up {w['seconds']:.3f} s (not in the request)" if w else "; no warm-up"))
    console.print(f"peak GPU memory {fmt_gib(res.memory['peak_gpu_gib'])}; peak host RSS "
                  f"{fmt_gib(res.memory['peak_host_rss_gib'])}; AdaLN released {res.adaln['released_gib']:.2f} GiB, "
                  f"tables {res.adaln['table_gib'] * 1024:.1f} MiB")
    console.print(f"verified_kernels/LOCK.json sha256: {res.lock_sha256 or 'none (no lock file)'}")
    s = res.schedule
    console.print(escape(f"schedule: {s['name']}, {s['steps']} steps (video shift {s['video_shift']:g}, audio shift "
                         f"{s['audio_shift']:g}); grid from {s['source']}; shifts from {s['shift_source']}; "
                         f"{s['why']}"), soft_wrap=True)
    for part, w in res.weights.items():
        console.print(escape(f"weights: {PARTS.get(part, part)}: {w['source']} ({w['detail']})"), soft_wrap=True)
    for n in res.notes:
        console.print(f"[yellow]note:[/] {escape(n)}", soft_wrap=True)
    try:
        out_json.write_text(json.dumps(res.to_json(), indent=2, default=str))
        if args.save_latents:
            import torch

            outs = res.outputs or {}
            lat = {k: v.detach().cpu() for k, v in outs.items() if k.startswith("z_") and isinstance(v, torch.Tensor)}
            if outs.get("frames") is not None:          # decoded uint8 frames, for the PSNR
                lat["frames"] = torch.as_tensor(outs["frames"])
            torch.save(lat, args.save_latents)
            console.print(escape(f"saved latents {', '.join(sorted(lat))} to {args.save_latents}"), soft_wrap=True)
    except OSError as e:
        _fail("failed", e)
        return 1
    if res.mp4:
        console.print(escape(f"wrote {req.out} ({res.mp4['frames']} frames @ {res.mp4['fps']:g} fps, audio "
                             f"{res.mp4['audio_duration_s']:.2f} s) and {out_json}"), soft_wrap=True)
    else:
        console.print(escape(f"wrote {out_json}"), soft_wrap=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runtime.cli")
    parser.add_argument("--root", default=".", help="workspace root holding verified_kernels/ (default: .)")
    add_parser(parser.add_subparsers(dest="verb", required=True))
    args = parser.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
