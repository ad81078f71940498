"""attention_fp8's contract on the CPU (no Triton): ``quantize`` bitwise against an independent quantiser (scale from
numpy's fp32 division, e4m3 by nearest-grid search with ties to the even code: ties, subnormals, a zero head, a
bf16-subnormal head, NaN and Inf heads, no rows), the reference against an independent fp64 attention on the
dequantised values (any head dim), the oracle = the exact op, the inputs' per-head magnitudes and the special cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from rsi.contract import Shape
from rsi.harness import check
from rsi.refs import attention as A
from rsi.refs import attention_fp8 as F

E4M3 = torch.float8_e4m3fn


def _grid() -> torch.Tensor:
    """The 127 non-negative finite e4m3fn values by code 0x00..0x7E, from the bit layout (exponent bias 7)."""
    code = torch.arange(0x7F, dtype=torch.int64)
    e, m = code >> 3, (code & 7).double()
    return torch.where(e == 0, m * 2.0 ** -9, (1 + m / 8) * torch.exp2((e - 7).double()))


def _e4m3_codes(y: torch.Tensor) -> torch.Tensor:
    """fp32 -> e4m3fn codes: nearest grid value, ties to the even code (even mantissa), |y| > 448 -> 448, sign kept
    (-0 for negatives that round to zero), NaN -> 0x7F."""
    grid = _grid()
    a = y.double().abs().clamp(max=448.0)
    hi = torch.searchsorted(grid, a).clamp(max=126)
    lo = (hi - 1).clamp(min=0)
    dlo, dhi = a - grid[lo], grid[hi] - a
    pick = torch.where(dlo < dhi, lo, torch.where(dhi < dlo, hi, torch.where(lo % 2 == 0, lo, hi)))
    code = pick | (torch.signbit(y).long() << 7)
    return torch.where(torch.isnan(y), torch.full_like(code, 0x7F), code)


def _independent_quantize(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(codes int64 [S, H, D], scale float32 [H]) with numpy's IEEE fp32 arithmetic."""
    xs = x.float().numpy().astype(np.float32)
    H = xs.shape[1]
    scale = np.ones(H, dtype=np.float32)
    for h in range(H):
        col = np.abs(xs[:, h, :].astype(np.float64))
        if col.size and not np.isfinite(col).all():
            scale[h] = np.nan
        elif col.size and col.max() > 0:
            scale[h] = np.float32(col.max()) / np.float32(448.0)
    y = torch.from_numpy(xs / scale[None, :, None])
    return _e4m3_codes(y), torch.from_numpy(scale)


