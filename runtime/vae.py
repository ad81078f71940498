"""The three video/audio decoders, as diffusers 0.42.1 implements them (H3_SPEC.md sections 3 and 6):

- ``h3_video``: ``AutoencoderKLMiniMaxH3``, latents [24, T, Hl, Wl] -> uint8 frames [F, 16 Hl, 16 Wl, 3];
- ``h3_audio``: ``AutoencoderKLMiniMaxH3Audio``, latents [2, 32, T_a] (stereo as a batch) -> waveform [2, 800 T_a];
- ``ltx_video``: ``AutoencoderKLLTX2Video``, latents [1, 128, T, Hl, Wl] -> uint8 frames [8T - 7, 32 Hl, 32 Wl, 3].

The architectures, the decode paths (H3's 17-frame clip chunking with token overlap and cross-fade, its spatial
tiling, the audio BigVGAN, the LTX conv decoder) are diffusers' own code; this module only builds them and wraps
their ``decode`` in the runtime's tensor contracts (module functions ``decode_*``, or ``VAEDecoder.decode(z)``, the
wrapper the pipeline holds). Ours:

- **Decoder only.** diffusers builds encoder and decoder together; we build on the meta device, drop the encoder-side
  modules (``KINDS[kind].encoder_parts``) and only then materialize, so the encoder never costs memory. Decoding needs none of
  them (diffusers' ``decode`` reads only ``post_quant_conv``/``dec_in_proj`` and ``decoder``).
- **Random weights** (no checkpoint): every parameter from its own generator seeded by (seed, name)
  (``runtime.model.init_random_``), with fix-ups so the random decoders are not degenerate: weight-norm gains equal
  the norm of their direction (the effective kernel is N(0, 1/fan_in)), SnakeBeta's log-space alpha/beta are 0
  (alpha = beta = 1), the ViT's zero-initialized layer scales are 0.1 (at 0 every block is the identity), output
  layers x0.5 (audio x0.05: its 21 AMP residual blocks grow the signal ~10x). Buffers (Kaiser filters, RoPE
  frequencies, LTX latent statistics) keep their constructor values.
- **H3 video, T <= 2 latents**: diffusers' ``_decode`` decodes nothing below one chunk; we decode those tokens as one
  clip (see ``decode_h3_video``).
- **Checkpoints**: a diffusers ``from_pretrained`` folder (``config.json`` + ``diffusion_pytorch_model.safetensors``
  or a sharded ``*.safetensors.index.json``); every problem is one ``CheckpointError`` line naming file and key.
  Encoder tensors in the file are skipped.
- **dtype**: bf16 on CUDA except what diffusers pins to fp32 (``_keep_in_fp32_modules``: the H3 video decoder's
  norms and layer scales; the whole H3 audio VAE, which diffusers keeps fp32 because BigVGAN degrades in bf16);
  fp32 on the CPU. Latent (de)normalization is fp32.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import math
import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from diffusers import AutoencoderKLLTX2Video, AutoencoderKLMiniMaxH3, AutoencoderKLMiniMaxH3Audio
from torch import nn

from runtime import diffusers_folder
from runtime.checkpoint import CheckpointError
from runtime.model import init_random_
from runtime.release import partition_dir

# The H3 video VAE decodes to ImageNet-normalized RGB over [0, 1] (diffusers' AutoencoderKLMiniMaxH3 docstring)
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
WEIGHTS_NAME, INDEX_NAME = diffusers_folder.WEIGHTS_NAME, diffusers_folder.INDEX_NAME
weight_files = diffusers_folder.weight_files
LAYER_SCALE = 0.1           # random-weight value of the ViT's zero-initialized scale1/scale2


@dataclass(frozen=True)
class VAEKind:
    cls: type
    encoder_parts: tuple[str, ...]       # top-level modules that decode never reads; dropped before materializing
    out_layers: tuple[str, ...]          # parameter-name prefixes of the output layer (random init x out_scale)
    out_scale: float = 0.5


KINDS: dict[str, VAEKind] = {
    "h3_video": VAEKind(AutoencoderKLMiniMaxH3, ("encoder", "quant_conv"), ("decoder.proj_out.",)),
    "h3_audio": VAEKind(AutoencoderKLMiniMaxH3Audio, ("encoder", "pre_block", "mean_proj", "logs_proj"),
                        ("decoder.conv_post.",), out_scale=0.05),   # BigVGAN's AMP residuals grow ~x10
    "ltx_video": VAEKind(AutoencoderKLLTX2Video, ("encoder",), ("decoder.conv_out.",)),
}


# ------------------------------------------------------------------------------------------------ building
@contextlib.contextmanager
def _params_on_meta() -> Iterator[None]:
    """Parameters are created on the meta device, buffers for real (on the CPU, or the default device): the
    buffers are small and computed in the constructors (Kaiser filters, RoPE frequencies), so they are kept rather
    than re-derived; parameters cost nothing until ``to_empty``."""
    register = nn.Module.register_parameter

    def on_meta(module: nn.Module, name: str, param: nn.Parameter | None) -> None:
        if param is not None and param.device.type != "meta":
            param = nn.Parameter(param.to("meta"), requires_grad=param.requires_grad)
        register(module, name, param)

    nn.Module.register_parameter = on_meta
    try:
        yield
    finally:
        nn.Module.register_parameter = register


def read_config(folder: str | os.PathLike, kind: str) -> dict[str, Any]:
    """``folder/config.json`` as a dict, checked to be this kind's diffusers class."""
    return diffusers_folder.read_config(folder, KINDS[kind].cls.__name__, "VAE")


