"""``rsi attention-quality`` (alias ``rsi quality``): what a lossy class costs end to end, so a user can choose tau
(or FP8) with numbers.

The LTX-2 refiner (tiny on the CPU, full on a GPU; random weights from the seed) refines one seeded latent with
dense attention and bf16 linears, and then with each lossy variant (``--attention sol`` per ``--sol-tau``
schedule, ``--attention fp8``, and/or ``--precision fp8``: the blocks' linears in e4m3, runtime/precision.py, on a
second copy of the refiner made from the same seed), from the same seed, noise and context. Per refiner update it reports the video latent's relative L2 error against
the dense run, the PSNR of the decoded frames (LTX-2 VAE, random weights) against the dense run's frames, the
Sol-Attn density (kept block pairs / all, averaged over the sparse layers) and the attention seconds.

The input latent is seeded noise standing in for the adapter's output, and every weight is random: the numbers
measure how far the lossy class moves *this* network's output, not image quality. On the CPU the refiner runs in
fp32 while the op groups' references return bf16, so the reported error there includes one bf16 rounding of
each lossy attention output; on a GPU every path is bf16.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import torch

from runtime.attention import Attention, AttentionConfig, parse_taus

DEFAULT_LATENT = {"full": (16, 24, 42), "tiny": (3, 8, 8)}    # LTX latent frames x height x width


def rel_l2(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double(), b.double()
    n = float(torch.linalg.vector_norm(b))
    return float(torch.linalg.vector_norm(a - b)) / n if n > 0 else float(torch.linalg.vector_norm(a - b))


def psnr(a: torch.Tensor, b: torch.Tensor) -> float:
    """PSNR in dB of uint8 frames a against b (peak 255); inf when equal."""
    mse = float(((a.double() - b.double()) ** 2).mean())
    return math.inf if mse == 0 else 10 * math.log10(255.0**2 / mse)


def variants(args: argparse.Namespace) -> list[AttentionConfig]:
    from runtime.request import sol_default

    if args.attention == "dense" and args.precision == "bf16":
        raise ValueError("--attention dense with --precision bf16 is the reference itself: choose a lossy "
                         "--attention (sol, fp8) or --precision fp8")
    if args.attention in ("fp8", "dense"):
        return [AttentionConfig(args.attention)]
    layers = sol_default(args.sol_dense_layers, "dense_layers", args.config)
    block = sol_default(args.sol_block, "block", args.config)
    return [AttentionConfig("sol", parse_taus(t), layers, block) for t in (args.sol_tau or ["1.0,1.25,1.5"])]


def run(args: argparse.Namespace, progress=print) -> dict[str, Any]:
    from runtime.kernels import Kernels
    from runtime.prompt_cache import stage2_context
    from runtime.refiner import SIGMAS, Refiner, build_refiner, refine
    from runtime.request import resolve_device
    from runtime.two_stage import LTX_AUDIO_CH, LTX_AUDIO_LATENTS_PER_S
    from runtime.vae import build_ltx_vae, decode_ltx

    cfgs = variants(args)            # usage errors before any work
    dev = resolve_device(args.device)
    F_, H, W = args.latent or DEFAULT_LATENT[args.config]
    kernels = Kernels(args.kernels, root=args.root)
    t0 = time.perf_counter()
    progress(f"building the {args.config} refiner and LTX-2 VAE (random weights, seed {args.seed})")
    refiner = Refiner(build_refiner(args.config, dev, args.seed + 106), kernels)
    lossy, precision = refiner, None
    if args.precision == "fp8":                   # a second copy from the same seed, its linears in e4m3
        from runtime.precision import to_fp8_

        lossy = Refiner(build_refiner(args.config, dev, args.seed + 106), kernels)
        precision = to_fp8_(lossy.m.transformer_blocks, kernels)
    vae = None if args.no_decode else build_ltx_vae(args.config, dev, args.seed + 103)
    ctx, actx, _ = stage2_context("", True, args.config, dev, args.seed, args.prompt_cache)
    na = round((8 * (F_ - 1) + 1) / 24.0 * LTX_AUDIO_LATENTS_PER_S)
    g = torch.Generator().manual_seed(args.seed + 5)
    z = torch.randn(1, 128, F_, H, W, generator=g).to(dev)
    audio = (SIGMAS[0] * torch.randn(1, na, LTX_AUDIO_CH, generator=g)).to(dev)
    st = refiner.prepare(ctx, actx, F_, H, W, na)
    build_s = time.perf_counter() - t0

    def one(cfg: AttentionConfig, model: Refiner) -> tuple[list[torch.Tensor], dict[str, Any], float]:
        kernels.attention = Attention(cfg, kernels)
        trace: list[torch.Tensor] = []
        t = time.perf_counter()
        refine(model, z, audio, st if model is refiner else model.prepare(ctx, actx, F_, H, W, na), args.seed,
               trace=trace)
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        return trace, kernels.attention.report(), time.perf_counter() - t

    def frames(latent: torch.Tensor) -> torch.Tensor | None:
        return None if vae is None else decode_ltx(vae, latent).cpu()

    progress("dense run")
    dense, dense_rep, dense_s = one(AttentionConfig("dense"), refiner)
    dense_frames = [frames(x) for x in dense]
    out: dict[str, Any] = {
        "config": args.config, "device": str(dev), "latent": [1, 128, F_, H, W], "seed": args.seed,
        "kernels": args.kernels, "sigmas": list(SIGMAS), "build_s": build_s,
        "dense": {"refine_s": dense_s, "attention_s": dense_rep["seconds"].get("stage2", 0.0)},
        "variants": [], "command": " ".join(sys.argv), "precision": {"mode": args.precision, **(precision or {})},
        "notes": [("random weights and a seeded-noise input latent: the errors measure how far the lossy class "
                   "moves this network's output, not image quality"),
                  *([("CPU: the refiner runs in fp32, the lossy references return bf16 (one extra rounding "
                      "inside the measured error)")] if dev.type == "cpu" else [])]}
    for cfg in cfgs:
        progress(f"{cfg.mode} run" + (f", tau {','.join(f'{t:g}' for t in cfg.taus)}" if cfg.mode == "sol" else ""))
        trace, rep, secs = one(cfg, lossy)
        steps = []
        for i, (x, xd) in enumerate(zip(trace, dense)):
            row = {"step": i + 1, "latent_rel_l2": rel_l2(x, xd)}
            if cfg.mode == "sol":
                row["tau"] = cfg.tau(i)
                row["density"] = rep.get("density_per_step", {}).get(str(i))
            if vae is not None:
                p = psnr(frames(x), dense_frames[i])
                row["psnr_db"] = "inf" if math.isinf(p) else p
            steps.append(row)
        out["variants"].append({**cfg.to_json(), "precision": args.precision, "steps": steps, "refine_s": secs,
                                "attention_s": rep["seconds"].get("stage2", 0.0), "calls": rep["calls"]})
    return out


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "attention-quality", aliases=["quality"], help="refine one latent with dense and with lossy attention (sol, fp8) from the same "
                                  "seed; latent error and decoded-frame PSNR per update",
        description=__doc__.split("\n\n")[1] if __doc__ else None)
    p.add_argument("--attention", default="sol", choices=["sol", "fp8", "dense"],
                   help="the attention class of the variant (default sol; dense with --precision fp8 isolates the "
                        "FP8 linears)")
    p.add_argument("--precision", default="bf16", choices=["bf16", "fp8"],
                   help="the variant's block linears: bf16 (default) or fp8 (e4m3 weights per output channel)")
    p.add_argument("--sol-tau", action="append", default=None,
                   help="a tau schedule, comma-separated per refiner update; repeat the flag to compare several "
                        "(default 1.0,1.25,1.5)")
    p.add_argument("--sol-dense-layers", type=int, default=None,
                   help="sol: refiner layers kept dense (default 2 on full, 1 on tiny: its refiner has 2)")
    p.add_argument("--sol-block", type=int, default=None,
                   help="sol: selection block rows (default 128 on full, 8 on tiny: the tiny latent has few rows)")
    p.add_argument("--config", default="tiny", choices=["tiny", "full"], help="refiner size (default tiny)")
    p.add_argument("--latent", default=None, type=_latent,
                   help="LTX latent FxHxW (default 16x24x42 on full: the 1344x768 5 s route; 3x8x8 on tiny)")
    p.add_argument("--kernels", default="verified", choices=["reference", "verified"],
                   help="fused ops and attention kernels from verified_kernels/ where locked (default verified)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="auto", help="auto (cuda if visible), cpu, cuda, cuda:N")
    p.add_argument("--prompt-cache", default=".rsi/prompt_cache", help="stage-2 context cache folder")
    p.add_argument("--no-decode", action="store_true", help="skip the VAE decode (no PSNR)")
    p.add_argument("--json", default=None, help="write the results as JSON here")
    p.set_defaults(fn=main)
    return p


def _latent(text: str) -> tuple[int, int, int]:
    try:
        f, h, w = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: use FxHxW, e.g. 16x24x42") from None
    if min(f, h, w) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: every size >= 1")
    return f, h, w


def main(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    con = Console() if sys.stdout.isatty() else Console(width=160)
    try:
        variants(args)
        if args.json:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    except (ValueError, OSError) as e:
        con.print(f"[red]error:[/] {e}", soft_wrap=True)
        return 2
    try:
        with torch.no_grad():
            res = run(args, progress=lambda s: con.print(f"[dim]{s}[/]"))
    except KeyboardInterrupt:
        con.print("[red]interrupted[/]")
        return 130
    except Exception as e:  # noqa: BLE001 - one line, not a traceback wall
        con.print(f"[red]failed:[/] {type(e).__name__}: {e}", soft_wrap=True)
        return 1
    t = Table(title=f"attention quality: LTX-2 refiner {res['config']} on {res['device']}, latent "
                    f"{'x'.join(map(str, res['latent'][2:]))}, vs dense from the same seed (lossy rows)")
    for c in ("class", "step", "tau", "density", "latent rel-L2", "PSNR dB", "attention s"):
        t.add_column(c, justify="right" if c != "class" else "left")
    t.add_row("dense attention, bf16 linears (reference)", "all", "", "1.000", "0", "inf", f"{res['dense']['attention_s']:.3f}")
    for v in res["variants"]:
        for r in v["steps"]:
            p = r.get("psnr_db")
            t.add_row(f"{v['mode']} attention, {v['precision']} linears (lossy)", str(r["step"]), f"{r['tau']:g}" if "tau" in r else "",
                      f"{r['density']:.3f}" if r.get("density") is not None else "",
                      f"{r['latent_rel_l2']:.3g}", "" if p is None else (p if isinstance(p, str) else f"{p:.1f}"),
                      f"{v['attention_s']:.3f}" if r["step"] == 1 else "")
    con.print(t)
    for n in res["notes"]:
        con.print(f"[yellow]note:[/] {n}", soft_wrap=True)
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2))
        con.print(f"wrote {args.json}")
    return 0