def _heads_input() -> torch.Tensor:
    """[40, 6, 16] bf16: 0 random; 1 every e4m3 value and every midpoint between neighbours (ties), both signs, at
    scale 1/8 (amax 56); 2 zeros and -0; 3 bf16 subnormals; 4 a NaN; 5 an Inf among large values."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(40, 6, 16, generator=g)
    grid = _grid()
    ties = torch.cat([grid, (grid[1:] + grid[:-1]) / 2])
    vals = torch.cat([ties, -ties]) / 8
    h1 = torch.zeros(640, dtype=torch.float64)
    h1[:vals.numel()] = vals
    x[:, 1, :] = h1.view(40, 16).float()
    x[:, 2, :] = 0.0
    x[::3, 2, ::2] = -0.0
    x[:, 3, :] *= 1e-39
    x[7, 4, 5] = math.nan
    x[:, 5, :] *= 1e30
    x[11, 5, 2] = math.inf
    return x.to(torch.bfloat16)


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())


def test_quantize_bitwise_against_independent():
    x = _heads_input()
    assert bool((x[:, 1].float().abs() == x[:, 1].float().abs().max()).any())   # amax 56: scale exactly 1/8
    x8, scale = F.quantize(x)
    codes, want_scale = _independent_quantize(x)
    assert x8.dtype == E4M3 and x8.shape == x.shape and x8.is_contiguous()
    assert scale.dtype == torch.float32 and _same(scale, want_scale)
    assert float(scale[1]) == 0.125 and float(scale[2]) == 1.0 and math.isnan(scale[4]) and math.isnan(scale[5])
    assert 0 < float(scale[3]) < 2.0 ** -126                    # an fp32-subnormal scale
    got = x8.view(torch.uint8).long()
    nan = torch.isnan(x8.float())
    assert torch.equal(nan, codes == 0x7F) and torch.equal(got[~nan], codes[~nan])
    assert bool(nan[:, 4].all() and nan[:, 5].all()) and not bool(nan[:, :4].any())    # non-finite heads: all NaN
    assert float(x8[:, 0].float().abs().max()) == 448.0 and float(x8[:, 1].float().abs().max()) == 448.0
    # ties went to the even code, both ways (a round-half-up quantiser fails here)
    t = x[:, 1].float().reshape(-1)[:506] * 8
    mids = ~torch.isin(t.abs().double(), _grid())
    assert int(mids.sum()) == 252 and bool((got[:, 1].reshape(-1)[:506][mids] % 2 == 0).all())
    # heads are independent: a different head 0 leaves the others' bits alone
    y = x.clone()
    y[:, 0] *= 1000
    assert torch.equal(F.quantize(y)[0].view(torch.uint8)[:, 1:4], x8.view(torch.uint8)[:, 1:4])
    # no rows: scales 1, nothing to quantise
    x8e, se = F.quantize(x[:0])
    assert x8e.shape == (0, 6, 16) and torch.equal(se, torch.ones(6))


def _masked_fp64(q, k, v, cu):
    """fp64 softmax attention over the whole sequence with a same-document mask (no chunks, no per-document loop).
    Returns (out, sum_j p_ij |v_jd|)."""
    S, _, D = q.shape
    doc = torch.bucketize(torch.arange(S), torch.tensor(cu[1:]), right=True)
    same = doc[:, None] == doc[None, :]
    qd, kd, vd = (t.double().transpose(0, 1) for t in (q, k, v))
    p = torch.softmax(((qd @ kd.transpose(1, 2)) / math.sqrt(D)).masked_fill(~same, -math.inf), dim=-1)
    return (p @ vd).transpose(0, 1), (p @ vd.abs()).transpose(0, 1)


def _dequantized(x):
    codes, scale = _independent_quantize(x)
    vals = torch.cat([_grid(), -_grid()])
    mag = vals[(codes & 0x7F).clamp(max=126)] * torch.where(codes >= 0x80, -1.0, 1.0).double()
    return mag * scale.double()[None, :, None]


@pytest.mark.parametrize("shape", [*F.OP_GROUP.interp_shapes,
                                   Shape("small_head", {"rows": 50, "heads": 3, "docs": 2})], ids=lambda s: s.name)
def test_reference_against_independent_fp64(shape):
    g = F.OP_GROUP
    if shape.name == "small_head":    # the runtime's tiny CPU models: head dim 16, softmax scale 1/4
        q, k, v = (torch.randn(50, 3, 16, generator=torch.Generator().manual_seed(i)).to(torch.bfloat16)
                   for i in range(3))
        cu = torch.tensor([0, 31, 50], dtype=torch.int32)
    else:
        q, k, v, cu = g.make_inputs(shape, 5, "cpu")
    want, term = _masked_fp64(*(_dequantized(t) for t in (q, k, v)), cu.tolist())
    ref = g.reference(q, k, v, cu)
    assert ref.dtype == torch.bfloat16 and ref.shape == q.shape and ref.is_contiguous()
    err = (ref.double() - want).abs()
    # fp32 math on the dequantised values (their fp32 products included), rounded once: within one bf16 ulp plus
    # fp32's error on the terms of the last sum (cancelling outputs), mostly the correct rounding
    assert bool((err <= check.ulp_bf16(want) + 2.0 ** -16 * term).all())
    assert (ref == want.to(torch.bfloat16)).float().mean() > 0.98
    exact, _ = _masked_fp64(q, k, v, cu.tolist())
    assert torch.allclose(g.oracle(q, k, v, cu), exact, rtol=0, atol=1e-12)
    if q.shape[2] == 128:
        assert torch.equal(g.oracle(q, k, v, cu), A.oracle(q, k, v, cu))


def test_inputs_have_per_head_magnitudes():
    """q's heads 2^16 apart (k's inverse), v's 2^4: attention's inputs scaled by exact powers of two."""
    g = F.OP_GROUP
    for shape in g.interp_shapes:
        for lay in range(g.n_layouts):
            q, k, v, cu = g.make_inputs(shape, 2, "cpu", layout=lay)
            base = A.make_inputs(shape, 2, "cpu", layout=lay)
            assert all(a.stride() == b.stride() for a, b in zip((q, k, v, cu), base))
            e = torch.tensor(F.head_exponents(shape.dims["heads"]), dtype=torch.float64)
            assert float(e[0]) == -8 and float(e[-1]) == 8
            for t, b, f in ((q, base[0], e), (k, base[1], -e), (v, base[2], torch.round(-e / 4))):
                assert torch.equal(t.double(), b.double() * torch.exp2(f)[None, :, None])
    assert F.head_exponents(1) == [0] and len(set(F.head_exponents(56))) == 17


def test_special_cases():
    """nonfinite poisons head 0 only (every output of it NaN, the other heads finite); large and subnormal keep the
    reference within the class's bounds against the exact op."""
    g = F.OP_GROUP
    plain = g.make_inputs(g.interp_shapes[0], 1, "cpu")
    for sc in g.special_cases:
        inputs = sc.apply(plain, ())
        ref, orc = g.reference(*inputs), g.oracle(*inputs)
        if sc.name == "nonfinite":
            assert bool(torch.isnan(ref[:, 0]).all()) and bool(torch.isfinite(ref[:, 1:]).all())
            assert all(bool(torch.isinf(t[:, 0].float()).any()) for t in inputs[:3])
        ok, stats, why = check.compare(ref, ref, orc, g.tolerance)
        assert ok, (sc.name, why)
        assert stats["rel_l2"] < 0.06, (sc.name, stats)