def _ltx_ratios(cfg: dict[str, Any]) -> tuple[int, int]:
    """(spatial, temporal) upsampling of an LTX-2 decoder config (missing keys: the class defaults)."""
    sig = inspect.signature(AutoencoderKLLTX2Video.__init__).parameters
    c = {k: v.default for k, v in sig.items() if v.default is not inspect.Parameter.empty} | cfg
    n = len(c["decoder_layers_per_block"]) - 1
    scaling = c["decoder_spatio_temporal_scaling"]
    scaling = (scaling,) * n if isinstance(scaling, bool) else tuple(scaling)
    s, t = c["patch_size"], c["patch_size_t"]
    for on, kind in zip(scaling, c["upsample_type"]):         # each upsampler has stride 2 on its axes
        if on:                                                  # (upsample_factor only divides channels)
            s *= 2 if kind in ("spatial", "spatiotemporal") else 1
            t *= 2 if kind in ("temporal", "spatiotemporal") else 1
    return s, t


def _check_ltx_config(cfg: dict[str, Any], where: str) -> dict[str, Any]:
    """The class derives its compression ratios from the *encoder* (4 stages: 64 / 16) unless the config sets them;
    the LTX-2 decoder upsamples 32 / 8. Missing ratios are filled from the decoder, contradicting ones refused."""
    s, t = _ltx_ratios(cfg)
    cfg = dict(cfg)
    for key, real in (("spatial_compression_ratio", s), ("temporal_compression_ratio", t)):
        if cfg.get(key) is None:
            cfg[key] = real
        elif cfg[key] != real:
            raise CheckpointError(f"{where}: {key} = {cfg[key]} but the decoder upsamples {real}x")
    return cfg


def _dtypes(vae: nn.Module, device: torch.device) -> None:
    """Cast parameters (still on meta) to the decode dtype: bf16 on CUDA except diffusers' fp32-pinned modules."""
    if device.type != "cuda" or isinstance(vae, AutoencoderKLMiniMaxH3Audio):
        return                                   # CPU, and the audio VAE everywhere: fp32 (see module docstring)
    keep = tuple(vae._keep_in_fp32_modules or ())
    for name, p in vae.named_parameters():
        if not any(k in name.split(".") for k in keep):      # diffusers' matching rule (model_loading_utils)
            p.data = p.data.to(torch.bfloat16)


