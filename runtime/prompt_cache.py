"""The refiner's text context (stage 2), made once and cached on disk.

LTX-2 conditions on Gemma-3 per-layer hidden states passed through diffusers' ``LTX2TextConnectors`` (which pad to
1024 tokens with learnable registers, so the refiner attends the whole 1024-row context without a mask). Gemma-3
cannot be downloaded here, so ``Stage2TextEncoder`` is an UNTRAINED stand-in for it (a seeded hash embedding,
3840 features per token, scaled per layer to the 49 layer slots the connector expects) in front of the real
connector at its full config with seeded random weights. Its output, ``(video_ctx, audio_ctx)`` [1, 1024, 3840]
each, is cached under ``<dir>/<key>.safetensors``, the key being sha256(prompt, the encoder's identity: name,
config, weights seed and dtype). A later request with the same key (in this process or
another) reads the file instead of running the encoder: that is the Stage-2 prompt cache.

``--stage2-prompt generic`` (the default, as the Sol-H3 report's offline-cached generic context) keys on the empty
prompt: one context for every request of a given encoder (random weights: one per ``--seed``), usable offline.
A corrupt or mis-shaped entry is logged, removed and remade. ``--stage2-prompt prompt`` encodes the request's prompt.
Files are written to a temporary name and renamed, so a killed run leaves no partial entry.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import time
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from runtime.text import HashEmbeddingEncoder

log = logging.getLogger("runtime.prompt_cache")

CAPTION_CHANNELS = 3840          # diffusers' LTX2TextConnectors default (Gemma-3 12B hidden)
SEQ_LEN = 1024                    # diffusers' LTX-2 max_sequence_length; a multiple of the connector's registers
CONNECTOR_FULL: dict = {}         # diffusers' defaults: caption 3840, 49 layer slots, 2 layers of 30 x 128 per stream
CONNECTOR_TINY = {"caption_channels": 48, "text_proj_in_factor": 3, "video_connector_num_attention_heads": 2,
                      "video_connector_attention_head_dim": 24, "video_connector_num_layers": 1,
                      "video_connector_num_learnable_registers": 8, "audio_connector_num_attention_heads": 2,
                      "audio_connector_attention_head_dim": 24, "audio_connector_num_layers": 1,
                      "audio_connector_num_learnable_registers": 8, "video_hidden_dim": 64, "audio_hidden_dim": 32}
TINY_SEQ_LEN = 16


class Stage2TextEncoder:
    """Stand-in Gemma (hash embedding, UNTRAINED) + diffusers ``LTX2TextConnectors`` (random weights)."""

    trained = False

    def __init__(self, config: str, device: torch.device, seed: int):
        from diffusers.pipelines.ltx2.connectors import LTX2TextConnectors

        from runtime.model import init_random_

        kw = dict(CONNECTOR_FULL if config == "full" else CONNECTOR_TINY)
        self.seq_len = SEQ_LEN if config == "full" else TINY_SEQ_LEN
        with torch.device("meta"):
            self.connectors = LTX2TextConnectors(**kw)
        self.connectors.to_empty(device=device)
        init_random_(self.connectors, seed + 201)
        dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
        torch.nn.Module.to(self.connectors, dtype).eval().requires_grad_(False)   # (ModelMixin.to warns)
        c = self.connectors.config
        self.channels, self.layers = c.caption_channels, c.text_proj_in_factor
        self.words = HashEmbeddingEncoder(self.channels, device, seed + 202)
        g = torch.Generator().manual_seed(seed + 203)
        self.layer_gain = (0.5 + torch.rand(self.layers, generator=g)).to(device)
        self.dtype, self.device = dtype, device
        self.identity = self.identity_for(config, seed, device)

    @staticmethod
    def identity_for(config: str, seed: int, device: torch.device) -> str:
        """What the cache key hashes besides the prompt: the encoder's name and config, its weights (random:
        the seed, the init function and diffusers' version, which determine them), and the compute dtype."""
        import diffusers

        kw = CONNECTOR_FULL if config == "full" else CONNECTOR_TINY
        return json.dumps({"name": "hash-embedding + LTX2TextConnectors (untrained)", "config": kw,
                           "seq_len": SEQ_LEN if config == "full" else TINY_SEQ_LEN,
                           "weights": f"random seed {seed} (runtime.model.init_random_, diffusers "
                                      f"{diffusers.__version__})",
                           "dtype": "bfloat16" if device.type == "cuda" else "float32"}, sort_keys=True)

    @torch.no_grad()
    def encode(self, prompt: str) -> tuple[torch.Tensor, torch.Tensor]:
        rows = self.words.encode(prompt)[-self.seq_len:]                                    # [n, C] bf16
        n = rows.shape[0]
        h = torch.zeros(1, self.seq_len, self.channels, self.layers, device=self.device, dtype=self.dtype)
        h[0, self.seq_len - n:] = rows.to(self.dtype)[:, :, None] * self.layer_gain.to(self.dtype)   # left pad
        mask = torch.zeros(1, self.seq_len, dtype=torch.long, device=self.device)
        mask[0, self.seq_len - n:] = 1
        video, audio, _ = self.connectors(h, mask, padding_side="left")
        return video, audio


