"""The runtime's dense path picks FlashAttention-4 only on a CUDA tensor of a Hopper or Blackwell GPU with
flash_attn.cute importable, and never with RSI_FA4=0 (the capability and the package are stood in for on the CPU)."""

from __future__ import annotations

import importlib.util

import torch

from runtime import attention as A


class _CudaLike:
    is_cuda = True
    device = torch.device("cuda", 0)


def test_fa4_only_where_it_can_run(monkeypatch):
    assert not A.fa4_available(torch.zeros(1))                              # a CPU tensor
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i: (9, 0))
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object() if name == "flash_attn.cute" else None)
    for env, cap, want in (("1", (9, 0), True), ("0", (9, 0), False), ("1", (8, 0), False), ("1", (10, 0), True)):
        A._fa4_here.cache_clear()
        monkeypatch.setenv("RSI_FA4", env)
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i, c=cap: c)
        assert A.fa4_available(_CudaLike()) is want, (env, cap)
    A._fa4_here.cache_clear()
    monkeypatch.setenv("RSI_FA4", "1")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)                # not installed
    assert not A.fa4_available(_CudaLike())
    A._fa4_here.cache_clear()
