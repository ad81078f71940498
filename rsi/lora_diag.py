"""How much of a LoRA update survives being merged into a bf16 weight (the Sol-H3 diagnostic).

Merging ``W' = W + (alpha/r) B @ A`` and storing W' in bf16 rounds every entry to bf16's 8-bit significand. A trained
adapter's update is small next to W (|dW| ~ 1e-3..1e-2 |W|), so most nonzero updates round straight back to the
original bf16 weight: the adapter silently vanishes. That is why ``lora_consumer`` keeps the base and LoRA GEMMs
separate and adds their *outputs* (rsi/refs/lora_consumer.py).

Run ``python -m rsi.lora_diag`` (``--size 5376`` for H3's square projections) to print the numbers as JSON.
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

import torch


def lora_update(out_features: int, in_features: int, rank: int, alpha: float, b_std: float,
                g: torch.Generator) -> torch.Tensor:
    """(alpha/r) * B @ A in fp32, initialized like PEFT and "trained" B: A ~ kaiming-uniform(a=sqrt(5)) over
    in_features (bound 1/sqrt(fan_in)), B ~ N(0, b_std)."""
    bound = 1.0 / math.sqrt(in_features)
    a = (torch.rand((rank, in_features), generator=g) * 2 - 1) * bound
    b = torch.randn((out_features, rank), generator=g) * b_std
    return (alpha / rank) * (b @ a)


def merge_survival(w: torch.Tensor, delta: torch.Tensor) -> dict[str, float]:
    """w: bf16 weight; delta: fp32 update. Statistics of ``bf16(w + delta)`` against ``w`` over nonzero deltas."""
    merged = (w.float() + delta).to(torch.bfloat16)
    nz = delta != 0
    n = int(nz.sum())
    same = (merged == w) & nz
    stored = (merged.float() - w.float())[nz]
    wanted = delta[nz]
    rel = float(delta.norm() / w.float().norm())
    return {
        "nonzero_updates": n,
        "fraction_rounded_back": float(same.sum()) / max(n, 1),  # the update vanished entirely
        # ||stored update - wanted update|| / ||wanted update||: 0 exact, ~1 the update is mostly noise or gone
        "stored_update_rel_err": float((stored - wanted).norm() / wanted.norm()) if n else float("nan"),
        "update_rel_rms": rel,
    }


def lora_rounding_diag(out_features: int = 2048, in_features: int = 2048, ranks=(64, 128),
                       b_stds=(1e-3, 1e-4), alpha_over_rank: float = 2.0, seed: int = 0) -> dict[str, Any]:
    """Fraction of nonzero LoRA updates that round back to the original weight when W + B@A is stored in bf16.

    W ~ N(0, 1/sqrt(fan_in)) in bf16; for each rank r and B scale: A kaiming-uniform, B ~ N(0, b_std),
    update (alpha/r) B @ A with alpha = alpha_over_rank * r (alpha = 2r is a common choice). Returns a dict that
    prints straight into a README or record.
    """
    g = torch.Generator().manual_seed(seed)
    w = (torch.randn((out_features, in_features), generator=g) / math.sqrt(in_features)).to(torch.bfloat16)
    rows = []
    for r in ranks:
        for b_std in b_stds:
            delta = lora_update(out_features, in_features, r, alpha_over_rank * r, b_std, g)
            rows.append({"rank": r, "alpha": alpha_over_rank * r, "b_std": b_std, **merge_survival(w, delta)})
    return {
        "what": "fraction of nonzero LoRA updates (alpha/r) B@A that round back to W when W + B@A is stored in bf16",
        "weight": {"shape": [out_features, in_features], "dtype": "bfloat16", "init": "N(0, 1/sqrt(fan_in))"},
        "adapter": {"A": "kaiming-uniform (bound 1/sqrt(fan_in))", "B": "N(0, b_std)",
                    "alpha_over_rank": alpha_over_rank},
        "seed": seed,
        "results": rows,
    }


def render_markdown(diag: dict[str, Any]) -> str:
    lines = [(f"W {diag['weight']['shape'][0]}x{diag['weight']['shape'][1]} bf16 ~ N(0, 1/sqrt(fan_in)); "
              f"update (alpha/r) B@A, alpha = {diag['adapter']['alpha_over_rank']:g} r, seed {diag['seed']}"), "",
             "| rank | B std | update rms / W rms | updates rounded back to W | error of the stored update |",
             "|---:|---:|---:|---:|---:|"]
    for r in diag["results"]:
        lines.append(f"| {r['rank']} | {r['b_std']:.0e} | {r['update_rel_rms']:.2e} | "
                     f"{100 * r['fraction_rounded_back']:.1f}% | {100 * r['stored_update_rel_err']:.0f}% |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m rsi.lora_diag", description=__doc__.split("\n\n")[0])
    p.add_argument("--size", type=int, default=2048, help="square weight size (5376 for H3's projections)")
    p.add_argument("--ranks", default="64,128", help="comma-separated LoRA ranks (default 64,128)")
    p.add_argument("--b-stds", default="1e-3,1e-4", help="comma-separated std of B (default 1e-3,1e-4)")
    p.add_argument("--alpha-over-rank", type=float, default=2.0, help="alpha / r (default 2)")
    p.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    p.add_argument("--markdown", action="store_true", help="print a markdown table instead of JSON")
    a = p.parse_args(argv)
    diag = lora_rounding_diag(a.size, a.size, tuple(int(x) for x in a.ranks.split(",")),
                              tuple(float(x) for x in a.b_stds.split(",")), a.alpha_over_rank, a.seed)
    print(render_markdown(diag) if a.markdown else json.dumps(diag, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
