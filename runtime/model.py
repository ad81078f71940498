"""MiniMax-H3 DiT (H3_SPEC.md section 1): patch embeddings, 2-block token refiner, N blocks with indexed AdaLN
modulation, final layer with video and audio heads. Module names are the official native checkpoint keys.

Per block (fused ops in brackets, via runtime.kernels):
    h = [modulate](x, norm1, shift_msa, scale_msa, idx)   block 0 only; with --precision fp8 [modulate_fp8]
    a = attn(h)                                 [qk_norm_rope] + SDPA
    x, h = [gate_residual_modulate](x, gate_msa, a, norm2, shift_mlp, scale_mlp, idx)
    m = fc2([swiglu](fc1(h)))
    x = x + gate_mlp[idx] * m                   fused with the next block's norm1 as [gate_residual_modulate]
With --precision fp8 and a verified kernel for the dims, each [gate_residual_modulate] is
[gate_residual_modulate_fp8] (h written as its consumer's e4m3 input and row scales) and [swiglu] is [swiglu_fp8].
"""

from __future__ import annotations

import zlib
from typing import Any

import torch
from torch import nn

from runtime.config import DiTConfig
from runtime.kernels import identity_rope
from runtime.layers import BF16, FP32, MLP, Attention, RMSNorm, Rope, TimeEmbedder

ADALN_STD = 0.5                  # random init: modulation values ~0.1-0.3 keep 50 blocks finite


class AdaLNProj(nn.Module):
    def __init__(self, in_dim: int, out_dim: int):
        super().__init__()
        self.linear = nn.Linear(in_dim, out_dim, dtype=BF16)


class RefinerBlock(nn.Module):
    """Pre-norm block without RoPE and AdaLN: x += attn(norm1 x); x += mlp(norm2 x)."""

    def __init__(self, cfg: DiTConfig):
        super().__init__()
        self.norm1, self.norm2 = RMSNorm(cfg.hidden, cfg.eps), RMSNorm(cfg.hidden, cfg.eps)
        self.attn, self.mlp = Attention(cfg), MLP(cfg)

    def forward(self, x: torch.Tensor, rope: torch.Tensor, kernels) -> torch.Tensor:
        x = x + self.attn(self.norm1(x), rope, [0, x.shape[0]], kernels)
        return x + self.mlp(self.norm2(x), kernels)


class TokenRefiner(nn.Module):
    def __init__(self, cfg: DiTConfig):
        super().__init__()
        self.blocks = nn.ModuleList(RefinerBlock(cfg) for _ in range(cfg.refiner_blocks))
        self.final_norm = RMSNorm(cfg.hidden, cfg.eps)


class Block(nn.Module):
    def __init__(self, cfg: DiTConfig):
        super().__init__()
        self.norm1, self.norm2 = RMSNorm(cfg.hidden, cfg.eps), RMSNorm(cfg.hidden, cfg.eps)
        self.attn, self.mlp = Attention(cfg), MLP(cfg)
        self.adaln_proj = AdaLNProj(cfg.time_dim, cfg.adaln_width)    # released after the table precompute


class FinalLayer(nn.Module):
    def __init__(self, cfg: DiTConfig):
        super().__init__()
        self.norm = RMSNorm(cfg.hidden, cfg.eps)
        self.adaln_proj = AdaLNProj(cfg.time_dim, 2 * cfg.hidden)    # (shift, scale), indexed by timestep only
        self.video_out = nn.Linear(cfg.hidden, cfg.video_in, dtype=FP32)
        self.audio_out = nn.Linear(cfg.hidden, cfg.audio_in, dtype=FP32)


