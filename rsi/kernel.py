"""The kernel API: the only ``rsi`` module a candidate may import (README, "The contract").

A candidate's host code may compute shapes, strides and grids, allocate its outputs with :func:`empty` /
:func:`empty_like`, and launch ``@triton.jit`` kernels. It may name only what ``CANDIDATE_API`` lists; the static
check (``rsi.harness.static``) rejects any other attribute of this module. The runtime and the judge's producer
process load candidates the same way; what differs is invisible to a candidate: in the producer, outputs are
carved out of guard-banded buffers the judge inspects after every call (``set_allocator``, harness only).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import triton

bfloat16 = torch.bfloat16
float16 = torch.float16
float32 = torch.float32
float64 = torch.float64
int8 = torch.int8
int16 = torch.int16
int32 = torch.int32
int64 = torch.int64
uint8 = torch.uint8
float8_e4m3fn = torch.float8_e4m3fn
float8_e5m2 = torch.float8_e5m2

cdiv = triton.cdiv
next_power_of_2 = triton.next_power_of_2

# what a candidate may name: rsi.harness.static checks every ``K.<name>`` against this set
CANDIDATE_API = frozenset({
    "empty", "empty_like", "cdiv", "next_power_of_2", "bfloat16", "float16", "float32", "float64", "int8",
    "int16", "int32", "int64", "uint8", "float8_e4m3fn", "float8_e5m2",
})


def _plain(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    return torch.empty(shape, dtype=dtype, device=device)


_allocator: Callable[[tuple[int, ...], torch.dtype, torch.device], torch.Tensor] = _plain


def empty(shape: Sequence[int], dtype: torch.dtype, device: torch.device | str) -> torch.Tensor:
    """A new contiguous output tensor (uninitialized)."""
    dims = tuple(int(s) for s in shape)
    if any(d < 0 for d in dims):
        raise ValueError(f"negative size in {dims}")
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"dtype must be a torch dtype (K.bfloat16, ...), not {type(dtype).__name__}")
    return _allocator(dims, dtype, torch.device(device))


def empty_like(t: torch.Tensor) -> torch.Tensor:
    """A new contiguous output with t's shape, dtype and device."""
    return empty(tuple(t.shape), t.dtype, t.device)


def set_allocator(fn: Callable[[tuple[int, ...], torch.dtype, torch.device], torch.Tensor] | None) -> None:
    """Harness only (the producer process): route output allocation through ``fn``; None restores the plain one."""
    global _allocator
    _allocator = fn or _plain


def module_name(op: str) -> str:
    """The module name a candidate or verified kernel of ``op`` is imported under, in the judge and the runtime."""
    return f"rsi_kernel_{op}"
