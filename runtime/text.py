"""Text conditioning: a pluggable encoder interface producing [L, text_dim] bf16 conditioning rows.

- ``HashEmbeddingEncoder`` (default for the random-weight runtime): deterministic word-hash tokenizer plus a seeded
  embedding table. UNTRAINED: it gives the DiT rows of the right shape and dtype, nothing more.
- ``Qwen3VLTextEncoder``: the shape of H3's real encoder (Qwen3-VL text model, pre-norm decoder layers with
  QK-norm and GQA, causal). The conditioning is ``hidden_states[layers_used]`` (50 in H3): the raw residual after
  decoder layer index 49, before the final norm, so only 50 of the 64 layers are built. Random weights unless a
  checkpoint is loaded; the real tokenizer is not available here, so it also takes the hash tokenizer's ids.
"""

from __future__ import annotations

import hashlib
import re
import zlib
from typing import Protocol

import torch
import torch.nn.functional as F
from torch import nn

from rsi.refs.modulate import rms_norm
from runtime.config import TextEncoderConfig

BF16 = torch.bfloat16


class TextEncoder(Protocol):
    name: str
    dim: int
    trained: bool

    def encode(self, prompt: str) -> torch.Tensor:  # [L, dim] bf16
        ...


def hash_tokenize(prompt: str, vocab: int) -> list[int]:
    """Deterministic stand-in tokenizer: words and punctuation, each hashed (sha256) into [0, vocab)."""
    pieces = re.findall(r"\w+|[^\w\s]", prompt.lower())
    return [int.from_bytes(hashlib.sha256(p.encode()).digest()[:8], "little") % vocab for p in pieces]


class HashEmbeddingEncoder:
    """UNTRAINED default: conditioning = seeded embedding table rows of the hashed tokens, [L, dim] bf16."""

    trained = False

    def __init__(self, dim: int, device: torch.device | str = "cpu", seed: int = 0, vocab: int = 8192):
        self.dim, self.vocab, self.name = dim, vocab, f"hash-embedding-{dim} (untrained)"
        g = torch.Generator(device=device).manual_seed(seed + 0x7E47)
        self.table = torch.randn(vocab, dim, generator=g, device=device).to(BF16)                  # [vocab, dim]

    def encode(self, prompt: str) -> torch.Tensor:
        ids = hash_tokenize(prompt, self.vocab) or [0]
        return self.table[torch.tensor(ids, device=self.table.device)]                              # [L, dim]


# ------------------------------------------------------------------------------------------------ Qwen3-VL shape
def rotate_half_rope(x: torch.Tensor, pos: torch.Tensor, theta: float) -> torch.Tensor:
    """x: [L, heads, D]; NeoX half-split rotary over all D dims, positions [L] (text-only M-RoPE is 1-D)."""
    D = x.shape[-1]
    inv = theta ** (-torch.arange(0, D, 2, dtype=torch.float32, device=x.device) / D)
    ang = pos.float()[:, None] * inv                                                               # [L, D/2]
    cos, sin = ang.cos()[:, None, :], ang.sin()[:, None, :]
    a, b = x.float().chunk(2, dim=-1)
    return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1).to(x.dtype)


class QwenNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim, dtype=BF16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.weight, self.eps)


