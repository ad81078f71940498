"""Model configs: ``full`` (the real MiniMax-H3 sizes, H3_SPEC.md sections 1, 2, 3, and the LTX-2 video VAE of
section 6) and ``tiny`` (same structure, small widths, for CPU tests). Frozen dataclasses, gpt-fast style: one preset
table and ``get_config(name)``. The VAE configs are diffusers constructor arguments (``.kwargs()``)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field


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
class H3VideoVAEConfig:
    """diffusers ``AutoencoderKLMiniMaxH3`` constructor arguments (field names are its own): 24 latent channels,
    16x spatial (prod of the spatial factors) / 4x temporal, ViT3D decoder 36 layers of 32 x 64 heads, 17-frame
    clips with 3 dropped tokens (17n+5 frames <-> 5n+2 latents). ``full`` equals diffusers' class defaults and its
    conversion script's ``MINIMAX_H3_VIDEO_VAE_CONFIG``; the encoder fields only shape the (dropped) encoder and the
    compression ratios."""

    latent_channels: int = 24
    block_out_channels: tuple[int, ...] = (128, 256, 256, 512, 512, 1024)
    layers_per_block: int = 2
    spatial_downsample_factors: tuple[int, ...] = (2, 2, 2, 2, 1, 1)
    temporal_downsample_factors: tuple[int, ...] = (1, 2, 2, 1, 1, 1)
    norm_num_groups: int = 32
    decoder_num_layers: int = 36
    decoder_num_attention_heads: int = 32
    decoder_attention_head_dim: int = 64
    decoder_num_register_tokens: int = 4
    decoder_ffn_mult: int = 4
    decoder_rope_theta: float = 100.0
    decoder_rope_dim_ratio: float = 0.75
    clip_length: int = 17
    token_drop: int = 3

    def kwargs(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class H3AudioVAEConfig:
    """diffusers ``AutoencoderKLMiniMaxH3Audio`` arguments: mono 32 kHz (stereo is a batch of 2), 32 latent
    channels at 40/s (hop 800), BigVGAN decoder dim 1024, rates (5,5,2,2,2,2,2), kernels (9,9,4,4,4,4,4),
    resblocks (3,7,11) x (1,3,5). ``full`` equals the class defaults."""

    encoder_dim: int = 64
    encoder_rates: tuple[int, ...] = (2, 4, 4, 5, 5)
    latent_dim: int = 2048
    latent_channels: int = 32
    num_attention_heads: int = 8
    decoder_dim: int = 1024
    decoder_rates: tuple[int, ...] = (5, 5, 2, 2, 2, 2, 2)
    decoder_kernel_sizes: tuple[int, ...] = (9, 9, 4, 4, 4, 4, 4)
    resblock_kernel_sizes: tuple[int, ...] = (3, 7, 11)
    resblock_dilation_sizes: tuple[tuple[int, ...], ...] = ((1, 3, 5), (1, 3, 5), (1, 3, 5))
    sampling_rate: int = 32000

    def kwargs(self) -> dict:
        return asdict(self)

    @property
    def sample_rate(self) -> int:
        return self.sampling_rate

    @property
    def hop(self) -> int:
        return math.prod(self.decoder_rates)


@dataclass(frozen=True)
class LTXVideoVAEConfig:
    """diffusers ``AutoencoderKLLTX2Video`` arguments at LTX-2.0's release config (diffusers'
    ``scripts/convert_ltx2_to_diffusers.py``, version 2.0): 128 latent channels, 32x spatial, 8x temporal (8k+1
    frames), non-causal decoder, no timestep conditioning. Two class defaults are wrong for the release and are set
    here: ``decoder_causal`` (class True) and the compression ratios (class 64 / 16, derived from the encoder's four
    scaling stages; the decoder upsamples 4 x 2^3 = 32 and 2^3 = 8)."""

    latent_channels: int = 128
    block_out_channels: tuple[int, ...] = (256, 512, 1024, 2048)
    layers_per_block: tuple[int, ...] = (4, 6, 6, 2, 2)
    decoder_block_out_channels: tuple[int, ...] = (256, 512, 1024)
    decoder_layers_per_block: tuple[int, ...] = (5, 5, 5, 5)
    spatio_temporal_scaling: tuple[bool, ...] = (True, True, True, True)
    decoder_spatio_temporal_scaling: tuple[bool, ...] = (True, True, True)
    decoder_inject_noise: tuple[bool, ...] = (False, False, False, False)
    downsample_type: tuple[str, ...] = ("spatial", "temporal", "spatiotemporal", "spatiotemporal")
    upsample_type: tuple[str, ...] = ("spatiotemporal", "spatiotemporal", "spatiotemporal")
    upsample_residual: tuple[bool, ...] = (True, True, True)
    upsample_factor: tuple[int, ...] = (2, 2, 2)
    timestep_conditioning: bool = False
    patch_size: int = 4
    patch_size_t: int = 1
    encoder_causal: bool = True
    decoder_causal: bool = False
    spatial_compression_ratio: int = 32
    temporal_compression_ratio: int = 8

    def kwargs(self) -> dict:
        return asdict(self)


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
    video_vae: H3VideoVAEConfig = field(default_factory=H3VideoVAEConfig)
    audio_vae: H3AudioVAEConfig = field(default_factory=H3AudioVAEConfig)
    ltx_vae: LTXVideoVAEConfig = field(default_factory=LTXVideoVAEConfig)
    text: TextEncoderConfig = field(default_factory=TextEncoderConfig)


CONFIGS: dict[str, RuntimeConfig] = {
    "full": RuntimeConfig("full"),
    "tiny": RuntimeConfig(
        "tiny",
        dit=DiTConfig(hidden=256, heads=2, ffn=512, blocks=2, text_dim=64, time_dim=128),
        # same structure and the checkpoint-tied sizes (latent channels, compression ratios, hop, clip geometry)
        video_vae=H3VideoVAEConfig(block_out_channels=(8,) * 6, layers_per_block=1, norm_num_groups=4,
                                   decoder_num_layers=2, decoder_num_attention_heads=2, decoder_attention_head_dim=24),
        audio_vae=H3AudioVAEConfig(encoder_dim=4, latent_dim=64, decoder_dim=128),
        ltx_vae=LTXVideoVAEConfig(block_out_channels=(8, 16, 32, 64), layers_per_block=(1, 1, 1, 1, 1),
                                  decoder_block_out_channels=(16, 32, 64), decoder_layers_per_block=(1, 1, 1, 1)),
        text=TextEncoderConfig(vocab=1024, hidden=64, layers_total=4, layers_used=3, heads=4, kv_heads=2,
                               head_dim=16, ffn=128),
    ),
}


def get_config(name: str) -> RuntimeConfig:
    if name not in CONFIGS:
        raise KeyError(f"unknown config {name!r}; known: {', '.join(CONFIGS)}")
    return CONFIGS[name]
