"""diffusers' VAE decoders through runtime/vae.py: tiny configs on the CPU (shapes, dtypes, ranges, determinism),
full configs on the meta device (parameter counts, output shapes, the LTX compression-ratio trap), the diffusers
from_pretrained folder round trip and its error cases."""

from __future__ import annotations

import json

import pytest
import torch
from diffusers import AutoencoderKLLTX2Video
from safetensors.torch import load_file, save_file

from runtime.checkpoint import CheckpointError
from runtime.config import get_config
from runtime.pipeline import build_vaes
from runtime.vae import (
    KINDS,
    VAEDecoder,
    _dtypes,
    build_ltx_vae,
    build_vae,
    decode_h3_audio,
    decode_h3_video,
    decode_ltx_video,
    h3_video_frames,
    ltx_video_frames,
    param_count,
    set_latent_stats,
    vae_folder,
)

# decoder-only parameter counts at the full configs (diffusers builds encoder + decoder: 2,603,868,984 /
# 151,321,489 / 1,222,479,601; the encoder-side modules are dropped before anything is materialized)
FULL_PARAMS = {"h3_video": 2_423_531_096, "h3_audio": 64_936_305, "ltx_video": 528_380_720}
CFG_FIELD = {"h3_video": "video_vae", "h3_audio": "audio_vae", "ltx_video": "ltx_vae"}
SEEDS = {"h3_video": 1, "h3_audio": 2, "ltx_video": 3}


def cfg_of(name: str, kind: str):
    return getattr(get_config(name), CFG_FIELD[kind])


@pytest.fixture(scope="module")
def tiny():
    return {k: build_vae(k, cfg_of("tiny", k), "cpu", seed=SEEDS[k]) for k in KINDS}


