"""Model configs: ``full`` (the real MiniMax-H3 sizes, H3_SPEC.md sections 1, 3, 2) and ``tiny`` (same structure,
small widths, for CPU tests). Frozen dataclasses, gpt-fast style: one preset table and ``get_config(name)``."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class DiTConfig:
    hidden: int = 5376                 # residual width H
    heads: int = 56
    head_dim: int = 128                # the fused qk_norm_rope op is fixed to 128 (rotary 96)
    ffn: int = 14336                   # SwiGLU inner width (fc1: H -> 2*ffn, [gate; up])
    blocks: int = 50
    refiner_blocks: int = 2
    text_dim: int = 5120               # conditioning width (Qwen3-VL hidden)
    time_freq: int = 256               # sinusoid width
    time_dim: int = 2688               # time embedding width (H / 2)
    video_in: int = 96                 # 24 latent channels x (1, 2, 2) patch
    audio_in: int = 32
    eps: float = 1e-5
    rope_dims: int = 96                # rotated head dims (t16 | h16 | w16, duplicated)
    rope_theta: float = 10000.0

    @property
    def inner(self) -> int:            # attention width (7168 in H3, != hidden)
        return self.heads * self.head_dim

    @property
    def adaln_width(self) -> int:      # 3 modalities x 6 parameters x H
        return 18 * self.hidden


@dataclass(frozen=True)
class VideoVAEConfig:
    """H3 video VAE decoder (ViT3D). Latent 24 ch, 16x spatial, 4x temporal; 17-frame clips -> 5 tokens."""

    latent_ch: int = 24
    dim: int = 2048                    # 32 heads x 64
    layers: int = 36
    heads: int = 32
    head_dim: int = 64
    registers: int = 4
    ffn_mult: int = 4                  # gated FFN, ff.w1 = [gate; up]
    rope_theta: float = 100.0
    rope_ratio: float = 0.75           # 48 of 64 head dims rotate (16 per axis)
    patch_hw: int = 16
    patch_t: int = 4
    clip_length: int = 17
    chunk_tokens: int = 5              # tokens_chunk_size
    token_overlap: int = 2
    frame_pre_padding: int = 3
    frame_overlap: int = 5
    eps: float = 1e-6


@dataclass(frozen=True)
class AudioVAEConfig:
    """H3 audio VAE decoder (BigVGAN-style), mono 32 kHz; stereo is a batch of 2. hop = prod(rates) = 800."""

    latent_ch: int = 32
    dim: int = 1024
    rates: tuple[int, ...] = (5, 5, 2, 2, 2, 2, 2)
    kernels: tuple[int, ...] = (9, 9, 4, 4, 4, 4, 4)
    resblock_kernels: tuple[int, ...] = (3, 7, 11)
    dilations: tuple[int, ...] = (1, 3, 5)
    min_channels: int = 8
    sample_rate: int = 32000

    @property
    def hop(self) -> int:
        h = 1
        for r in self.rates:
            h *= r
        return h


@dataclass(frozen=True)
class TextEncoderConfig:
    """Qwen3-VL text model, truncated: the conditioning is hidden_states[layers_used] before the final norm."""

    vocab: int = 151936
    hidden: int = 5120
    layers_total: int = 64
    layers_used: int = 50
    heads: int = 64
    kv_heads: int = 8
    head_dim: int = 128
    ffn: int = 25600
    eps: float = 1e-6
    rope_theta: float = 5_000_000.0


@dataclass(frozen=True)
class RuntimeConfig:
    name: str
    dit: DiTConfig = field(default_factory=DiTConfig)
    video_vae: VideoVAEConfig = field(default_factory=VideoVAEConfig)
    audio_vae: AudioVAEConfig = field(default_factory=AudioVAEConfig)
    text: TextEncoderConfig = field(default_factory=TextEncoderConfig)


CONFIGS: dict[str, RuntimeConfig] = {
    "full": RuntimeConfig("full"),
    "tiny": RuntimeConfig(
        "tiny",
        dit=DiTConfig(hidden=256, heads=2, ffn=512, blocks=2, text_dim=64, time_dim=128),
        video_vae=VideoVAEConfig(dim=64, layers=2, heads=2, head_dim=32),
        audio_vae=AudioVAEConfig(dim=32, min_channels=4),
        text=TextEncoderConfig(vocab=1024, hidden=64, layers_total=4, layers_used=3, heads=4, kv_heads=2,
                               head_dim=16, ffn=128),
    ),
}


def get_config(name: str) -> RuntimeConfig:
    if name not in CONFIGS:
        raise KeyError(f"unknown config {name!r}; known: {', '.join(CONFIGS)}")
    return CONFIGS[name]
