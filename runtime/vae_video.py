"""H3 video VAE decoder: ViT3D over latent tokens, 17-frame clip chunking (H3_SPEC.md section 3).

Spec facts used: 24 latent channels, 16x spatial / 4x temporal, 36 layers of 32 x 64 heads, 4 register tokens,
gated FFN x4 (``ff.w1`` = [gate; up]), RoPE theta 100 on 75% of each head, per-head-interleaved ``to_qkv``; a 17-frame
clip is 5 tokens (frames 1+4+4+4+4, token position ``clip*17 + token*4``); ``z * std + mean`` before decoding;
tokens_chunk_size 5, token_overlap 2, frame_pre_padding 3, frame_overlap 5.

Our reading where the spec is silent (documented in docs/runtime.md): each latent voxel is one token; LayerNorm
pre-norm blocks; a token decodes to 4 frames of 16x16 pixels and a clip's first token keeps only its last frame
(the 3 pre-padding frames are dropped), which is what makes 5n+2 latents give 17n+5 frames. Windows are the
5-token clips with 2 tokens of left context; the last ``frame_overlap`` frames of the context tokens are linearly
cross-faded between the previous window and this one. Frames leave as uint8, converted on the device.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from runtime.config import VideoVAEConfig


def token_frames(k: int, clip_tokens: int = 5, clip_length: int = 17) -> tuple[int, int]:
    """Frame range [a, b) of latent token k: a clip's first token is 1 frame, the others 4."""
    c, j = divmod(k, clip_tokens)
    if j == 0:
        return c * clip_length, c * clip_length + 1
    return c * clip_length + 1 + 4 * (j - 1), c * clip_length + 1 + 4 * j


