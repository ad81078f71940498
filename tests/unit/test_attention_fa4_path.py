"""The runtime's dense path picks FlashAttention-4 only for a bf16/fp16 CUDA tensor with a head dim FA4 takes, on a
Hopper or Blackwell GPU where flash_attn.cute imports (not merely is found: H200 run 41b had its files without the
CuTe DSL), and never with RSI_FA4=0 (the tensor, capability and package are stood in for on the CPU)."""

from __future__ import annotations

import importlib.util

import torch

from runtime import attention as A


class _CudaLike:
    is_cuda = True
    device = torch.device("cuda", 0)
    dtype = torch.bfloat16
    shape = (4, 2, 128)


def test_fa4_only_where_it_can_run(monkeypatch):
    assert not A.fa4_available(torch.zeros(1))                              # a CPU tensor
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i: (9, 0))
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object() if name == "flash_attn.cute" else None)
    monkeypatch.setattr(importlib, "import_module", lambda name: object())
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

    def no_cutlass(name):
        raise ModuleNotFoundError("No module named 'cutlass'")

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object())            # found, does not import
    monkeypatch.setattr(importlib, "import_module", no_cutlass)
    assert not A.fa4_available(_CudaLike())
    A._fa4_here.cache_clear()
    monkeypatch.setattr(importlib, "import_module", lambda name: object())
    for dtype, shape in ((torch.float32, (4, 2, 128)), (torch.bfloat16, (4, 2, 100)), (torch.bfloat16, (4, 2, 512))):
        t = _CudaLike()
        t.dtype, t.shape = dtype, shape
        assert not A.fa4_available(t), (dtype, shape)
    A._fa4_here.cache_clear()
