"""Small LoRA adapters for the tiny DiT, written by the tests (no adapter files are reachable here)."""

from __future__ import annotations

import torch
from safetensors.torch import save_file

INNER, F2, H = 256, 1024, 256         # tiny: attention width, fc1 out, hidden


def rnd(*shape, seed, scale=0.02):
    return (torch.randn(shape, generator=torch.Generator().manual_seed(seed)) * scale).bfloat16()


def write_peft(path, rank=4, alpha=8):
    """LightX2V-style PEFT file (``.default.`` infix); ``alpha=None`` writes no alpha metadata."""
    t, s = {}, 0
    for prefix in ("transformer_blocks.0", "transformer_blocks.1", "token_refiner.refiner_blocks.0"):
        for mod, (i, o) in {"attn.to_q": (H, INNER), "attn.to_k": (H, INNER), "attn.to_v": (H, INNER),
                            "attn.to_out.0": (INNER, H), "ff.net.0.proj": (H, F2), "ff.net.2": (F2 // 2, H)}.items():
            s += 2
            t[f"{prefix}.{mod}.lora_A.default.weight"] = rnd(rank, i, seed=s, scale=0.3)
            t[f"{prefix}.{mod}.lora_B.default.weight"] = rnd(o, rank, seed=s + 1, scale=0.3)
    meta = {"key_format": "minimax-h3-diffusers"} | ({} if alpha is None else {"alpha": str(alpha)})
    save_file(t, str(path), metadata=meta)
    return t


def exact(*shape, seed):
    """Entries k/16, |k| <= 8: every product and 4-term sum is exact in fp32, so deltas merge identically
    whatever the matmul's summation order or row blocking."""
    return torch.randint(-8, 9, shape, generator=torch.Generator().manual_seed(seed)).float() / 16