def latents(kind: str, t: int = 3, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    shape = {"h3_video": (24, t, 2, 3), "h3_audio": (2, 32, t), "ltx_video": (1, 128, t, 2, 2)}[kind]
    return torch.randn(shape, generator=g)


def decode(kind, vae, z):
    return {"h3_video": decode_h3_video, "h3_audio": decode_h3_audio, "ltx_video": decode_ltx_video}[kind](vae, z)


pytestmark = pytest.mark.filterwarnings("ignore:.*weight_norm.*:FutureWarning")   # diffusers uses it


# ------------------------------------------------------------------------------------------------ tiny, CPU
def test_frame_arithmetic():
    # 17n+5 frames for 5n+2 latents (spec: 124 -> 37); LTX 8k+1 (121 -> 16)
    assert [h3_video_frames(5 * n + 2) for n in (0, 1, 7, 14)] == [5, 22, 124, 243]
    assert [h3_video_frames(t) for t in (1, 3, 5, 6)] == [1, 9, 17, 18]        # tokens of 1 + 4 + 4 + ... frames
    assert ltx_video_frames(16) == 121 and ltx_video_frames(1) == 1


def test_h3_video_tiny(tiny):
    v = tiny["h3_video"]
    assert not hasattr(v, "encoder") and not hasattr(v, "quant_conv")            # decoder only
    for t in (1, 2, 3, 7, 8, 12):                   # T <= 2: our one-clip path; 12: two chunks with a cross-fade
        f = decode_h3_video(v, latents("h3_video", t))
        assert f.shape == (h3_video_frames(t), 32, 48, 3) and f.dtype == torch.uint8
        assert f.float().std() > 10 and 0 < f.float().mean() < 255                 # not degenerate, not saturated


def test_h3_video_latent_stats(tiny):
    """decode computes z * std + mean with the config's statistics (the DiT works on (z - mean) / std)."""
    v = build_vae("h3_video", cfg_of("tiny", "h3_video"), "cpu", seed=1)
    z = latents("h3_video", 7)
    mean, std = torch.linspace(-0.5, 0.5, 24), torch.linspace(0.5, 2.0, 24)
    plain = decode_h3_video(v, z * std[:, None, None, None] + mean[:, None, None, None])
    set_latent_stats(v, mean.tolist(), std.tolist())
    assert v.config.latents_mean == pytest.approx(mean.tolist())
    assert torch.equal(decode_h3_video(v, z), plain)


def test_h3_audio_tiny(tiny):
    a = tiny["h3_audio"]
    assert a.config.sampling_rate == get_config("tiny").audio_vae.sample_rate == 32000
    w = decode_h3_audio(a, latents("h3_audio", 8))
    assert w.shape == (2, 8 * 800) and w.dtype == torch.float32                   # 40 latents/s at 32 kHz
    assert w.abs().max() <= 1 and w.std() > 0.1 and (w.abs() < 1).float().mean() > 0.5
    assert not torch.equal(w[0], w[1])                                           # stereo = a batch of 2


def test_ltx_tiny(tiny):
    vae = tiny["ltx_video"]
    f = decode_ltx_video(vae, latents("ltx_video", 3))
    assert f.shape == (17, 64, 64, 3) and f.dtype == torch.uint8 and f.float().std() > 10
    with pytest.raises(ValueError, match=r"\[1, C, T, Hl, Wl\]"):
        decode_ltx_video(vae, latents("ltx_video", 3)[0])


def test_deterministic_per_seed(tiny):
    for kind, vae in tiny.items():
        again = build_ltx_vae("tiny", "cpu", SEEDS[kind]) if kind == "ltx_video" else \
            VAEDecoder(kind, build_vae(kind, cfg_of("tiny", kind), "cpu", seed=SEEDS[kind]))
        other = build_vae(kind, cfg_of("tiny", kind), "cpu", seed=SEEDS[kind] + 7)
        z = latents(kind)
        assert torch.equal(again.decode(z), decode(kind, vae, z)), kind             # the wrapper's decode(z), too
        sa, so = vae.state_dict(), other.state_dict()
        assert any(not torch.equal(sa[k], so[k]) for k in sa), kind


# ------------------------------------------------------------------------------------------------ full, meta
def test_full_configs_on_meta():
    v, a, lt = (build_vae(k, cfg_of("full", k), "meta") for k in ("h3_video", "h3_audio", "ltx_video"))
    assert {k: param_count(m) for k, m in zip(KINDS, (v, a, lt))} == FULL_PARAMS
    blocks = v.decoder.transformer_blocks
    assert len(blocks) == 36 and blocks[0].attn.heads == 32 and blocks[0].attn.to_q.weight.shape == (2048, 2048)
    assert v.spatial_compression_ratio == 16 and v.temporal_compression_ratio == 4
    assert v.decoder.proj_out.out_features == 3 * 4 * 16 * 16 and v.tokens_chunk_size == 5
    assert a.decoder.conv_pre.out_channels == 1024 and a.config.sampling_rate == 32000
    # H3 video: 37 latents at 1344x768 -> 124 frames of 768x1344 (a whole meta decode of that takes ~70 s on the
    # CPU: 28 tiles x 7 chunks x 36 layers of op dispatch); a 2-chunk decode checks the path, arithmetic the rest
    assert decode_h3_video(v, torch.empty(24, 12, 16, 16, device="meta")).shape == (39, 256, 256, 3)
    assert (h3_video_frames(37), 48 * v.spatial_compression_ratio, 84 * 16) == (124, 768, 1344)
    assert decode_h3_audio(a, torch.empty(2, 32, 207, device="meta")).shape == (2, 165_600)     # 5.175 s


def test_ltx_compression_ratio_trap():
    """diffusers' class defaults derive 64x / 16x from the encoder; the LTX-2 decoder upsamples 32x / 8x."""
    with torch.device("meta"):
        assert (AutoencoderKLLTX2Video().spatial_compression_ratio,
                AutoencoderKLLTX2Video().temporal_compression_ratio) == (64, 16)
    vae = build_vae("ltx_video", cfg_of("full", "ltx_video"), "meta")
    assert (vae.spatial_compression_ratio, vae.temporal_compression_ratio) == (32, 8)
    assert not vae.config.decoder_causal and not vae.config.timestep_conditioning
    f = decode_ltx_video(vae, torch.empty(1, 128, 16, 24, 42, device="meta"))
    assert f.shape == (121, 768, 1344, 3) and f.dtype == torch.uint8


def test_gpu_dtypes_on_meta():
    """bf16 on CUDA except diffusers' fp32-pinned modules (cast before materializing, so checkable on meta)."""
    v, a, lt = (build_vae(k, cfg_of("tiny", k), "meta") for k in ("h3_video", "h3_audio", "ltx_video"))
    for m in (v, a, lt):
        _dtypes(m, torch.device("cuda"))
    dt = {n: p.dtype for n, p in v.named_parameters()}
    assert dt["decoder.transformer_blocks.0.attn.to_q.weight"] == dt["decoder.proj_out.weight"] == torch.bfloat16
    assert dt["decoder.transformer_blocks.0.norm1.weight"] == dt["decoder.transformer_blocks.0.scale1"] == \
        dt["decoder.norm_out.weight"] == torch.float32
    assert {p.dtype for p in a.parameters()} == {torch.float32}
    assert {p.dtype for p in lt.parameters()} == {torch.bfloat16}
    cpu = build_vae("h3_video", cfg_of("tiny", "h3_video"), "cpu", seed=0)
    assert {p.dtype for p in cpu.parameters()} == {torch.float32}


# ------------------------------------------------------------------------------------------------ checkpoints
def saved(kind: str, vae, folder):
    """A whole diffusers model (encoder included) with ``vae``'s decoder weights, written by save_pretrained."""
    kw = cfg_of("tiny", kind).kwargs()
    if kind == "h3_video":
        kw |= {"latents_mean": [0.1] * 24, "latents_std": [2.0] * 24}
    ref = KINDS[kind].cls(**kw).eval()
    missing, unexpected = ref.load_state_dict(vae.state_dict(), strict=False)
    assert not unexpected and all(k.startswith(KINDS[kind].encoder_parts) for k in missing)
    if kind == "ltx_video":
        ref.latents_mean.copy_(torch.linspace(-1, 1, 128))
        ref.latents_std.copy_(torch.linspace(0.5, 1.5, 128))
    ref.save_pretrained(folder)
    return ref


@pytest.mark.parametrize("kind", list(KINDS))
def test_from_pretrained_round_trip(tiny, kind, tmp_path):
    ref = saved(kind, tiny[kind], tmp_path)
    assert (tmp_path / "config.json").exists() and (tmp_path / "diffusion_pytorch_model.safetensors").exists()
    got = build_vae(kind, None, "cpu", folder=tmp_path)
    z = latents(kind, 7 if kind == "h3_video" else 3)
    assert torch.equal(decode(kind, got, z), decode(kind, ref, z))
    sg, sr = got.state_dict(), ref.state_dict()
    assert all(torch.equal(sg[k], sr[k]) for k in sg)
    if kind == "h3_video":
        assert got.config.latents_mean == [0.1] * 24


@pytest.fixture
def audio_folder(tiny, tmp_path):
    saved("h3_audio", tiny["h3_audio"], tmp_path)
    return tmp_path


def one_line_error(folder, *must, kind="h3_audio"):
    with pytest.raises(CheckpointError) as e:
        build_vae(kind, None, "cpu", folder=folder)
    msg = str(e.value)
    assert "\n" not in msg and all(m in msg for m in must), msg


def test_checkpoint_errors(audio_folder, tmp_path):
    f = audio_folder / "diffusion_pytorch_model.safetensors"
    sd = load_file(f)
    one_line_error(tmp_path / "nope", "nope", "does not exist")

    bad = dict(sd, **{"decoder.bogus.weight": torch.zeros(2)})
    save_file(bad, f)
    one_line_error(audio_folder, str(f), "'decoder.bogus.weight'", "unexpected")

    bad = dict(sd, **{"dec_in_proj.weight": torch.zeros(3, 32, 1)})
    save_file(bad, f)
    one_line_error(audio_folder, str(f), "'dec_in_proj.weight'", "shape")

    save_file({k: t for k, t in sd.items() if k != "decoder.conv_post.weight_v"}, f)
    one_line_error(audio_folder, str(f), "'decoder.conv_post.weight_v'", "missing")

    save_file({k: t for k, t in sd.items() if not k.startswith("encoder.")}, f)      # no encoder: fine
    build_vae("h3_audio", None, "cpu", folder=audio_folder)

    data = f.read_bytes()
    f.write_bytes(data[:-100])
    one_line_error(audio_folder, str(f), "not a readable safetensors file")

    f.unlink()
    one_line_error(audio_folder, str(audio_folder), "diffusion_pytorch_model.safetensors")

    cfg = audio_folder / "config.json"
    c = json.loads(cfg.read_text())
    cfg.write_text(json.dumps(c | {"_class_name": "AutoencoderKLMiniMaxH3"}))
    one_line_error(audio_folder, str(cfg), "_class_name", "AutoencoderKLMiniMaxH3Audio")
    cfg.write_text("{not json")
    one_line_error(audio_folder, str(cfg), "not readable JSON")
    cfg.unlink()
    one_line_error(audio_folder, str(cfg), "missing")


def test_ltx_config_ratios(tiny, tmp_path):
    saved("ltx_video", tiny["ltx_video"], tmp_path)
    cfg = tmp_path / "config.json"
    c = json.loads(cfg.read_text())
    cfg.write_text(json.dumps({k: v for k, v in c.items() if not k.endswith("compression_ratio")}))
    vae = build_vae("ltx_video", None, "meta", folder=tmp_path)       # missing: taken from the decoder, not 64/16
    assert (vae.spatial_compression_ratio, vae.temporal_compression_ratio) == (32, 8)
    cfg.write_text(json.dumps(c | {"spatial_compression_ratio": 64}))
    one_line_error(tmp_path, str(cfg), "spatial_compression_ratio = 64", kind="ltx_video")


def test_pipeline_vaes_from_partition(tiny, tmp_path):
    """build_vaes loads a partition's diffusers-layout audio_vae/; the video VAE (no diffusers folder) stays
    random with the latent statistics of the original release's video_vae/config.json."""
    saved("h3_audio", tiny["h3_audio"], tmp_path / "audio_vae")
    (tmp_path / "video_vae").mkdir()
    (tmp_path / "video_vae" / "config.json").write_text(json.dumps({"latents_mean": [0.5] * 24,
                                                                     "latents_std": [3.0] * 24}))
    assert vae_folder(tmp_path, "h3_audio") == tmp_path / "audio_vae" and vae_folder(tmp_path, "h3_video") is None
    video, audio = build_vaes(get_config("tiny"), torch.device("cpu"), seed=0, weights=str(tmp_path))
    assert isinstance(video, VAEDecoder) and video.vae.config.latents_std == [3.0] * 24
    z = latents("h3_audio")
    assert torch.equal(audio.decode(z), decode_h3_audio(tiny["h3_audio"], z))
