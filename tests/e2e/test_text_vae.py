"""Text encoders (untrained hash default, Qwen3-VL-shaped) and the two VAE decoders at tiny size; full sizes on
the meta device."""

from __future__ import annotations

import torch

from runtime.config import get_config
from runtime.model import init_random_
from runtime.text import HashEmbeddingEncoder, Qwen3VLTextEncoder, hash_tokenize, make_text_encoder
from runtime.vae_audio import AudioVAEDecoder
from runtime.vae_video import VideoVAEDecoder, token_frames


def test_hash_encoder_deterministic(tiny_cfg):
    e = make_text_encoder("hash", tiny_cfg, "cpu", seed=0)
    assert isinstance(e, HashEmbeddingEncoder) and not e.trained and "untrained" in e.name
    a, b = e.encode("A cat, playing piano."), HashEmbeddingEncoder(64, "cpu", 0).encode("a cat , playing piano .")
    assert a.shape == (6, 64) and a.dtype == torch.bfloat16 and torch.equal(a, b)
    assert not torch.equal(e.encode("a dog")[1], a[1])
    assert hash_tokenize("cat", 8192) == hash_tokenize("CAT", 8192)


def test_qwen3vl_tiny_is_causal_and_truncated(tiny_cfg):
    e = make_text_encoder("qwen3vl", tiny_cfg, "cpu", seed=0)
    assert isinstance(e, Qwen3VLTextEncoder) and len(e.model.layers) == tiny_cfg.text.layers_used == 3
    h = e.encode("a cat plays the piano at night")
    assert h.shape == (7, 64) and h.dtype == torch.bfloat16 and torch.isfinite(h).all()
    h2 = e.encode("a cat plays the piano at night under the moon")
    # causal: the prefix is unchanged up to bf16 kernel-shape noise (a non-causal model would move it by O(1))
    torch.testing.assert_close(h2[:7].float(), h.float(), atol=0.1, rtol=0.02)


def test_qwen3vl_full_shape_on_meta():
    c = get_config("full").text
    e = Qwen3VLTextEncoder(c, "meta")
    n = sum(p.numel() for p in e.model.parameters())
    per_layer = 5120 * 8192 * 2 + 5120 * 1024 * 2 + 3 * 5120 * 25600 + 2 * 5120 + 2 * 128
    assert len(e.model.layers) == 50 and n == 151936 * 5120 + 50 * per_layer            # ~25.2B
    assert e.model.layers[49].self_attn.k_proj.weight.shape == (1024, 5120)


def test_token_frames_rule():
    # a 17-frame clip is 5 tokens: 1 + 4 + 4 + 4 + 4 frames; 37 latents -> 124 frames
    assert [token_frames(k) for k in range(6)] == [(0, 1), (1, 5), (5, 9), (9, 13), (13, 17), (17, 18)]
    assert token_frames(36)[1] == 124 and token_frames(71)[1] == 243


def test_video_vae_tiny(tiny_cfg):
    v = VideoVAEDecoder(tiny_cfg.video_vae)
    init_random_(v, 0)
    for T, frames in ((2, 5), (7, 22), (12, 39)):
        out = v.decode(torch.randn(24, T, 2, 3))
        assert out.shape == (frames, 32, 48, 3) and out.dtype == torch.uint8 and out.float().std() > 1


def test_video_vae_windows_match_one_pass_without_overlap(tiny_cfg):
    """Within one 17-frame clip the windowed decode is a single pass: same frames as decode_tokens."""
    v = VideoVAEDecoder(tiny_cfg.video_vae)
    init_random_(v, 1)
    z = torch.randn(24, 5, 2, 2)
    direct = v.decode_tokens(z, 0)                                                  # [5, 4, 32, 32, 3]
    frames = torch.cat([direct[0, 3:], *direct[1:]])                                # pre-padding dropped
    want = ((frames.clamp(-1, 1) + 1) * 127.5).round().to(torch.uint8)
    assert torch.equal(v.decode(z), want)


def test_audio_vae_tiny(tiny_cfg):
    a = AudioVAEDecoder(tiny_cfg.audio_vae)
    init_random_(a, 0)
    assert tiny_cfg.audio_vae.hop == 800
    w = a.decode(torch.randn(2, 32, 8))
    assert w.shape == (2, 6400) and w.abs().max() <= 1 and w.std() > 0


def test_full_vaes_on_meta():
    with torch.device("meta"):
        v, a = VideoVAEDecoder(get_config("full").video_vae), AudioVAEDecoder(get_config("full").audio_vae)
    nv = sum(p.numel() for p in v.parameters())
    assert 2.4e9 < nv < 2.45e9 and len(v.blocks) == 36 and v.blocks[0].attn.to_qkv.weight.shape == (6144, 2048)
    assert v.blocks[0].ff["w1"].weight.shape == (16384, 2048)
    assert a.conv_pre.out_channels == 1024 and a.ups[-1].out_channels == 8 and 40e6 < sum(
        p.numel() for p in a.parameters()) < 60e6