class H3DiT(nn.Module):
    def __init__(self, cfg: DiTConfig):
        super().__init__()
        self.cfg = cfg
        self.video_patch_proj = nn.Linear(cfg.video_in, cfg.hidden, dtype=FP32)
        self.audio_patch_proj = nn.Linear(cfg.audio_in, cfg.hidden, dtype=FP32)
        self.condition_proj = nn.Linear(cfg.text_dim, cfg.hidden, dtype=BF16)
        self.time_embedder = TimeEmbedder(cfg)
        self.rope = Rope(cfg)
        self.token_refiner = TokenRefiner(cfg)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.blocks))
        self.final_layer = FinalLayer(cfg)

    # ------------------------------------------------------------------------------------------------ text
    def encode_text(self, text: torch.Tensor, kernels) -> torch.Tensor:
        """[L, text_dim] bf16 -> [L, H] bf16 refined text rows. The refiner sees only the text rows and no
        timestep, so its output is the same every step: the sampler computes it once."""
        x = self.condition_proj(text.to(BF16))
        rope = identity_rope(x.shape[0], x.device)
        for blk in self.token_refiner.blocks:
            x = blk(x, rope, kernels)
        return self.token_refiner.final_norm(x)

    # ------------------------------------------------------------------------------------------------ forward
    def block(self, i: int, x: torch.Tensor, h, step, rope: torch.Tensor, bounds: list[int],
              kernels) -> tuple[torch.Tensor, Any]:
        """Block i. x: [S, H] residual, h: [S, H] its modulated input, or (h8, h_scale) from a fused fp8 producer.
        Returns (x, h of block i + 1, in the same two forms); the block's closing residual is fused with the next
        block's norm1 modulation (None after the last)."""
        blk, idx, c = self.blocks[i], step.mod_idx, step.block_chunks(i)
        a = blk.attn(h, rope, bounds, kernels)                                              # [S, H]
        x, h = residual_modulate(blk.mlp.fc1, kernels, x, c[2], a, blk.norm2.weight, c[3], c[4], idx)
        m = blk.mlp(h, kernels)                                                             # [S, H]
        if i + 1 == len(self.blocks):
            return x + c[5][idx] * m, None
        nxt, nblk = step.block_chunks(i + 1), self.blocks[i + 1]
        return residual_modulate(nblk.attn.qkv_proj, kernels, x, c[5], m, nblk.norm1.weight, nxt[0], nxt[1], idx)

    def first_modulate(self, x: torch.Tensor, c: tuple, idx: torch.Tensor, kernels):
        """Block 0's modulated input: ``modulate``'s [S, H] bf16, or with an fp8 qkv_proj and a verified
        ``modulate_fp8`` kernel for these dims that kernel's (h8, h_scale), which qkv_proj takes as it is (every
        later block's input comes from ``residual_modulate``)."""
        args = (x, self.blocks[0].norm1.weight, c[0], c[1], idx)
        fp8 = getattr(self.blocks[0].attn.qkv_proj, "takes_quantized", False)
        if fp8 and kernels.verified("modulate_fp8", *args):
            return kernels.call("modulate_fp8", *args)
        return kernels.call("modulate", *args)

    def forward(self, video: torch.Tensor, audio: torch.Tensor, text_h: torch.Tensor, seq, rope: torch.Tensor,
                step, kernels, cond: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """video: [V, 96] fp32 target rows, audio: [A, 32] fp32, text_h: [L, H] bf16 (encode_text), seq: the
        PackedSequence, rope: [S, 96] bf16, step: a runtime.adaln.StepModulation, cond: [C, 96] fp32 or None.
        Returns data-ward velocities (v_video [V, 96] fp32, v_audio [A, 32] fp32); condition rows are dropped
        (update_mask)."""
        H = self.cfg.hidden
        x = torch.zeros(seq.total, H, dtype=BF16, device=video.device)                      # [S, H]
        x[seq.text] = text_h
        if seq.cond_rows:
            x[seq.cond] = self.video_patch_proj(cond.float()).to(BF16)
        x[seq.audio] = self.audio_patch_proj(audio.float()).to(BF16)
        x[seq.video] = self.video_patch_proj(video.float()).to(BF16)

        sp = getattr(kernels, "sp", None)  # runtime.ulysses.Ulysses: this rank runs the blocks on its rows only
        if sp is not None and sp.world > 1:
            rows = sp.rows(seq.total)
            x, rope, step = x[rows], rope[rows], sp.local_step(step, seq.total)
            kernels.attention.sp = sp
        try:
            c = step.block_chunks(0)      # shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp [T, H]
            h = self.first_modulate(x, c, step.mod_idx, kernels)
            for i in range(len(self.blocks)):
                x, h = self.block(i, x, h, step, rope, seq.cu_seqlens, kernels)
        finally:
            if sp is not None:
                kernels.attention.sp = None

        fl = self.final_layer
        shift, scale = step.final_chunks()                                                  # [M, H] each
        h = kernels.call("modulate", x, fl.norm.weight, shift, scale, step.t_idx).float()   # [S, H] fp32
        if sp is not None and sp.world > 1:
            h = sp.gather_rows(h)                                                           # every rank: [S, H]
        v_video, v_audio = fl.video_out(h), fl.audio_out(h)                                 # all rows, then select
        return v_video[seq.video], v_audio[seq.audio]


def residual_modulate(consumer: nn.Module, kernels, *args):
    """``gate_residual_modulate``'s (x, h) for the layer that takes h; with an fp8 ``consumer`` (fc1, or the next
    block's qkv_proj) and a verified ``gate_residual_modulate_fp8`` kernel for these dims, (x, (h8, h_scale)) from that
    kernel, which the consumer takes as it is. args: res, gate, branch, w, shift, scale, idx."""
    if getattr(consumer, "takes_quantized", False) and kernels.verified("gate_residual_modulate_fp8", *args):
        r, h8, h_scale = kernels.call("gate_residual_modulate_fp8", *args)
        return r, (h8, h_scale)
    return kernels.call("gate_residual_modulate", *args)


# ---------------------------------------------------------------------------------------------------- building
def build_dit(cfg: DiTConfig, device: torch.device | str = "cpu", seed: int | None = 0) -> H3DiT:
    """Construct on the meta device (no memory), then materialize on ``device`` and init from ``seed``.
    ``device="meta"`` returns the shapes only (param counts of the full 33B model on a CPU)."""
    with torch.device("meta"):
        model = H3DiT(cfg)
    if str(device) == "meta":
        return model
    model.to_empty(device=device)
    model.rope.inv_freq.copy_(model.rope.default_inv_freq())
    if seed is not None:
        init_random_(model, seed)
    return model.eval().requires_grad_(False)


@torch.no_grad()
def init_random_(model: nn.Module, seed: int, scale=lambda name: ADALN_STD if "adaln_proj" in name else 1.0) -> None:
    """Deterministic random weights: each parameter from its own generator seeded by (seed, name), drawn
    directly on the parameter's device (no host copy of 33B parameters). Matrices and kernels ~ N(0, 1/fan_in)
    times ``scale(name)``; vectors: norm weights and Snake alphas 1, biases 0."""
    for name, p in model.named_parameters():
        parts = ["", *name.split(".")]
        if p.dim() < 2:
            is_gain = "norm" in parts[-2] or parts[-1] == "alpha"
            p.fill_(1.0 if is_gain else 0.0)
        else:
            g = torch.Generator(device=p.device).manual_seed(seed * 1_000_003 + zlib.crc32(name.encode()))
            p.normal_(0.0, p[0].numel() ** -0.5 * scale(name), generator=g)


def param_counts(model: nn.Module) -> dict[str, int]:
    total = sum(p.numel() for p in model.parameters())
    adaln = sum(p.numel() for n, p in model.named_parameters() if "adaln_proj" in n)
    return {"total": total, "adaln": adaln, "other": total - adaln}
