"""swiglu_fp8's incumbent is the path the runtime runs without the fused kernel (ATen swiglu, then the compiled
quantiser): it must pass vetting in its own class on the op group's inputs, so that it is timed and a fused kernel
slower than it is not promoted (H200 run 31 promoted one 3.4x slower than the bf16 swiglu kernel before it existed),
and vetting must still drop it where it is far off (a whole row at F.silu's fp32 exp overflow: scale 1 and -0
bytes against silu_c's tiny values at full scale). The compiled quantiser is
replaced by the eager one here (the same function; torch.compile on the CPU would cost a C++ build)."""

from __future__ import annotations

import torch

from rsi.harness import incumbents
from rsi.refs import fp8_common, get_op_group
from rsi.refs import swiglu_fp8 as SF


def _eager_quantiser(monkeypatch):
    monkeypatch.setattr(SF, "quantize_rows_compiled", lambda: fp8_common.quantize_rows)


def test_incumbent_is_declared_and_vetted_on_the_ops_inputs(monkeypatch):
    _eager_quantiser(monkeypatch)
    op = get_op_group("swiglu_fp8")
    assert [b.name for b in op.baselines] == ["swiglu_then_quantize"]
    for shape in op.interp_shapes:
        inputs = op.make_inputs(shape, 7, "cpu")
        passed, report = incumbents.vet(op, op.tolerance, inputs)
        assert [b.name for b in passed] == ["swiglu_then_quantize"], report
        r = report["swiglu_then_quantize"]
        assert r["timed"] and r["class"]["class"] == "unfused rounding" and r["error"]["rel_l2"] <= 1e-2


def test_incumbent_dropped_where_its_bytes_differ(monkeypatch):
    _eager_quantiser(monkeypatch)
    op = get_op_group("swiglu_fp8")
    (x,) = op.make_inputs(op.interp_shapes[0], 7, "cpu")[:1]
    F = x.shape[1] // 2
    x = x.clone()
    x[0, :F] = -93.0            # F.silu's fp32 exp(93) overflows: -0 where silu_c gives about -3.5e-39
    x[0, F:] = 1.0              # so row 0's amax is 0 (scale 1, bytes -0) for ATen, 3.5e-39 (bytes -448) for silu_c
    passed, report = incumbents.vet(op, op.tolerance, (x,))
    assert passed == [] and not report["swiglu_then_quantize"]["timed"]
    assert "unfused rounding" in report["swiglu_then_quantize"]["reason"]


def test_quantiser_compiled_is_cached():
    assert fp8_common.quantize_rows_compiled() is fp8_common.quantize_rows_compiled()


def test_head_merge_fp8_incumbent_in_its_own_class(monkeypatch):
    """head_merge_fp8's unfused path (the merge, then the quantiser) is vetted in "unfused rounding", not the op's
    bitwise class (on CUDA Inductor's division moves some bytes, H200 run 33), and passes at every world size of the
    interpreter shapes; with the eager quantiser on the CPU its bytes are the reference's (zero error). A quantiser
    that zeroes the bytes fails it."""
    from rsi.refs import head_merge_fp8 as HF

    monkeypatch.setattr(HF, "quantize_rows_compiled", lambda: fp8_common.quantize_rows)
    op = get_op_group("head_merge_fp8")
    assert [b.name for b in op.baselines] == ["merge_then_quantize"]
    assert op.baselines[0].tolerance is fp8_common.UNFUSED_CLASS and op.tolerance.name == "bitwise"
    for shape in op.interp_shapes:
        passed, report = incumbents.vet(op, op.tolerance, op.make_inputs(shape, 3, "cpu"))
        assert [b.name for b in passed] == ["merge_then_quantize"], report
        r = report["merge_then_quantize"]
        assert r["class"]["class"] == "unfused rounding" and r["error"]["max_abs"] == 0.0, r
    def zeroed(h):
        h8, scale = fp8_common.quantize_rows(h)
        return torch.zeros_like(h8), scale

    monkeypatch.setattr(HF, "quantize_rows_compiled", lambda: zeroed)
    passed, report = incumbents.vet(op, op.tolerance, op.make_inputs(op.interp_shapes[-1], 3, "cpu"))
    assert passed == [] and "unfused rounding" in report["merge_then_quantize"]["reason"], report
