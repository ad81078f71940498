"""The one attention call of the runtime: both stages (H3 blocks, LTX refiner blocks) attend through ``attend``.

``attend(q, k, v)`` takes ``[B, heads, rows, head_dim]`` bf16 (non-causal, no mask, softmax scale 1/sqrt(D)) and
returns the same shape. The attention op group (a separate issue) takes this function over; until it does, it
is SDPA with the backend order measured fastest on the H200 at the pipeline's shapes
(../shared/docs/ANCHORS.md section f: cuDNN 73.9 ms vs flash 116.7 ms at H3's 38,248 rows, 6.24 vs 12.18 ms at
LTX-2's 16,128 rows): cuDNN, then flash, then memory-efficient, then math. SDPA falls through the list when a
backend does not support the inputs (e.g. head dim 64 on cuDNN for some builds), so every shape still runs.
On the CPU the order is irrelevant and plain SDPA runs.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

try:   # torch >= 2.3
    from torch.nn.attention import SDPBackend, sdpa_kernel

    BACKENDS = [SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
                SDPBackend.MATH]
except ImportError:        # pragma: no cover - older torch
    SDPBackend = sdpa_kernel = None
    BACKENDS = []

BACKEND_NAMES = ["cudnn", "flash", "efficient", "math"]


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Non-causal softmax attention, [B, H, Sq, D] x [B, H, Sk, D] -> [B, H, Sq, D]."""
    if q.device.type != "cuda" or sdpa_kernel is None:
        return F.scaled_dot_product_attention(q, k, v)
    with sdpa_kernel(BACKENDS, set_priority=True):
        return F.scaled_dot_product_attention(q, k, v)


def describe() -> str:
    """For run summaries: which function serves attention, and in which backend order."""
    return "SDPA, backend priority " + " > ".join(BACKEND_NAMES) + " (runtime/attention.py: attend)"
