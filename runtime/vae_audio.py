"""H3 audio VAE decoder, BigVGAN-style (H3_SPEC.md section 3): 32 latent channels at 40/s -> mono 32 kHz;
stereo is a batch of 2. dim 1024, upsample rates (5,5,2,2,2,2,2) with kernels (9,9,4,4,4,4,4) (hop 800),
multi-receptive-field resblocks (3, 7, 11) x dilations (1, 3, 5) with Snake activations, output clamped to [-1, 1].

Simplifications (docs/runtime.md): weight norm is assumed folded into plain conv weights at load time, and the
Snake activations are applied without BigVGAN's anti-aliasing up/down filters. The encoder side (DAC + pre_block)
is not needed for text-to-video and is not built.
"""

from __future__ import annotations

import torch
from torch import nn

from runtime.config import AudioVAEConfig


class Snake(nn.Module):
    """x + sin^2(alpha x) / alpha, per-channel alpha."""

    def __init__(self, ch: int):
        super().__init__()
        self.alpha = nn.Parameter(torch.ones(ch))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.alpha[None, :, None]
        return x + torch.sin(a * x).pow(2) / (a + 1e-9)


class AMPBlock(nn.Module):
    """For each dilation d: x += conv2(snake(conv1_d(snake(x))))."""

    def __init__(self, ch: int, k: int, dilations: tuple[int, ...]):
        super().__init__()
        self.convs1 = nn.ModuleList(nn.Conv1d(ch, ch, k, dilation=d, padding=d * (k - 1) // 2) for d in dilations)
        self.convs2 = nn.ModuleList(nn.Conv1d(ch, ch, k, padding=(k - 1) // 2) for _ in dilations)
        self.acts = nn.ModuleList(Snake(ch) for _ in range(2 * len(dilations)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, (c1, c2) in enumerate(zip(self.convs1, self.convs2)):
            x = x + c2(self.acts[2 * i + 1](c1(self.acts[2 * i](x))))
        return x


class AudioVAEDecoder(nn.Module):
    def __init__(self, c: AudioVAEConfig):
        super().__init__()
        self.c = c
        chans = [max(c.dim // 2 ** i, c.min_channels) for i in range(len(c.rates) + 1)]
        self.conv_pre = nn.Conv1d(c.latent_ch, chans[0], 7, padding=3)
        self.ups = nn.ModuleList(nn.ConvTranspose1d(chans[i], chans[i + 1], k, stride=r, padding=(k - r) // 2)
                                 for i, (r, k) in enumerate(zip(c.rates, c.kernels)))
        self.resblocks = nn.ModuleList(nn.ModuleList(AMPBlock(chans[i + 1], k, c.dilations)
                                                     for k in c.resblock_kernels) for i in range(len(c.rates)))
        self.act_post = Snake(chans[-1])
        self.conv_post = nn.Conv1d(chans[-1], 1, 7, padding=3)
        self.register_buffer("latents_mean", torch.zeros(c.latent_ch))
        self.register_buffer("latents_std", torch.ones(c.latent_ch))

    def set_stats(self, mean=None, std=None) -> None:
        """Per-channel latent statistics over the 32 channels; default 0 / 1."""
        self.latents_mean.copy_(torch.as_tensor(mean if mean is not None else [0.0] * self.c.latent_ch))
        self.latents_std.copy_(torch.as_tensor(std if std is not None else [1.0] * self.c.latent_ch))

    @torch.no_grad()
    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """z: [2, 32, T_a] normalized latents (stereo as a batch) -> waveform [2, T_a * 800] fp32 in [-1, 1]."""
        x = z.float() * self.latents_std[None, :, None] + self.latents_mean[None, :, None]
        x = self.conv_pre(x.to(self.conv_pre.weight.dtype))                               # [2, dim, T_a]
        for up, mrf in zip(self.ups, self.resblocks):
            x = up(x)                                                                      # [2, ch, T * r]
            x = sum(blk(x) for blk in mrf) / len(mrf)
        return self.conv_post(self.act_post(x))[:, 0].float().clamp(-1, 1)                 # [2, samples]
