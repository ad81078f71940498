"""H3 x2 latent upscaler (LBH-123-AI ``LatentResizer3D``, H3_SPEC.md section 6), random weights from a seed.

Spec facts used: ``conv_in`` 24 -> 512; an embedding MLP (1 -> 64 -> 64) of (scale - 1); 12 ``in_blocks`` of
ResBlockEmb3D (GroupNorm + SiLU + 3^3 conv, twice, with embedding-modulated scale/shift) plus a depthwise k=5
TemporalConv3D after each even-index block; a trilinear resize (x2 spatial, time unchanged); 12 ``out_blocks``;
GroupNorm + SiLU + ``conv_out`` -> 24; a second normalisation ``(z - mean)/std`` of the pipeline latent; 32-frame
temporal chunks. [1, 24, 37, 24, 42] -> [1, 24, 37, 48, 84].

Our reading where the spec is silent:
- Every block is 512 -> 512 channels, so no block needs a residual projection (a 1^3 ``skip`` conv would be added
  only if the channels changed, which they never do here). GroupNorm: 32 groups, eps 1e-6.
- ResBlockEmb3D is the ADM "scale-shift norm" block: ``h = conv1(silu(norm1(x)))``;
  ``scale, shift = emb_proj(silu(emb))``; ``h = conv2(silu(norm2(h) * (1 + scale) + shift))``; ``x + h``.
- The embedding MLP is Linear(1, 64) -> SiLU -> Linear(64, 64) (keys ``embed.0``, ``embed.2``).
- TemporalConv3D is residual: ``x + dwconv(x)``, kernel (5, 1, 1), zero padding 2, with a bias. ``out_blocks`` are
  plain ResBlockEmb3D (the spec attaches temporal convs to ``in_blocks`` only).
- The resize is ``F.interpolate(mode="trilinear", align_corners=False)`` to size (T, 2H, 2W) at 512 channels.
- ``upscale`` takes the pipeline latent [B, 24, T, H, W], normalises it with the upscaler's own per-channel
  ``latents_mean``/``latents_std`` buffers (default 0/1, ``set_stats``), runs the network, and maps the result back
  with ``y * std + mean``, so input and output are both pipeline latents (fp32 out).
- Chunks: the time axis is cut into consecutive 32-frame chunks with no overlap (37 = 32 + 5); each chunk runs on
  its own (zero temporal padding and its own GroupNorm statistics at chunk edges) and the outputs are
  concatenated along time. So ``upscale(z)`` equals ``cat([net(z[:, :, :32]), net(z[:, :, 32:])], dim=2)``.
- Weights: ``runtime.model.init_random_`` (N(0, 1/fan_in) kernels, zero biases, unit norm gains). Compute dtype:
  fp32 by default, bf16 when built on CUDA (the stats buffers stay fp32).

Size at ``UpscalerConfig.full()``: 342,097,624 parameters (342.1M; tests/e2e/test_upscaler_adapter.py checks this
on the meta device).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from runtime.model import init_random_


@dataclass(frozen=True)
class UpscalerConfig:
    latent_ch: int = 24
    width: int = 512
    emb_dim: int = 64
    in_blocks: int = 12
    out_blocks: int = 12
    groups: int = 32
    eps: float = 1e-6
    temporal_kernel: int = 5
    scale: int = 2                   # spatial factor; the embedding sees (scale - 1)
    chunk_frames: int = 32

    @classmethod
    def full(cls) -> UpscalerConfig:
        return cls()

    @classmethod
    def tiny(cls) -> UpscalerConfig:
        return cls(width=16, emb_dim=8, in_blocks=2, out_blocks=2, groups=4)


class ResBlockEmb3D(nn.Module):
    def __init__(self, c: UpscalerConfig):
        super().__init__()
        self.norm1 = nn.GroupNorm(c.groups, c.width, eps=c.eps)
        self.conv1 = nn.Conv3d(c.width, c.width, 3, padding=1)
        self.emb_proj = nn.Linear(c.emb_dim, 2 * c.width)
        self.norm2 = nn.GroupNorm(c.groups, c.width, eps=c.eps)
        self.conv2 = nn.Conv3d(c.width, c.width, 3, padding=1)

    def forward(self, x: torch.Tensor, emb: torch.Tensor) -> torch.Tensor:
        h = self.conv1(F.silu(self.norm1(x)))
        scale, shift = self.emb_proj(F.silu(emb))[:, :, None, None, None].chunk(2, dim=1)    # [B, C, 1, 1, 1]
        return x + self.conv2(F.silu(self.norm2(h) * (1 + scale) + shift))


class TemporalConv3D(nn.Module):
    def __init__(self, c: UpscalerConfig):
        super().__init__()
        k = c.temporal_kernel
        self.conv = nn.Conv3d(c.width, c.width, (k, 1, 1), padding=(k // 2, 0, 0), groups=c.width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv(x)


class LatentResizer3D(nn.Module):
    def __init__(self, c: UpscalerConfig):
        super().__init__()
        self.c = c
        self.conv_in = nn.Conv3d(c.latent_ch, c.width, 3, padding=1)
        self.embed = nn.Sequential(nn.Linear(1, c.emb_dim), nn.SiLU(), nn.Linear(c.emb_dim, c.emb_dim))
        self.in_blocks = nn.ModuleList(ResBlockEmb3D(c) for _ in range(c.in_blocks))
        # in_temporal[j] follows in_blocks[2j]
        self.in_temporal = nn.ModuleList(TemporalConv3D(c) for _ in range((c.in_blocks + 1) // 2))
        self.out_blocks = nn.ModuleList(ResBlockEmb3D(c) for _ in range(c.out_blocks))
        self.norm_out = nn.GroupNorm(c.groups, c.width, eps=c.eps)
        self.conv_out = nn.Conv3d(c.width, c.latent_ch, 3, padding=1)
        self.register_buffer("latents_mean", torch.zeros(c.latent_ch))
        self.register_buffer("latents_std", torch.ones(c.latent_ch))

    def set_stats(self, mean=None, std=None) -> None:
        """The upscaler's own per-channel latent statistics (24 each); default 0 / 1."""
        self.latents_mean.copy_(torch.as_tensor(mean if mean is not None else [0.0] * self.c.latent_ch))
        self.latents_std.copy_(torch.as_tensor(std if std is not None else [1.0] * self.c.latent_ch))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: [B, 24, T, H, W] upscaler-normalised latent (model dtype) -> [B, 24, T, sH, sW]; one chunk."""
        B, _, T, H, W = x.shape
        s = self.c.scale
        emb = self.embed(torch.full((B, 1), float(s - 1), dtype=x.dtype, device=x.device))      # [B, emb]
        h = self.conv_in(x)
        for i, blk in enumerate(self.in_blocks):
            h = blk(h, emb)
            if i % 2 == 0:
                h = self.in_temporal[i // 2](h)
        h = F.interpolate(h, size=(T, s * H, s * W), mode="trilinear", align_corners=False)
        for blk in self.out_blocks:
            h = blk(h, emb)
        return self.conv_out(F.silu(self.norm_out(h)))

    @torch.no_grad()
    def upscale(self, z: torch.Tensor) -> torch.Tensor:
        """z: [B, 24, T, H, W] pipeline latent (any float dtype) -> [B, 24, T, 2H, 2W] fp32 pipeline latent, in
        consecutive ``chunk_frames``-frame chunks without overlap."""
        if z.dim() != 5 or z.shape[1] != self.c.latent_ch:
            raise ValueError(f"upscale expects [B, {self.c.latent_ch}, T, H, W], got {list(z.shape)}")
        mean, std = (v.float()[:, None, None, None] for v in (self.latents_mean, self.latents_std))
        x = ((z.float() - mean) / std).to(self.conv_in.weight.dtype)
        n = self.c.chunk_frames
        y = torch.cat([self(x[:, :, t:t + n]).float() for t in range(0, x.shape[2], n)], dim=2)
        return y * std + mean


def build_upscaler(cfg: UpscalerConfig, device: torch.device | str = "cpu", seed: int | None = 0,
                   dtype: torch.dtype | None = None) -> LatentResizer3D:
    """Construct on the meta device, then materialise on ``device`` and init from ``seed``. ``device="meta"``
    returns shapes only. ``dtype``: parameter (compute) dtype; default bf16 on CUDA, else fp32."""
    with torch.device("meta"):
        model = LatentResizer3D(cfg)
    if str(device) == "meta":
        return model
    model.to_empty(device=device)
    model.set_stats()
    if seed is not None:
        init_random_(model, seed)
    dtype = dtype or (torch.bfloat16 if torch.device(device).type == "cuda" else torch.float32)
    for p in model.parameters():
        p.data = p.data.to(dtype)
    return model.eval().requires_grad_(False)
