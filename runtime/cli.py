"""``rsi run-pipeline``: one H3 request end to end, with a per-stage timing table and the same as JSON.

Wiring: rsi/cli.py calls ``add_parser(sub)``; the subparser's default ``fn`` is ``run``. Standalone:
``python -m runtime.cli run-pipeline --prompt ...``. Exit codes: 0 ok, 1 failure, 2 usage error.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

console = Console() if sys.stdout.isatty() else Console(width=160)     # logs and pipes: no 80-column wrap


def parse_resolution(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"\s*(\d+)\s*[xX]\s*(\d+)\s*", text)
    if not m:
        raise ValueError(f"--resolution {text!r}: use WIDTHxHEIGHT, e.g. 1344x768 or 672x384")
    return int(m.group(1)), int(m.group(2))


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("run-pipeline", help="run one MiniMax-H3 text-to-video+audio request end to end "
                                                   "(random weights unless --weights) and write an MP4")
    p.add_argument("--prompt", required=True, help="text prompt")
    p.add_argument("--duration", type=float, default=5.0, help="seconds of video, 0 < d <= 10 (default 5; frames "
                                                                 "snap up to 17n+5 at 24 fps: 5 s -> 124)")
    p.add_argument("--resolution", default="672x384", help="WIDTHxHEIGHT, multiples of 32, area <= 1344x768 "
                                                          "(default 672x384)")
    p.add_argument("--steps", type=int, default=4, help="denoising forwards (default 4: FastH3 schedule; 49: the "
                                                        "base 50-point schedule)")
    p.add_argument("--schedule", default="auto", choices=["auto", "base", "fasth3"],
                   help="sigma schedule; auto = fasth3 for 4 steps, else base with steps+1 points")
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
    p.add_argument("--lora", default=None, help="LoRA adapter (PEFT .safetensors, or a FastVideo-v2 folder/file)")
    p.add_argument("--lora-mode", default="merged", choices=["merged", "native", "consumer"],
                   help="merge into bf16 weights, keep native branches, or fuse fc1's branch into the consumer op")
    p.add_argument("--lora-strength", type=float, default=1.0, help="multiplier on the adapter's scale")
    p.add_argument("--device", default="auto", help="auto (cuda if visible), cpu, cuda, cuda:N")
    p.add_argument("--no-mux", action="store_true", help="skip writing the MP4 (timing runs without PyAV)")
    p.add_argument("--dry-run", action="store_true", help="validate the request and print the plan; run nothing")
    p.add_argument("--verbose", action="store_true", help="log every kernel choice as it is made")
    p.set_defaults(fn=run)
    return p


def run(args: argparse.Namespace) -> int:
    from runtime.packing import RequestError
    from runtime.pipeline import Request, fmt_gib, pick_schedule, run_pipeline, summary_rows, validate

    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(name)s: %(message)s")
    try:
        width, height = parse_resolution(args.resolution)
        req = Request(prompt=args.prompt, duration_s=args.duration, width=width, height=height, steps=args.steps,
                      schedule=args.schedule, seed=args.seed, config=args.config, kernels=args.kernels,
                      weights=args.weights, out=args.out, text_encoder=args.text_encoder, lora=args.lora,
                      lora_mode=args.lora_mode, lora_strength=args.lora_strength, device=args.device,
                      root=getattr(args, "root", "."), mux=not args.no_mux)
        plan = validate(req)
    except (ValueError, RequestError) as e:
        console.print(f"[red]error:[/] {e}", soft_wrap=True)
        return 2
    if args.dry_run:
        console.print_json(json.dumps({"plan": plan.to_json(), "schedule": pick_schedule(req).to_json()}))
        return 0
    try:
        res = run_pipeline(req, progress=lambda s: console.print(f"[dim]{s}[/]"))
    except RequestError as e:
        console.print(f"[red]error:[/] {e}", soft_wrap=True)
        return 2
    except Exception as e:      # a run that breaks is a failure with its message, not a traceback wall
        logging.getLogger("runtime.cli").debug("pipeline failed", exc_info=True)
        console.print(f"[red]failed:[/] {type(e).__name__}: {e}", soft_wrap=True)
        return 1

    t = Table(title=f"H3 {req.config} {width}x{height} {plan.frames} frames, {res.schedule['steps']} steps "
                    f"({res.schedule['name']}), kernels={req.kernels}, {res.device}")
    t.add_column("stage")
    t.add_column("seconds", justify="right")
    for name, sec in summary_rows(res):
        t.add_row(name, sec)
    console.print(t)
    k = Table(title="kernel dispatch")
    for col in ("op", "dims", "kernel", "calls", "why"):
        k.add_column(col)
    for c in res.kernels:
        k.add_row(c["op"], ",".join(f"{a}={b}" for a, b in c["dims"].items()), c["kernel"], str(c["calls"]), c["why"])
    console.print(k)
    console.print(f"peak GPU memory {fmt_gib(res.memory['peak_gpu_gib'])}; peak host RSS "
                  f"{fmt_gib(res.memory['peak_host_rss_gib'])}; AdaLN released {res.adaln['released_gib']:.2f} GiB, "
                  f"tables {res.adaln['table_gib'] * 1024:.1f} MiB")
    console.print(f"verified_kernels/LOCK.json sha256: {res.lock_sha256 or 'none (no lock file)'}")
    for n in res.notes:
        console.print(f"[yellow]note:[/] {n}", soft_wrap=True)
    out_json = Path(args.json) if args.json else Path(req.out).with_suffix(".json")
    out_json.write_text(json.dumps(res.to_json(), indent=2, default=str))
    if res.mp4:
        console.print(f"wrote {req.out} ({res.mp4['frames']} frames @ {res.mp4['fps']:g} fps, audio "
                      f"{res.mp4['audio_duration_s']:.2f} s) and {out_json}")
    else:
        console.print(f"wrote {out_json}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runtime.cli")
    parser.add_argument("--root", default=".", help="workspace root holding verified_kernels/ (default: .)")
    add_parser(parser.add_subparsers(dest="verb", required=True))
    args = parser.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
