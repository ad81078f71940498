"""--precision fp8 with a verified ``swiglu_fp8`` kernel: the MLP hands fc2 the producer's e4m3 bytes and row scales
(Fp8Linear.quantized) instead of quantising SwiGLU's bf16 output inside fc2. Same quantiser, so the two paths agree
to the producer's own difference (silu in fp64 vs torch's fp32: a few bf16 roundings); without a verified kernel the
unfused path runs (the producer's reference would be slower than the bf16 op it replaces)."""

from __future__ import annotations

import torch

from runtime.config import get_config
from runtime.kernels import Kernels
from runtime.model import build_dit
from runtime.precision import to_fp8_


def test_mlp_uses_the_fused_producer_only_where_verified(tmp_path):
    cfg = get_config("tiny").dit
    model = build_dit(cfg, "cpu", seed=3)
    kernels = Kernels("verified", root=tmp_path, target=None)
    to_fp8_(model.blocks, kernels)
    mlp = model.blocks[0].mlp
    h = (torch.randn(70, cfg.hidden, generator=torch.Generator().manual_seed(1))).to(torch.bfloat16)
    with torch.no_grad():
        assert not kernels.verified("swiglu_fp8", mlp.fc1(h))          # no lock here: the unfused path
        unfused = mlp(h, kernels)
        kernels.verified = lambda op, *a: op == "swiglu_fp8"            # as if the lock had one
        fused = mlp(h, kernels)
    ops = {c["op"] for c in kernels.summary()}
    assert "swiglu_fp8" in ops
    d = (fused.float() - unfused.float()).norm() / unfused.float().norm()
    assert d < 1e-2 and fused.shape == unfused.shape and fused.dtype == unfused.dtype