def context_channels(config: str) -> int:
    """Feature width of the stage-2 context (the refiner's ``caption_channels`` must match it)."""
    return (CONNECTOR_FULL if config == "full" else CONNECTOR_TINY).get("caption_channels", CAPTION_CHANNELS)


def context_key(prompt: str, identity: str) -> str:
    return hashlib.sha256(json.dumps([prompt, identity]).encode()).hexdigest()[:32]


class PromptCache:
    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

    def path(self, key: str) -> Path:
        return self.root / f"{key}.safetensors"

    def get(self, key: str, device: torch.device, shape: tuple[int, ...] | None = None
            ) -> tuple[torch.Tensor, torch.Tensor] | None:
        """The cached (video, audio) context, or None when absent. An entry that is unreadable, lacks a tensor or
        has another shape than ``shape`` is logged, removed and treated as a miss (it is remade and rewritten)."""
        p = self.path(key)
        if not p.exists():
            return None
        try:
            t = load_file(str(p), device=str(device))
            bad = [k for k in ("video", "audio") if k not in t or (shape and tuple(t[k].shape) != shape)]
            if not bad:
                return t["video"], t["audio"]
            why = f"tensor(s) {', '.join(bad)} missing or not of shape {list(shape or ())}"
        except Exception as e:  # noqa: BLE001 (safetensors raises its own error types)
            why = f"not readable ({type(e).__name__}: {e})"
        log.warning("prompt cache entry %s: %s; remaking it", p, why)
        p.unlink(missing_ok=True)
        return None

    def put(self, key: str, video: torch.Tensor, audio: torch.Tensor, meta: dict[str, str]) -> Path:
        self.root.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{key}.", suffix=".partial", dir=self.root)
        os.close(fd)
        try:
            save_file({"video": video.contiguous().cpu(), "audio": audio.contiguous().cpu()}, tmp, metadata=meta)
            os.replace(tmp, self.path(key))
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return self.path(key)


def stage2_context(prompt: str, generic: bool, config: str, device: torch.device, seed: int, cache_dir: str
                   ) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """(video_ctx, audio_ctx, info). The encoder is built only on a cache miss."""
    t0 = time.perf_counter()
    text = "" if generic else prompt
    identity = Stage2TextEncoder.identity_for(config, seed, device)
    key = context_key(text, identity)
    cache = PromptCache(cache_dir)
    hit = cache.get(key, device, (1, SEQ_LEN if config == "full" else TINY_SEQ_LEN, context_channels(config)))
    if hit is None:
        enc = Stage2TextEncoder(config, device, seed)
        video, audio = enc.encode(text)
        cache.put(key, video, audio, {"prompt": text, "encoder": identity})
        del enc
    else:
        video, audio = hit
    info = {"kind": "generic" if generic else "prompt", "key": key, "path": str(cache.path(key)),
            "hit": hit is not None, "seconds": time.perf_counter() - t0, "encoder": identity,
            "trained": False}
    return video, audio, info