def build_vae(kind: str, cfg: Any = None, device: str | torch.device = "cpu", seed: int = 0,
              folder: str | os.PathLike | None = None) -> nn.Module:
    """The decoder-only diffusers VAE of ``kind`` ("h3_video" | "h3_audio" | "ltx_video") on ``device``:
    from ``folder`` (a diffusers from_pretrained folder; its config.json wins over ``cfg``) or with random
    weights from ``seed``. On the meta device nothing is materialized (parameter counts, shape checks)."""
    k, device = KINDS[kind], torch.device(device)
    if folder is not None:
        kwargs = read_config(folder, kind)
        where = str(Path(folder) / "config.json")
    else:
        kwargs, where = cfg.kwargs(), f"{kind} config"
    if kind == "ltx_video":
        kwargs = _check_ltx_config(kwargs, where)
    try:
        with _params_on_meta(), warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)     # torch's weight_norm deprecation, from diffusers
            vae = k.cls.from_config(kwargs)
    except (TypeError, ValueError, KeyError, RuntimeError) as e:
        raise CheckpointError(f"{where}: cannot build {k.cls.__name__} ({type(e).__name__}: {e})") from None
    for part in k.encoder_parts:
        delattr(vae, part)
    vae.eval().requires_grad_(False)
    if device.type == "meta":
        return vae.to("meta")
    _dtypes(vae, device)
    buffers = {n: b.detach().to("cpu", copy=True) for n, b in vae.named_buffers()}
    vae.to_empty(device=device)
    with torch.no_grad():
        for n, b in vae.named_buffers():
            b.copy_(buffers[n])
        if folder is not None:
            load_vae_weights(vae, folder, kind)
        else:
            init_vae_random_(vae, seed, k.out_layers, k.out_scale)
    return vae


@torch.no_grad()
def init_vae_random_(vae: nn.Module, seed: int, out_layers: tuple[str, ...] = (), out_scale: float = 1.0) -> None:
    """Deterministic random weights (runtime.model.init_random_) plus the fix-ups in the module docstring."""
    init_random_(vae, seed, scale=lambda n: out_scale if n.startswith(out_layers) else 1.0)
    params = dict(vae.named_parameters())
    for name, p in params.items():
        owner, _, leaf = name.rpartition(".")
        if leaf == "weight_g":                        # weight norm: effective weight = g * v / |v| = v
            v = params[f"{owner}.weight_v"]
            p.copy_(torch.linalg.vector_norm(v.float(), dim=tuple(range(1, v.dim())), keepdim=True))   # dim=0
        elif leaf in ("alpha", "beta") and type(vae.get_submodule(owner)).__name__.endswith("SnakeBeta"):
            p.zero_()                                 # log-space parameters: exp(0) = 1
        elif leaf in ("scale1", "scale2"):
            p.fill_(LAYER_SCALE)
        elif leaf == "timestep_scale_multiplier":
            p.fill_(1000.0)                           # LTX constructor value (timestep-conditioned configs only)


# ------------------------------------------------------------------------------------------------ checkpoints



def check_vae_weights(vae: nn.Module, folder: str | os.PathLike, kind: str) -> dict[str, tuple[Path, tuple]]:
    """Header-only check of ``folder``'s tensors against the decoder (works on the meta device): key -> (file,
    shape) of the tensors to load. Encoder tensors are skipped; anything else unexpected, missing or mis-shaped is
    a CheckpointError naming the key and the file."""
    skip = tuple(f"{part}." for part in KINDS[kind].encoder_parts)
    return diffusers_folder.check_tensors(vae, folder, skip, f"{type(vae).__name__}'s decoder")


@torch.no_grad()
def load_vae_weights(vae: nn.Module, folder: str | os.PathLike, kind: str) -> dict[str, Any]:
    """Copy ``folder``'s tensors into the (materialized) decoder, casting to each parameter's dtype and device."""
    return diffusers_folder.load_tensors(vae, folder, check_vae_weights(vae, folder, kind))