def rope_cos_sin(pos: torch.Tensor, rot: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """pos: [N, 3] (t, h, w) -> cos, sin [N, rot/2]: rot/6 frequencies per axis, half-split pairs (j, j + rot/2)."""
    n = rot // 6
    inv = theta ** (-torch.arange(n, dtype=torch.float32, device=pos.device) / n)
    ang = (pos.float()[:, :, None] * inv).reshape(pos.shape[0], 3 * n)
    return ang.cos(), ang.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x: [N, heads, D]; rotate the first 2*cos.shape[1] dims (half-split), pass the rest through."""
    r = cos.shape[1]
    a, b, rest = x[..., :r].float(), x[..., r:2 * r].float(), x[..., 2 * r:]
    c, s = cos[:, None], sin[:, None]
    return torch.cat([(a * c - b * s).to(x.dtype), (b * c + a * s).to(x.dtype), rest], dim=-1)


class VAEAttention(nn.Module):
    def __init__(self, c: VideoVAEConfig):
        super().__init__()
        self.heads, self.head_dim = c.heads, c.head_dim
        self.to_qkv = nn.Linear(c.dim, 3 * c.heads * c.head_dim)     # per-head interleaved [h0: q,k,v | h1: ...]
        self.to_out = nn.Linear(c.heads * c.head_dim, c.dim)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        N = x.shape[0]
        q, k, v = self.to_qkv(x).view(N, self.heads, 3, self.head_dim).unbind(2)     # [N, heads, hd] each
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        o = F.scaled_dot_product_attention(*(t.transpose(0, 1)[None] for t in (q, k, v)))
        return self.to_out(o[0].transpose(0, 1).reshape(N, -1))


class VAEBlock(nn.Module):
    def __init__(self, c: VideoVAEConfig):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(c.dim, eps=c.eps), nn.LayerNorm(c.dim, eps=c.eps)
        self.attn = VAEAttention(c)
        self.ff = nn.ModuleDict({"w1": nn.Linear(c.dim, 2 * c.ffn_mult * c.dim),          # [gate; up]
                                 "w2": nn.Linear(c.ffn_mult * c.dim, c.dim)})

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x), cos, sin)
        gate, up = self.ff["w1"](self.norm2(x)).chunk(2, dim=-1)
        return x + self.ff["w2"](F.silu(gate) * up)


class VideoVAEDecoder(nn.Module):
    def __init__(self, c: VideoVAEConfig):
        super().__init__()
        self.c = c
        self.proj_in = nn.Linear(c.latent_ch, c.dim)
        self.registers = nn.Parameter(torch.zeros(c.registers, c.dim))
        self.blocks = nn.ModuleList(VAEBlock(c) for _ in range(c.layers))
        self.norm_out = nn.LayerNorm(c.dim, eps=c.eps)
        self.proj_out = nn.Linear(c.dim, c.patch_t * c.patch_hw * c.patch_hw * 3)
        self.register_buffer("latents_mean", torch.zeros(c.latent_ch))
        self.register_buffer("latents_std", torch.ones(c.latent_ch))

    def set_stats(self, mean=None, std=None) -> None:
        """Per-channel latent statistics (video_vae/config.json latents_mean / latents_std); default 0 / 1."""
        self.latents_mean.copy_(torch.as_tensor(mean if mean is not None else [0.0] * self.c.latent_ch))
        self.latents_std.copy_(torch.as_tensor(std if std is not None else [1.0] * self.c.latent_ch))

    def decode_tokens(self, z: torch.Tensor, first: int) -> torch.Tensor:
        """z: [24, n, Hl, Wl] denormalized latents of tokens first..first+n-1 -> [n, 4, Hl*16, Wl*16, 3]."""
        c = self.c
        C, n, Hl, Wl = z.shape
        x = self.proj_in(z.permute(1, 2, 3, 0).reshape(n * Hl * Wl, C).to(self.proj_in.weight.dtype))
        k = torch.arange(first, first + n, device=z.device)
        t = (k // c.chunk_tokens) * c.clip_length + (k % c.chunk_tokens) * c.patch_t             # clip*17 + token*4
        tt, hh, ww = torch.meshgrid(t, torch.arange(Hl, device=z.device), torch.arange(Wl, device=z.device),
                                    indexing="ij")
        pos = torch.cat([torch.zeros(c.registers, 3, device=z.device),
                         torch.stack([tt, hh, ww], dim=-1).reshape(-1, 3).float()])              # registers at 0
        cos, sin = rope_cos_sin(pos, int(c.head_dim * c.rope_ratio), c.rope_theta)
        x = torch.cat([self.registers.to(x.dtype), x])
        for blk in self.blocks:
            x = blk(x, cos, sin)
        y = self.proj_out(self.norm_out(x[c.registers:]))                                   # [n*Hl*Wl, 4*16*16*3]
        p = c.patch_hw
        y = y.view(n, Hl, Wl, c.patch_t, p, p, 3).permute(0, 3, 1, 4, 2, 5, 6)
        return y.reshape(n, c.patch_t, Hl * p, Wl * p, 3).float()

    @torch.no_grad()
    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """z: [24, T, Hl, Wl] normalized latents -> uint8 frames [17n+5, H, W, 3] on z's device."""
        c = self.c
        T = z.shape[1]
        z = z.float() * self.latents_std[:, None, None, None] + self.latents_mean[:, None, None, None]
        n_frames = token_frames(T - 1, c.chunk_tokens, c.clip_length)[1]
        out = torch.zeros(n_frames, z.shape[2] * c.patch_hw, z.shape[3] * c.patch_hw, 3, device=z.device)
        for s in range(0, T, c.chunk_tokens):                 # one window per 17-frame clip (5 tokens)
            ctx, e = max(0, s - c.token_overlap), min(T, s + c.chunk_tokens)
            frames = self.decode_tokens(z[:, ctx:e], ctx)                                   # [n, 4, H, W, 3]
            spans = [token_frames(k, c.chunk_tokens, c.clip_length) for k in range(ctx, e)]
            new = torch.cat([frames[i, c.patch_t - (b - a):] for i, (a, b) in enumerate(spans)])   # pre-padding
            a0, a_s = spans[0][0], spans[s - ctx][0]
            out[a_s:spans[-1][1]] = new[a_s - a0:]
            m = min(c.frame_overlap, a_s - a0)           # cross-fade the context frames with the previous window
            if m:
                w = torch.arange(1, m + 1, device=z.device, dtype=torch.float32)[:, None, None, None] / (m + 1)
                out[a_s - m:a_s] = (1 - w) * out[a_s - m:a_s] + w * new[a_s - a0 - m:a_s - a0]
        return to_uint8(out)


def to_uint8(frames: torch.Tensor) -> torch.Tensor:
    """[-1, 1] float -> uint8 [0, 255], on the frames' device (so only bytes cross to the host)."""
    return ((frames.clamp(-1, 1) + 1) * 127.5).round().to(torch.uint8)
