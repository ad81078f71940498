"""Shared pieces of reference op groups: seeded input makers and special-value cases."""

from __future__ import annotations

import torch

from rsi.contract import SpecialCase

BF16 = torch.bfloat16


def generator(seed: int, device: str | torch.device) -> torch.Generator:
    g = torch.Generator(device=device)
    g.manual_seed(int(seed))
    return g


def randn(shape, seed: int, device, dtype=BF16, scale: float = 1.0) -> torch.Tensor:
    """Normal random tensor drawn in fp32 from a seeded generator on ``device``, then cast."""
    x = torch.randn(shape, generator=generator(seed, device), device=device, dtype=torch.float32)
    if scale != 1.0:
        x.mul_(scale)
    return x.to(dtype)


def _map_float(inputs: tuple, fn, which=()) -> tuple:
    """Apply fn to the floating-point tensor inputs listed in ``which`` (all of them when empty); index tensors,
    weights and table views that are not listed keep their values and layout."""
    return tuple(fn(i, t) if torch.is_tensor(t) and t.is_floating_point() and (not which or i in which) else t
                 for i, t in enumerate(inputs))


def _zeros(inputs, which=()):
    return _map_float(inputs, lambda i, t: torch.zeros_like(t), which)


def _zero_prefix(inputs, which=()):
    """First half of the rows zero, the rest random: catches kernels that test one element and skip work."""
    def f(i, t):
        t = t.clone()
        if t.dim() >= 1 and t.shape[0] > 1:
            t[: t.shape[0] // 2] = 0
        else:
            t.zero_()
        return t
    return _map_float(inputs, f, which)


def _large(inputs, which=()):
    return _map_float(inputs, lambda i, t: (t.float() * 1.0e4).to(t.dtype), which)


def _subnormal(inputs, which=()):
    # bf16 shares fp32's exponent range: 1e-39 is subnormal in both
    return _map_float(inputs, lambda i, t: (t.float() * 1.0e-39).to(t.dtype), which)


def _nonfinite(inputs, which=()):
    """Sprinkle NaN, +Inf and -Inf at fixed strided positions of every float input."""
    def f(i, t):
        t = t.clone()
        flat = t.view(-1) if t.is_contiguous() else None
        if flat is None:
            return t
        n = flat.numel()
        for k, v in enumerate((float("nan"), float("inf"), float("-inf"))):
            flat[(k * 7 + i) % n:: max(n // 5, 1)] = v
        return t
    return _map_float(inputs, f, which)


SPECIAL_ZEROS = SpecialCase("zeros", _zeros)
SPECIAL_ZERO_PREFIX = SpecialCase("zero_prefix", _zero_prefix)
SPECIAL_LARGE = SpecialCase("large", _large)
SPECIAL_SUBNORMAL = SpecialCase("subnormal", _subnormal)
SPECIAL_NONFINITE = SpecialCase("nonfinite", _nonfinite, nonfinite=True)

FINITE_SPECIALS = (SPECIAL_ZEROS, SPECIAL_ZERO_PREFIX, SPECIAL_LARGE, SPECIAL_SUBNORMAL)
ALL_SPECIALS = FINITE_SPECIALS + (SPECIAL_NONFINITE,)
