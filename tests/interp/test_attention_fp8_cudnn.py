"""runtime/attention_fp8_cudnn.py on the CPU: its three Triton kernels under the interpreter (per-head amax, the e4m3
quotient, the output's scale) against torch, the scalar-descale scales, and the whole scheme (a torch emulation of cuDNN's FP8 graph:
e4m3 q, k, v with one score descale, P as e4m3 x 256, fp32 sums, e4m3 out, the per-head v scale after) judged by
the attention_fp8 class on every interpreter shape, layout and special case. cuDNN itself runs only on the GPU
(tests/unit/test_attention_fp8_cudnn_gpu.py)."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from rsi.harness import check
from rsi.refs import attention_fp8 as F
from rsi.refs import get_op_group
from rsi.refs.fp8_common import e4m3
from runtime import attention_fp8_cudnn as C

pytestmark = pytest.mark.interpreter
OP = "attention_fp8"


def _heads(seed=3):
    """67 rows x 7 heads: the op's three 2^16-apart heads, a zero head, a bf16-subnormal head, a NaN head and an Inf
    head."""
    q = F.make_inputs(get_op_group(OP).interp_shapes[1], seed, "cpu")[0].contiguous()        # 67 rows, 3 heads
    x = torch.cat([q, torch.zeros_like(q[:, :1]), (q[:, :1].float() * 1e-39).to(q.dtype), q[:, :1], q[:, :1]], 1)
    x[5, 5, 7] = math.nan
    x[9, 6, 3] = -math.inf
    return x


def test_head_amax_matches_torch_on_a_strided_view():
    x = _heads()
    view = torch.cat([x, x], dim=2)[:, :, 3:3 + x.shape[2]]       # non-contiguous rows and heads
    view.copy_(x)
    got = C.head_amax(view)
    want = x.float().abs().amax(dim=(0, 2))
    assert torch.equal(torch.isnan(got), torch.isnan(want)) and bool(torch.isnan(got[5]))
    assert bool(torch.isinf(got[6])) and got[3] == 0
    fin = torch.isfinite(want)
    assert torch.equal(got[fin], want[fin])
    assert torch.equal(C.head_amax(x[:0]), torch.zeros(x.shape[1]))


def test_dequantise_is_the_scaled_product():
    """Plain and lifted (< 2^-100: the product is taken with scale x 2^64, then x 2^-64, exactly) scales, NaN."""
    o8 = e4m3(torch.randn(37, 4, 16) * 50)
    s = torch.tensor([2.0 ** -3, 0.37, 2.0 ** -118 / 448, math.nan])
    got = C.dequantise(o8, s)
    want = (o8.double() * s.double()[None, :, None]).to(torch.bfloat16)
    assert got.dtype == torch.bfloat16 and torch.equal(got[:, :3], want[:, :3]) and bool(got[:, 3].isnan().all())
    assert float(got[:, 2].float().abs().max()) > 0                      # the lifted head is not flushed


def test_quantise_is_the_rounded_quotient():
    """e4m3(x / s_h) with the IEEE quotient, saturating at 448, NaN kept: bitwise against fp8_common's cast."""
    x = _heads()
    s = torch.tensor([2.0 ** -10, 0.013, 0.5, 1.0, 1e-41, 0.004, 0.02], dtype=torch.float32)   # head 2 saturates
    got = C.quantise(x, s)
    want = e4m3(x.float() / s[None, :, None])
    assert got.is_contiguous() and got.dtype == torch.float8_e4m3fn
    nan = torch.isnan(want.float())
    assert torch.equal(torch.isnan(got.float()), nan)
    assert torch.equal(got.view(torch.uint8)[~nan], want.view(torch.uint8)[~nan])
    assert float(got.float()[:, 2].abs().max()) == 448.0 and float(x[:, 2].float().abs().max() / 0.5) > 464


def test_scales_share_one_score_descale():
    aq = torch.tensor([2.0 ** 8, 2.0 ** -8, 3.0, 0.0, 5.0, math.nan, 1.0])
    ak = torch.tensor([2.0 ** -8, 2.0 ** 8, 0.5, 2.0, 0.0, 1.0, 1.0])
    av = torch.tensor([1.0, 2.0, 0.0, 4.0, 1.0, 1.0, math.inf])
    sq, sk, sv, c, bad = C.scales(aq, ak, av)
    assert bad.tolist() == [False, False, False, False, False, True, True]
    p = aq * ak
    live = (p > 0) & ~bad
    assert torch.allclose((sq * sk)[live].double(), c.double().expand(int(live.sum())), rtol=1e-6)
    assert math.isclose(float(c), 1.5 / 448 ** 2, rel_tol=1e-6)          # the largest finite product, 3 x 0.5
    assert float((aq / sq)[2]) == pytest.approx(448) and float((ak / sk)[2]) == pytest.approx(448)
    assert bool(((aq / sq)[live] <= 448 * (1 + 1e-6)).all()) and bool(((ak / sk)[live] <= 448 * (1 + 1e-6)).all())
    assert sq[3] == 1 and sk[3] == pytest.approx(2 / 448) and sq[4] == pytest.approx(5 / 448) and sk[4] == 1
    assert sv.tolist()[:3] == pytest.approx([1 / 448, 2 / 448, 1.0]) and sv[5] == 1 and sv[6] == 1
    assert C.scales(*(torch.zeros(2),) * 3)[3].item() == 1.0         # all zero: any descale, 1
    tiny = torch.tensor([1e-39, 2e-39])                                  # bf16 subnormals: c floored at 2^-100
    assert C.scales(tiny, tiny, tiny)[3].item() == 2.0 ** -100


