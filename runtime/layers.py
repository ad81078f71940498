"""H3 DiT building blocks: norms, RoPE table, attention (fused QKV + QK-norm + partial RoPE), SwiGLU MLP, time
embedding. Fused ops run through ``runtime.kernels.Kernels``; everything else is plain torch."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from rsi.refs.modulate import rms_norm
from runtime import attention
from runtime.config import DiTConfig

BF16, FP32 = torch.bfloat16, torch.float32


class RMSNorm(nn.Module):
    """Weight-only RMSNorm; the math is rsi.refs.modulate.rms_norm (fp32 statistics, bf16 result)."""

    def __init__(self, dim: int, eps: float = 1e-5, dtype: torch.dtype = BF16):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim, dtype=dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.weight, self.eps)


class Rope(nn.Module):
    """Partial 3-D RoPE: one ``inv_freq[j] = 10000^(-j/16)`` (j < 16) shared by the t, h, w axes."""

    def __init__(self, cfg: DiTConfig):
        super().__init__()
        self.theta, self.n = cfg.rope_theta, cfg.rope_dims // 6
        self.register_buffer("inv_freq", self.default_inv_freq())

    def default_inv_freq(self) -> torch.Tensor:
        j = torch.arange(self.n, dtype=torch.float64)
        return (self.theta ** (-j / self.n)).float()

    def table(self, positions) -> torch.Tensor:
        """positions: [S, 3] fp64 (numpy or tensor) -> [S, 96] bf16 = cos(theta48) | sin(theta48).
        Positions are cast to fp32 before the product (H3_SPEC.md section 1); theta = [t16 | h16 | w16]."""
        pos = torch.as_tensor(positions, dtype=torch.float64).to(self.inv_freq.device).float()   # [S, 3]
        theta = (pos[:, :, None] * self.inv_freq.float()).reshape(pos.shape[0], 3 * self.n)      # [S, 48]
        return torch.cat([theta.cos(), theta.sin()], dim=-1).to(BF16)


def sdpa_documents(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bounds: list[int]) -> torch.Tensor:
    """Dense varlen non-causal attention over documents ``[bounds[i], bounds[i+1])`` (SDPA per document,
    runtime.attention.sdpa_documents): q, k, v [S, NH, D] (v may be a strided view of qkv) -> [S, NH * D]."""
    cu = torch.tensor(bounds, dtype=torch.int32, device=q.device)
    return attention.sdpa_documents(q, k, v, cu).view(q.shape[0], -1)


class Attention(nn.Module):
    """Fused qkv (no bias) -> per-head QK RMSNorm -> partial RoPE -> attention -> out_proj (7168 -> H).

    ``qkv_proj.weight`` is held as contiguous [Q; K; V] (the checkpoint loader reorders the native per-head
    interleaved layout)."""

    def __init__(self, cfg: DiTConfig):
        super().__init__()
        self.heads, self.head_dim, self.inner = cfg.heads, cfg.head_dim, cfg.inner
        self.qkv_proj = nn.Linear(cfg.hidden, 3 * cfg.inner, bias=False, dtype=BF16)
        self.q_norm = RMSNorm(cfg.head_dim, cfg.eps)
        self.k_norm = RMSNorm(cfg.head_dim, cfg.eps)
        self.out_proj = nn.Linear(cfg.inner, cfg.hidden, bias=False, dtype=BF16)

    def forward(self, h: torch.Tensor | tuple[torch.Tensor, torch.Tensor], rope: torch.Tensor, bounds: list[int],
                kernels) -> torch.Tensor:
        """h: [S, H] bf16, or (h8 [S, H] e4m3, h_scale [S] fp32) from a fused producer (``modulate_fp8``, or
        ``gate_residual_modulate_fp8`` after block 0) when qkv_proj is an Fp8Linear. With an fp8 out_proj the
        attention may hand it ``head_merge_fp8``'s e4m3 rows."""
        qkv = self.qkv_proj.quantized(*h) if isinstance(h, tuple) else self.qkv_proj(h)    # [S, 3 * NH * 128]
        S = qkv.shape[0]
        q, k = kernels.call("qk_norm_rope", qkv, self.q_norm.weight, self.k_norm.weight, rope)  # [S, NH, 128]
        v = qkv[:, 2 * self.inner:].view(S, self.heads, self.head_dim)
        attn = getattr(kernels, "attention", None)           # runtime.attention.Attention: the run's mode and timing
        if attn is None:
            return self.out_proj(sdpa_documents(q, k, v, bounds))
        o = attn.self_attn(q, k, v, bounds, quantize=getattr(self.out_proj, "takes_quantized", False))
        return self.out_proj.quantized(*o) if isinstance(o, tuple) else self.out_proj(o)     # [S, H]


class MLP(nn.Module):
    """SwiGLU: fc1 (H -> 2F, [gate; up]) -> silu(gate) * up -> fc2 (F -> H); no biases."""

    def __init__(self, cfg: DiTConfig):
        super().__init__()
        self.fc1 = nn.Linear(cfg.hidden, 2 * cfg.ffn, bias=False, dtype=BF16)
        self.fc2 = nn.Linear(cfg.ffn, cfg.hidden, bias=False, dtype=BF16)

    def forward(self, h: torch.Tensor | tuple[torch.Tensor, torch.Tensor], kernels) -> torch.Tensor:
        """h: [R, H] bf16, or (h8 [R, H] e4m3, h_scale [R] fp32) from ``gate_residual_modulate_fp8`` when fc1 is an
        Fp8Linear."""
        if getattr(self.fc1, "consumer", False) and not isinstance(h, tuple):
            # LoRA consumer fusion: fc1 hands over (base, lora) and one op computes swiglu(bf16(base + lora))
            base, lora = self.fc1.parts(h)                                                    # [R, 2F] each
            if kernels.has("lora_consumer", base.device):
                return self.fc2(kernels.call("lora_consumer", base, lora))
            return self.fc2(kernels.call("swiglu", base + lora))     # same math as native branches: bf16 add, swiglu
        g = self.fc1.quantized(*h) if isinstance(h, tuple) else self.fc1(h)                  # [R, 2F]
        if getattr(self.fc2, "takes_quantized", False) and kernels.verified("swiglu_fp8", g):
            # --precision fp8 with a verified fused producer: SwiGLU writes fc2's e4m3 input and row scales
            return self.fc2.quantized(*kernels.call("swiglu_fp8", g))
        return self.fc2(kernels.call("swiglu", g))                                            # [R, F] -> [R, H]


def sinusoid(t: torch.Tensor, dim: int = 256) -> torch.Tensor:
    """[M] fp32 -> [M, dim] fp32, cos first, freq_j = exp(-ln(1e4) * j / (dim/2)); t unscaled (no x1000)."""
    half = dim // 2
    freqs = torch.exp(-math.log(1e4) * torch.arange(half, dtype=FP32, device=t.device) / half)
    args = t.float()[:, None] * freqs
    return torch.cat([args.cos(), args.sin()], dim=-1)


class TimeEmbedder(nn.Module):
    """sinusoid 256 -> Linear 256 -> H -> SiLU -> Linear H -> 2688, all fp32."""

    def __init__(self, cfg: DiTConfig):
        super().__init__()
        self.dim = cfg.time_freq
        self.proj_in = nn.Linear(cfg.time_freq, cfg.hidden, dtype=FP32)
        self.proj_out = nn.Linear(cfg.hidden, cfg.time_dim, dtype=FP32)

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        return self.proj_out(F.silu(self.proj_in(sinusoid(t, self.dim))))
