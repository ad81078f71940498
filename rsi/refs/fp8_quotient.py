"""The quantiser's quotient without a division per element: a row reciprocal and one Markstein correction.

``quantize_rows`` (rsi/refs/fp8_common.py) defines each byte as ``e4m3(h / scale_r)`` with the IEEE fp32 quotient.
A kernel that quantises a row may instead compute, once per row,

    nk = -2**64 if scale < 2**-64 else -1;   sk = scale * -nk;   nr = -1 / sk     (IEEE; the lift keeps nr finite)

and per element (h a bf16 value widened to fp32, exact)

    nhk = h * nk;   q0 = nhk * nr;   q = fma(fma(q0, sk, nhk), nr, q0)

(two multiplications and two fused multiply-adds instead of ``div.rn.f32``'s reciprocal, Newton steps and range
check). Scaling by 2**64 is exact (h and the scale are at most 448 * 2**-64 there). q0 is h k / (s k) rounded
through the reciprocal; for a normal quotient this is Markstein's correction: with the correctly rounded reciprocal
and q0 within an ulp, the residual ``q0 sk - hk`` is exact and ``q0 - residual / sk`` (as ``q0 + residual * nr``)
rounds to the IEEE quotient. Where the quotient underflows fp32's normal range it can differ in its last bits, but
such a quotient (below 2**-126) is far below e4m3's smallest half-step (2**-10), so the byte is +-0 either way. The
negated factors carry the sign of a zero (-0 / s is -0): Triton's unary minus is ``0 - x``, which turns -(+0) into
+0, so the kernels never negate a value that may be zero.

``exhaustive()`` checks the claim on the bytes: for every finite bf16 amax > 0 (its row scale ``amax / 448``) and
every bf16 |h| <= amax (the quotient is odd in h), the e4m3 byte of q equals the byte of the IEEE quotient. Run as
``python -m rsi.refs.fp8_quotient``: 532,701,119 pairs, 0 mismatches (2026-12-01, numpy on this project's CI CPU,
about 3 minutes); tests/unit/test_fp8_quotient.py checks a spread of 64 amax values each session.
fp32 fma is emulated exactly in fp64 with round-to-odd (``fma32``), which the Triton interpreter patch also uses
(rsi/harness/interp.py: the interpreter's own fma rounds twice).
"""

from __future__ import annotations

import sys
import time

import numpy as np
import torch

E4M3_MAX = np.float32(448.0)
TINY_SCALE = np.float32(2.0**-64)
LIFT = np.float32(2.0**64)


def fma32(a, b, c) -> np.ndarray:
    """Exactly rounded fp32 fma(a, b, c) of fp32 arrays: the product is exact in fp64, the sum is rounded to odd in
    fp64 (53 >= 24 + 2 bits), then once to fp32."""
    A, B, C = (np.asarray(v, np.float32).astype(np.float64) for v in (a, b, c))
    p = A * B
    with np.errstate(invalid="ignore", over="ignore"):
        t = p + C
        bb = t - p
        err = (p - (t - bb)) + (C - bb)                 # t + err = p + C exactly (TwoSum)
        even = (t.view(np.int64) & 1) == 0
        nudge = (err != 0) & even & np.isfinite(err) & np.isfinite(t)
        t = np.where(nudge, np.nextafter(t, np.where(err > 0, np.inf, -np.inf)), t)
    return t.astype(np.float32)


def quotient(h: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """The kernels' quotient of h (fp32) by the row scale (fp32 > 0, broadcast to h) (module docstring)."""
    scale = np.asarray(scale, np.float32)
    nk = np.where(scale < TINY_SCALE, -LIFT, np.float32(-1.0)).astype(np.float32)
    sk = (scale * -nk).astype(np.float32)
    nr = (np.float32(-1.0) / sk).astype(np.float32)
    with np.errstate(over="ignore"):
        nhk = (h * nk).astype(np.float32)
    q0 = (nhk * nr).astype(np.float32)
    shape = np.broadcast_shapes(q0.shape, sk.shape)
    res = fma32(q0, np.broadcast_to(sk, shape), nhk)
    return fma32(res, np.broadcast_to(nr, shape), q0)


def e4m3_bytes(q: np.ndarray) -> np.ndarray:
    t = torch.from_numpy(np.ascontiguousarray(q, np.float32)).clamp(-448.0, 448.0)
    return t.to(torch.float8_e4m3fn).view(torch.uint8).numpy()


def mismatches(amax_bits: np.ndarray) -> tuple[int, int]:
    """(pairs checked, byte mismatches) for the given positive bf16 amax bit patterns and every bf16 0 <= h <=
    amax."""
    h = (np.arange(0, 0x7F80, dtype=np.uint32) << 16).view(np.float32)[None, :]
    amax = (np.asarray(amax_bits, np.uint32) << 16).view(np.float32)[:, None]
    scale = (amax / E4M3_MAX).astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        ours = e4m3_bytes(quotient(h, scale))
        ieee = e4m3_bytes((h / scale).astype(np.float32))
    inside = h <= amax
    return int(inside.sum()), int(((ours != ieee) & inside).sum())


def exhaustive(batch: int = 256, progress: bool = True) -> tuple[int, int]:
    """Every finite positive bf16 amax (module docstring)."""
    pairs = bad = 0
    every = np.arange(1, 0x7F80, dtype=np.uint32)
    t0 = time.time()
    for i in range(0, len(every), batch):
        n, b = mismatches(every[i:i + batch])
        pairs, bad = pairs + n, bad + b
        if progress and (i // batch) % 16 == 0:
            print(f"\r{i + batch}/{len(every)} amax values, {pairs:,} pairs, {bad} mismatches, "
                  f"{time.time() - t0:.0f} s", end="", file=sys.stderr, flush=True)
    if progress:
        print(file=sys.stderr)
    return pairs, bad


if __name__ == "__main__":
    n, b = exhaustive()
    print(f"{n:,} (amax, h) pairs, {b} e4m3 byte mismatches")
    sys.exit(1 if b else 0)
