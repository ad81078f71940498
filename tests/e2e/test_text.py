"""Text encoders (untrained hash default, Qwen3-VL-shaped); full size on the meta device. The VAEs: test_vae.py."""

from __future__ import annotations

import torch

from runtime.config import get_config
from runtime.text import HashEmbeddingEncoder, Qwen3VLTextEncoder, hash_tokenize, make_text_encoder


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