# ------------------------------------------------------------------------------------------------ decoding
def _stats(vae: nn.Module, n: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-channel (mean, std) from the VAE config, fp32 [n]; a config without them means 0 / 1."""
    m, s = vae.config.get("latents_mean"), vae.config.get("latents_std")
    mean = torch.tensor(m if m is not None else [0.0] * n, dtype=torch.float32, device=device)
    std = torch.tensor(s if s is not None else [1.0] * n, dtype=torch.float32, device=device)
    return mean, std


def set_latent_stats(vae: nn.Module, mean, std) -> None:
    """Store per-channel latent statistics in the VAE config, where diffusers' decode steps read them."""
    vae.register_to_config(latents_mean=[float(x) for x in mean], latents_std=[float(x) for x in std])


def _unwrap(vae: nn.Module) -> nn.Module:
    return vae.vae if isinstance(vae, VAEDecoder) else vae


def _device(vae: nn.Module) -> torch.device:
    return next(vae.parameters()).device


def h3_video_frames(t: int, clip_length: int = 17, token_drop: int = 3, ratio: int = 4) -> int:
    """Frames that ``decode_h3_video`` returns for ``t`` latents, by diffusers' ``_decode`` arithmetic: 17n+5 for
    5n+2 (2 -> 5, 7 -> 22, 37 -> 124, 72 -> 243). Every chunk decodes 5 + 2 tokens; other lengths are padded with
    repeats of the last latent and the extra frames cut (a clip's first token is 1 frame, the others 4)."""
    chunk, pre_pad = math.ceil(clip_length / ratio), (-clip_length) % ratio        # 5 tokens, 3 padding frames
    if t + token_drop <= chunk:                      # no whole chunk: one clip of t tokens (decode_h3_video)
        return max(ratio * t - pre_pad, 0)
    pad = (-(t + token_drop)) % chunk
    n_chunks = (t + token_drop + pad) // chunk - 1
    overlap = ((-token_drop) % chunk) * ratio - pre_pad                             # 5 frames
    tail = clip_length % ratio
    cut = sum(tail if tail and (t + k) % chunk == 0 else ratio for k in range(pad))
    return n_chunks * clip_length + overlap - cut


@torch.no_grad()
def decode_h3_video(vae: AutoencoderKLMiniMaxH3, z: torch.Tensor) -> torch.Tensor:
    """z: [24, T, Hl, Wl] normalized latents (the DiT's (z - mean) / std) -> uint8 frames [F, 16 Hl, 16 Wl, 3] on
    the VAE's device, F = ``h3_video_frames(T)``. diffusers' decode with its default spatial tiling (256 px tiles,
    >= 64 px overlap: the released outputs are the tiled ones), then ``x * imagenet_std + imagenet_mean``, clamp to
    [0, 1], x255, round. T <= 2 (fewer tokens than one chunk, where diffusers' ``_decode`` returns nothing) decodes
    those tokens as one clip and drops the 3 pre-padding frames, as a chunk's first part would."""
    vae = _unwrap(vae)
    dev = _device(vae)
    mean, std = _stats(vae, z.shape[0], dev)
    x = (z.to(dev, torch.float32) * std[:, None, None, None] + mean[:, None, None, None])[None]   # [1, 24, T, h, w]
    if z.shape[1] + vae.config.token_drop <= vae.tokens_chunk_size:
        x = x.to(next(vae.post_quant_conv.parameters()).dtype)
        y = vae._decode_clip(x)[:, :, vae.frame_pre_padding:]
    else:
        y = vae.decode(x, return_dict=False)[0]                                         # [1, 3, F, H, W]
    im_mean = torch.tensor(IMAGENET_MEAN, device=dev)[:, None, None, None]
    im_std = torch.tensor(IMAGENET_STD, device=dev)[:, None, None, None]
    rgb = (y[0].float() * im_std + im_mean).clamp(0, 1)                                 # [3, F, H, W]
    return (rgb * 255).round().to(torch.uint8).permute(1, 2, 3, 0).contiguous()


@torch.no_grad()
def decode_h3_audio(vae: AutoencoderKLMiniMaxH3Audio, z: torch.Tensor) -> torch.Tensor:
    """z: [2, 32, T_a] normalized latents (stereo as a batch of 2) -> waveform [2, 800 T_a] fp32 in [-1, 1] at
    ``vae.config.sampling_rate`` (32 kHz), on the VAE's device. ``z * std + mean`` with the config's per-channel
    statistics (0 / 1 when absent), then diffusers' decode (BigVGAN, clamped)."""
    vae = _unwrap(vae)
    dev = _device(vae)
    mean, std = _stats(vae, z.shape[1], dev)
    x = z.to(dev, torch.float32) * std[None, :, None] + mean[None, :, None]
    return vae.decode(x, return_dict=False)[0][:, 0].float()                            # [2, samples]


def ltx_video_frames(t: int, ratio: int = 8) -> int:
    """Frames the LTX-2 decoder returns for ``t`` latents: 8(t - 1) + 1 (16 -> 121)."""
    return ratio * (t - 1) + 1


@torch.no_grad()
def decode_ltx_video(vae: AutoencoderKLLTX2Video, z: torch.Tensor, decode_timestep: float = 0.0,
                     decode_noise_scale: float | None = None, seed: int = 0) -> torch.Tensor:
    """z: [1, 128, T, Hl, Wl] normalized latents -> uint8 frames [8T - 7, 32 Hl, 32 Wl, 3] on the VAE's device, as
    diffusers' LTX2Pipeline decodes: ``z * latents_std / scaling_factor + latents_mean`` (the VAE's own buffers),
    ``vae.decode(z, timestep)``, then ``(x / 2 + 0.5).clamp(0, 1)``, x255, round. A timestep-conditioned VAE
    (``timestep_conditioning``; not LTX-2.0's release) first mixes in noise from ``seed``:
    ``(1 - s) z + s noise`` with ``s = decode_noise_scale`` (default ``decode_timestep``). No tiling (diffusers'
    default; ``vae.enable_tiling()`` exists if memory ever needs it)."""
    vae = _unwrap(vae)
    if z.dim() != 5 or z.shape[0] != 1:
        raise ValueError(f"LTX latents must be [1, C, T, Hl, Wl], got {list(z.shape)}")
    dev, dtype = _device(vae), next(vae.decoder.parameters()).dtype
    x = z.to(dev, torch.float32)
    timestep = None
    if vae.config.timestep_conditioning:
        s = decode_timestep if decode_noise_scale is None else decode_noise_scale
        noise = torch.randn(x.shape, generator=torch.Generator().manual_seed(seed)).to(dev)
        x = (1 - s) * x + s * noise
        timestep = torch.tensor([decode_timestep], device=dev, dtype=dtype)
    mean = vae.latents_mean.float().view(1, -1, 1, 1, 1)
    std = vae.latents_std.float().view(1, -1, 1, 1, 1)
    x = x * std / vae.config.scaling_factor + mean
    y = vae.decode(x.to(dtype), timestep, return_dict=False)[0]                        # [1, 3, F, H, W] in [-1, 1]
    rgb = (y[0].float() / 2 + 0.5).clamp(0, 1)
    return (rgb * 255).round().to(torch.uint8).permute(1, 2, 3, 0).contiguous()


decode_ltx = decode_ltx_video
DECODERS = {"h3_video": decode_h3_video, "h3_audio": decode_h3_audio, "ltx_video": decode_ltx_video}


class VAEDecoder(nn.Module):
    """A decoder-only diffusers VAE (``.vae``) with the runtime's contract: ``decode(z)`` takes the normalized
    latents and returns frames (uint8 [F, H, W, 3]) or the waveform (fp32 [2, samples]) on the device."""

    def __init__(self, kind: str, vae: nn.Module):
        super().__init__()
        self.kind, self.vae = kind, vae

    def decode(self, z: torch.Tensor, **kw: Any) -> torch.Tensor:
        return DECODERS[self.kind](self.vae, z, **kw)


def build_decoder(kind: str, cfg: Any = None, device: str | torch.device = "cpu", seed: int = 0,
                  folder: str | os.PathLike | None = None) -> VAEDecoder:
    """``build_vae`` wrapped in ``VAEDecoder``."""
    return VAEDecoder(kind, build_vae(kind, cfg, device, seed, folder))


def build_ltx_vae(config: Any = "full", device: str | torch.device = "cpu", seed: int = 0,
                  folder: str | os.PathLike | None = None) -> VAEDecoder:
    """The LTX-2 video VAE decoder; ``config``: a preset name ("full", "tiny"), a RuntimeConfig or an
    LTXVideoVAEConfig."""
    if isinstance(config, str):
        from runtime.config import get_config

        config = get_config(config)
    return build_decoder("ltx_video", getattr(config, "ltx_vae", config), device, seed, folder)


# ------------------------------------------------------------------------------------------------ release folders
def param_count(vae: nn.Module) -> int:
    return sum(p.numel() for p in vae.parameters())


# kind -> sub-folders of a model partition that may hold it in the diffusers layout (the diffusers conversion
# writes the video VAE to vae/; the original release's video_vae/ and audio_vae/ folders are not diffusers folders)
RELEASE_FOLDERS = {"h3_video": ("vae", "video_vae"), "h3_audio": ("audio_vae",), "ltx_video": ("vae",)}


def vae_folder(weights: str | os.PathLike | None, kind: str) -> Path | None:
    """The diffusers-layout folder of ``kind`` inside the partition of ``--weights`` (a config.json naming this
    kind's class), or None: the VAE then gets random weights."""
    if not weights:
        return None
    part = partition_dir(weights)
    for sub in RELEASE_FOLDERS[kind]:
        f = part / sub / "config.json"
        try:
            if json.loads(f.read_text()).get("_class_name") == KINDS[kind].cls.__name__:
                return f.parent
        except (OSError, ValueError, AttributeError):
            continue
    return None