class QwenAttention(nn.Module):
    def __init__(self, c: TextEncoderConfig):
        super().__init__()
        self.c = c
        self.q_proj = nn.Linear(c.hidden, c.heads * c.head_dim, bias=False, dtype=BF16)
        self.k_proj = nn.Linear(c.hidden, c.kv_heads * c.head_dim, bias=False, dtype=BF16)
        self.v_proj = nn.Linear(c.hidden, c.kv_heads * c.head_dim, bias=False, dtype=BF16)
        self.o_proj = nn.Linear(c.heads * c.head_dim, c.hidden, bias=False, dtype=BF16)
        self.q_norm, self.k_norm = QwenNorm(c.head_dim, c.eps), QwenNorm(c.head_dim, c.eps)

    def forward(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        c, L = self.c, x.shape[0]
        q = rotate_half_rope(self.q_norm(self.q_proj(x).view(L, c.heads, c.head_dim)), pos, c.rope_theta)
        k = rotate_half_rope(self.k_norm(self.k_proj(x).view(L, c.kv_heads, c.head_dim)), pos, c.rope_theta)
        v = self.v_proj(x).view(L, c.kv_heads, c.head_dim)
        rep = c.heads // c.kv_heads                                                # GQA: share each KV head
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        o = F.scaled_dot_product_attention(*(t.transpose(0, 1)[None] for t in (q, k, v)), is_causal=True)
        return self.o_proj(o[0].transpose(0, 1).reshape(L, -1))


class QwenLayer(nn.Module):
    def __init__(self, c: TextEncoderConfig):
        super().__init__()
        self.input_layernorm = QwenNorm(c.hidden, c.eps)
        self.self_attn = QwenAttention(c)
        self.post_attention_layernorm = QwenNorm(c.hidden, c.eps)
        self.mlp = nn.ModuleDict({n: nn.Linear(a, b, bias=False, dtype=BF16) for n, a, b in
                                  (("gate_proj", c.hidden, c.ffn), ("up_proj", c.hidden, c.ffn),
                                   ("down_proj", c.ffn, c.hidden))})

    def forward(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), pos)
        h = self.post_attention_layernorm(x)
        return x + self.mlp["down_proj"](F.silu(self.mlp["gate_proj"](h)) * self.mlp["up_proj"](h))


class Qwen3VLTextModel(nn.Module):
    """HF-style names (``embed_tokens``, ``layers.i.self_attn.q_proj``...); only ``layers_used`` layers exist."""

    def __init__(self, c: TextEncoderConfig):
        super().__init__()
        self.c = c
        self.embed_tokens = nn.Embedding(c.vocab, c.hidden, dtype=BF16)
        self.layers = nn.ModuleList(QwenLayer(c) for _ in range(c.layers_used))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """ids: [L] int64 -> hidden_states[layers_used]: [L, hidden] bf16 (no final norm)."""
        x = self.embed_tokens(ids)
        pos = torch.arange(ids.shape[0], device=ids.device)
        for layer in self.layers:
            x = layer(x, pos)
        return x


class Qwen3VLTextEncoder:
    trained = False

    def __init__(self, c: TextEncoderConfig, device: torch.device | str = "cpu", seed: int | None = 0):
        self.c, self.dim = c, c.hidden
        self.name = f"qwen3-vl-shaped {c.layers_used}/{c.layers_total} layers x {c.hidden} (random weights)"
        with torch.device("meta"):
            self.model = Qwen3VLTextModel(c)
        if str(device) != "meta":
            self.model.to_empty(device=device)
            if seed is not None:
                init_text_random_(self.model, seed)
            self.model.eval().requires_grad_(False)

    @torch.no_grad()
    def encode(self, prompt: str) -> torch.Tensor:
        ids = hash_tokenize(prompt, self.c.vocab) or [0]
        return self.model(torch.tensor(ids, device=self.model.embed_tokens.weight.device))


@torch.no_grad()
def init_text_random_(model: nn.Module, seed: int) -> None:
    for name, p in model.named_parameters():
        if "norm" in name:
            p.fill_(1.0)
        else:
            g = torch.Generator(device=p.device).manual_seed(seed * 1_000_003 + zlib.crc32(name.encode()))
            p.normal_(0.0, 1.0 if "embed" in name else p.shape[1] ** -0.5, generator=g)


def make_text_encoder(kind: str, cfg, device: torch.device | str, seed: int) -> TextEncoder:
    """``hash`` (default, untrained) or ``qwen3vl`` (random-weight Qwen3-VL-shaped encoder at the config's size)."""
    if kind == "hash":
        return HashEmbeddingEncoder(cfg.dit.text_dim, device, seed)
    if kind == "qwen3vl":
        if cfg.text.hidden != cfg.dit.text_dim:
            raise ValueError(f"text encoder width {cfg.text.hidden} != DiT text_dim {cfg.dit.text_dim}")
        return Qwen3VLTextEncoder(cfg.text, device, seed)
    raise ValueError(f"unknown text encoder {kind!r}; use hash or qwen3vl")
