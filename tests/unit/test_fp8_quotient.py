"""The quantisers' reciprocal quotient (rsi/refs/fp8_quotient.py) gives the IEEE quotient's e4m3 byte: every bf16
|h| <= amax for 62 amax values spread over bf16's whole range (subnormal, lifted and normal row scales; the full
check over every amax is ``python -m rsi.refs.fp8_quotient``), the sign of zeros, and the exact fp32 fma it rests
on. Without the correction step (q0 alone) bytes differ, so the check can fail."""

from __future__ import annotations

import numpy as np

from rsi.refs import fp8_quotient as Q

AMAX_BITS = np.unique(np.concatenate([
    np.array([0x0001, 0x0002, 0x007F, 0x0080, 0x0081, 0x1F00, 0x1F7F, 0x1F80, 0x2000, 0x3F80, 0x3F81, 0x43E0,
              0x43DF, 0x7F7F, 0x7F7E, 0x5F80], np.uint32),
    np.linspace(1, 0x7F7F, 48).astype(np.uint32)]))


def test_quotient_bytes_equal_ieee_over_spread_amax():
    pairs, bad = Q.mismatches(AMAX_BITS)
    assert pairs > 900_000 and bad == 0


def test_uncorrected_reciprocal_differs():
    h = (np.arange(0, 0x7F80, dtype=np.uint32) << 16).view(np.float32)[None, :]
    amax = (AMAX_BITS << 16).view(np.float32)[:, None]
    scale = (amax / Q.E4M3_MAX).astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        q0 = (h * (np.float32(1.0) / scale).astype(np.float32)).astype(np.float32)
        differ = (Q.e4m3_bytes(q0) != Q.e4m3_bytes((h / scale).astype(np.float32))) & (h <= amax)
    assert differ.sum() > 100


def test_signed_zero_and_fma32():
    q = Q.quotient(np.array([-0.0, 0.0, -3.0], np.float32), np.float32(0.5))
    assert list(np.signbit(q)) == [True, False, True] and q[2] == -6.0
    a, b, c = np.float32(1 + 2**-23), np.float32(1 - 2**-23), np.float32(-1.0)
    assert Q.fma32(a, b, c) == np.float32(-(2.0**-46))          # fp32 a * b + c would round the product to 1 -> 0
    # a tie in fp64 resolved by the low bits: round-to-odd keeps the single fp32 rounding correct
    x, y, z = np.float32(1 + 2**-12), np.float32(1 + 2**-12), np.float32(2**-60)
    assert Q.fma32(x, y, z) == np.float32(1 + 2**-11 + 2**-23)