def emulate(q, k, v, cu):
    """What the cuDNN graph computes, in torch (module docstring): P = exp(s - row max) rounded to e4m3 x 256, the
    output rounded to e4m3, then bf16(O8 x sv_h)."""
    S, H, D = q.shape
    sq, sk, sv, c, bad = C.scales(C.head_amax(q), C.head_amax(k), C.head_amax(v))
    q8, k8, v8 = (C.quantise(t, s).float() for t, s in ((q, sq), (k, sk), (v, sv)))
    out = torch.zeros((S, H, D), dtype=torch.float8_e4m3fn, device=q.device)
    for a, b in itertools.pairwise(int(x) for x in cu.tolist()):
        if b <= a:
            continue
        qd, kd, vd = (t[a:b].transpose(0, 1) for t in (q8, k8, v8))
        s = (qd @ kd.transpose(1, 2)) * (c * (1.0 / math.sqrt(D)))
        p = torch.exp(s - s.amax(-1, keepdim=True))
        p8 = e4m3(p * C.S_SCALE).float()
        o = (p8 @ vd) / C.S_SCALE / p.sum(-1, keepdim=True)
        out[a:b] = e4m3(o.transpose(0, 1))                   # cuDNN's FP8 output on Hopper, scale_o 1
    return C.dequantise(out, torch.where(bad, torch.full_like(sv, math.nan), sv))


def _judge(out, inputs):
    g = get_op_group(OP)
    return check.compare(out, g.reference(*inputs), g.oracle(*inputs), g.tolerance)


def test_the_scheme_passes_the_class_everywhere():
    """Every interpreter shape and layout, every special case on the first shape; within 1.35x the reference's
    rel-L2 (measured 1.21-1.30x: e4m3 P, as the op group's FA3-style template, and the e4m3 output), 1.55x on the
    subnormal case (measured 1.53x: uniform attention, where the reference's v rounding averages out to 0.025 and
    the output's one e4m3 rounding does not; the class's own limit there is 1.54x)."""
    g = get_op_group(OP)
    for shape in g.interp_shapes:
        for lay in range(g.n_layouts):
            plain = g.make_inputs(shape, 1, "cpu", layout=lay)
            cases = (None, *g.special_cases) if (lay == 0 and shape is g.interp_shapes[0]) else (None,)
            for sc in cases:
                inputs = plain if sc is None else sc.apply(plain, ())
                ok, stats, why = _judge(emulate(*inputs), inputs)
                assert ok, (shape.name, lay, sc and sc.name, why)
                if sc is None or sc.name != "zeros":
                    limit = 1.55 if sc is not None and sc.name == "subnormal" else 1.35
                    assert stats["rel_l2"] <= limit * stats["ref_rel_l2"], (shape.name, lay, sc and sc.name, stats)


def test_one_descale_without_the_balance_fails():
    """The same graph with per-tensor q and k scales (one amax over all heads) flushes the small heads: rejected."""
    g = get_op_group(OP)
    inputs = g.make_inputs(g.interp_shapes[0], 2, "cpu")
    real = C.scales

    def per_tensor(aq, ak, av):
        sq, sk, sv, _, bad = real(aq, ak, av)
        tq, tk = float(aq.max()) / 448, float(ak.max()) / 448
        return torch.full_like(sq, tq), torch.full_like(sk, tk), sv, torch.tensor([tq * tk]), bad

    C.scales = per_tensor
    try:
        ok, stats, _ = _judge(emulate(*inputs), inputs)
    finally:
        C.scales = real
    assert not ok, stats


def test_a_document_cudnn_cannot_take_runs_in_torch():
    """One query row (no cuDNN plan on Hopper): the graph's arithmetic in torch; one key gives that key's v row.
    With many keys it is the emulation of the graph but for P (fp32 here, e4m3 x 256 there), and the descale
    matters (c = 1 instead of the scheme's c is far off)."""
    x = e4m3(torch.randn(1, 3, 16) * 100)
    out = C._emulated(x, x, x, torch.tensor([1e-3]), 16)
    assert out.dtype == torch.float8_e4m3fn and torch.equal(out.view(torch.uint8), x.view(torch.uint8))
    g = get_op_group(OP)
    q, k, v, _ = g.make_inputs(g.interp_shapes[1], 5, "cpu")                     # 67 rows, 3 heads, one document
    cu = torch.tensor([0, q.shape[0]], dtype=torch.int32)
    sq, sk, sv, c, _ = C.scales(C.head_amax(q), C.head_amax(k), C.head_amax(v))
    q8, k8, v8 = C.quantise(q, sq), C.quantise(k, sk), C.quantise(v, sv)
    want = emulate(q, k, v, cu).float()
    for cc, close in ((c, True), (torch.ones(1), False)):
        got = C.dequantise(C._emulated(q8, k8, v8, cc, q.shape[2]), sv).float()
        d = float((got - want).norm() / want.norm())
        assert (d < 0.05) is close, (float(cc), d)
