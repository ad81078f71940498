"""The Ulysses wire formats (runtime/wire.py) against H3_SPEC.md section 5: record sizes and byte layout, the
UE5M3 scale (mantissa rounded up, exponent range), round-half-away values, round-trip error bounds, special values,
and the byte projection."""

from __future__ import annotations

import math

import pytest
import torch

from runtime import wire as W


def _x(*shape, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g) * scale).to(torch.bfloat16)


def test_ue5m3_scale_is_amax_over_127_rounded_up_to_three_mantissa_bits():
    amax = torch.tensor([127.0, 127.0 * 1.1, 127.0 * 1.125, 127.0 * 1.126, 1.0, 3e-5, 0.0, 1e9])
    s = W.ue5m3_decode(W.ue5m3_encode(amax))
    assert s[0] == 1.0 and s[1] == 1.125 and s[2] == 1.125 and s[3] == 1.25
    exact = amax[:4] / 127
    assert (s[:4] >= exact).all() and (s[:4] <= exact * 1.125).all()
    assert s[6] == 2.0 ** -15 and s[7] == 2.0 ** 16 * 1.875            # the range's ends
    codes = W.ue5m3_encode(amax)
    assert codes[0] == (0 + 15) << 3 and codes[1] == ((0 + 15) << 3 | 1)
    # every representable scale encodes back to itself (amax exactly 127 * scale)
    every = torch.arange(256, dtype=torch.uint8)
    assert torch.equal(W.ue5m3_encode(W.ue5m3_decode(every) * 127), every)


def test_values_round_half_away_and_stay_in_range():
    x = torch.tensor([[0.5, -0.5, 1.5, -2.5, 127.0] + [0.0] * 27 + [0.0] * 96], dtype=torch.float32)
    vals, codes = W.int8_groups(x)
    assert W.ue5m3_decode(codes)[0, 0] == 1.0
    assert (vals[0, :5].to(torch.int32) - 127).tolist() == [1, -1, 2, -3, 127]
    assert vals.dtype == torch.uint8 and vals.shape == (1, 128) and codes.shape == (1, 4)


def test_qkv_record_layout_and_round_trip():
    q, k, v = _x(5, 3, 128, seed=1), _x(5, 3, 128, seed=2, scale=30.0), _x(5, 3, 128, seed=3, scale=1e-3)
    rec = W.encode_qkv(q, k, v)
    assert rec.shape == (5, 3, W.QKV_RECORD) and rec.dtype == torch.uint8
    assert (rec[..., 396:] == 0).all()
    vals, codes = W.int8_groups(k)
    assert torch.equal(rec[..., 128:256], vals) and torch.equal(rec[..., 388:392], codes)
    dec = W.decode_qkv(rec, torch.float32)
    for i, t in enumerate((q, k, v)):
        got, ref = dec[..., i * 128:(i + 1) * 128], t.float()
        step = W.ue5m3_decode(W.int8_groups(t)[1]).repeat_interleave(32, -1)
        assert ((got - ref).abs() <= step / 2 + 1e-12).all()                 # half a step per element
        rel = ((got - ref).norm() / ref.norm()).item()
        assert 1e-4 < rel < 1.5e-2


def test_output_records_int8_and_fp8():
    o = _x(7, 2, 128, seed=4, scale=4.0)
    rec = W.encode_out(o)
    assert rec.shape == (7, 2, W.OUT_RECORD) and (rec[..., 132:] == 0).all()
    assert ((W.decode_out(rec, torch.float32) - o.float()).norm() / o.float().norm()).item() < 1.5e-2
    f8 = W.encode_fp8_out(o * 1000)                                       # saturates at 448
    assert f8.shape == (7, 2, W.FP8_OUT_RECORD) and f8.dtype == torch.uint8
    back = W.decode_fp8_out(f8, torch.float32)
    assert back.abs().max().item() == 448.0
    small = W.decode_fp8_out(W.encode_fp8_out(o), torch.float32)
    assert 1e-3 < ((small - o.float()).norm() / o.float().norm()).item() < 0.05


def test_zero_and_nonfinite_groups():
    z = torch.zeros(1, 128)
    assert torch.equal(W.decode_out(W.encode_out(z), torch.float32), z)
    x = torch.ones(1, 128)
    x[0, 3] = math.inf
    dec = W.decode_out(W.encode_out(x), torch.float32)
    assert torch.isfinite(dec).all() and dec[0, 3] > 0                   # Inf clamps to the largest value, as codes do
    x[0, 3] = math.nan
    dec = W.decode_out(W.encode_out(x), torch.float32)
    assert dec[0, 3] == 0 and ((dec[0, 4:] - 1).abs() < 0.0045).all()   # NaN is sent as 0; its group unharmed


def test_projection_and_bytes():
    b = W.exchange_bytes("int8", 19136, 56, 2)
    assert b == {"qkv": 19136 * 56 * 400 // 2, "out": 19136 * 56 * 144 // 2}
    bf = W.exchange_bytes("bf16", 19136, 56, 2)
    assert bf["qkv"] == 19136 * 56 * 768 // 2 and W.exchange_bytes("fp8", 19136, 56, 2)["out"] * 2 == bf["out"]
    assert W.projected_seconds(50 * 10**9, 50.0) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="wire 'x'"):
        W.exchange_bytes("x", 1, 1, 2)
    with pytest.raises(ValueError, match="positive"):
        W.projected_seconds(1, 0)
