"""The physics gate (rsi.harness.gates): bandwidth over the copy measured in the same run, FLOP/s over the target's
peak, CUDA-event time over the host wall clock, work hidden from the timed stream. Each check, broken or removed,
fails a test here; every reason names the bucket and the numbers."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from rsi.harness.gates import physics_gate, resolve_peak
from rsi.targets import TARGETS, peak_tflops

COPY = {"gbps": 4000.0, "p50_us": 1000.0, "bytes": 4_000_000_000}
ROWS, FFN = 10_000, 10_000
NBYTES = 6 * ROWS * FFN  # 600 MB: 150 us at the copy bandwidth


def _op(flops: int = 0, kind: str | None = None):
    op = SimpleNamespace(name="fake", bytes_moved=lambda s: 6 * s.dims["rows"] * s.dims["ffn"],
                         flops=lambda s: flops)
    if kind is not None:
        op.flops_kind = kind
    return op


def _row(bucket: str = "stage1", p50: float = 200.0, **over) -> dict:
    row = {"shape": {"name": bucket, "dims": {"rows": ROWS, "ffn": FFN}}, "bucket": bucket, "p50_us": p50,
           "wall_min_ratio": 1.3, "event_sum_us": 40 * p50, "wall_sum_us": 40 * p50 * 1.5, "hidden_work_gap_us": 5.0}
    row.update(over)
    return row


H200 = {"target": "h200"}


def test_honest_rows_pass():
    assert physics_gate([_row("a"), _row("b", p50=160.0)], _op(), COPY, H200) == ""
    # 1.04x the copy bandwidth is still allowed (same-bytes copies measured 100-102% on the H200)
    p50 = NBYTES / (1.04 * COPY["gbps"] * 1e9) * 1e6
    assert physics_gate([_row("a", p50=p50)], _op(), COPY, H200) == ""


def test_bandwidth_over_the_copy_is_rejected():
    why = physics_gate([_row("a"), _row("fast", p50=100.0)], _op(), COPY, H200)  # 6000 GB/s vs 4000
    assert "fast" in why and "6000 GB/s" in why and "4000 GB/s" in why and "1.05" in why
    p50 = NBYTES / (1.06 * COPY["gbps"] * 1e9) * 1e6
    assert "bandwidth" in physics_gate([_row("a", p50=p50)], _op(), COPY, H200)
    # the factor is a parameter
    assert physics_gate([_row("a", p50=p50)], _op(), COPY, {**H200, "copy_factor": 1.1}) == ""


def test_no_copy_bandwidth_or_no_time_is_rejected():
    assert "copy bandwidth" in physics_gate([_row()], _op(), {}, H200)
    assert "copy bandwidth" in physics_gate([_row()], _op(), {"gbps": float("nan")}, H200)
    assert "stage1" in physics_gate([_row(p50=0.0)], _op(), COPY, H200)
    assert physics_gate([], _op(), COPY, H200) != ""


def test_flops_over_the_cuda_core_peak_are_rejected():
    # 20 GFLOP in 200 us = 100 TFLOP/s: over the H200's 67 TFLOP/s fp32 CUDA-core peak, bandwidth fine
    op = _op(flops=20_000_000_000)
    why = physics_gate([_row("per_rank")], op, COPY, H200)
    assert "per_rank" in why and "100.0 TFLOP/s" in why and "CUDA-core" in why and "67" in why and "h200" in why
    # explicitly elementwise: same
    assert "CUDA-core" in physics_gate([_row()], _op(flops=20_000_000_000, kind="cuda"), COPY, H200)
    # 10 GFLOP in 200 us = 50 TFLOP/s: under the peak
    assert physics_gate([_row()], _op(flops=10_000_000_000), COPY, H200) == ""


def test_tensor_flops_use_the_tensor_core_peak():
    op = _op(flops=20_000_000_000, kind="tensor")  # 100 TFLOP/s: fine for tensor cores
    assert physics_gate([_row()], op, COPY, H200) == ""
    op = _op(flops=220_000_000_000, kind="tensor")  # 1100 TFLOP/s > 989
    why = physics_gate([_row("full")], op, COPY, H200)
    assert "full" in why and "1100.0 TFLOP/s" in why and "tensor-core" in why and "989" in why
    # fp8 matmul: the same 1100 TFLOP/s is under the fp8 peak (1979); 2200 is not
    assert physics_gate([_row("full")], _op(flops=220_000_000_000, kind="tensor_fp8"), COPY, H200) == ""
    why = physics_gate([_row("full")], _op(flops=440_000_000_000, kind="tensor_fp8"), COPY, H200)
    assert "dense fp8" in why and "1979" in why


def test_peak_override_and_unknown_kind():
    op = _op(flops=10_000_000_000)  # 50 TFLOP/s
    assert "override" in physics_gate([_row()], op, COPY, {"peak_tflops": 40})
    assert physics_gate([_row()], op, COPY, {"peak_tflops": 60}) == ""
    assert "flops_kind" in physics_gate([_row()], _op(flops=1, kind="sparse"), COPY, H200)


def test_peak_without_a_target_is_the_loosest_of_the_registry(monkeypatch):
    import rsi.targets as T

    monkeypatch.setattr(T, "detect_local", lambda: None)
    peak, what = resolve_peak("cuda", {})
    assert peak == max(t.fp32_tflops for t in TARGETS.values()) and "registry" in what
    monkeypatch.setattr(T, "detect_local", lambda: TARGETS["h100"])
    assert resolve_peak("tensor", {}) == (989, "h100 tensor-core dense bf16 peak (spec)")


def test_target_peaks():
    assert peak_tflops("h200", "tensor") == 989 and peak_tflops("h200", "cuda") == 67
    assert peak_tflops("h200", "tensor_fp8") == 1979
    assert peak_tflops(TARGETS["h100"], "cuda") == 67
    assert all(t.fp32_tflops > 0 and t.bf16_tflops > t.fp32_tflops for t in TARGETS.values())
    with pytest.raises(ValueError):
        peak_tflops("h200", "fp64")


def test_event_time_longer_than_the_wall_clock_is_rejected():
    why = physics_gate([_row("a"), _row("w8", wall_min_ratio=0.8)], _op(), COPY, H200)
    assert "w8" in why and "0.800" in why and "wall-clock" in why
    assert physics_gate([_row(wall_min_ratio=1.0)], _op(), COPY, H200) == ""
    why = physics_gate([_row("w4", event_sum_us=9000.0, wall_sum_us=8000.0)], _op(), COPY, H200)
    assert "w4" in why and "9000.0" in why and "8000.0" in why
    # missing or non-finite wall-clock evidence fails closed
    for bad in ({"wall_min_ratio": None}, {"wall_min_ratio": float("nan")}, {"wall_sum_us": None}):
        assert "stage1" in physics_gate([_row(**bad)], _op(), COPY, H200)
    row = _row()
    del row["wall_min_ratio"]
    assert "wall" in physics_gate([row], _op(), COPY, H200)


def test_hidden_work_is_rejected():
    assert physics_gate([_row(hidden_work_gap_us=60.0)], _op(), COPY, H200) == ""  # limit max(50, 100)
    why = physics_gate([_row("w2", hidden_work_gap_us=120.0)], _op(), COPY, H200)
    assert "w2" in why and "120.0" in why and "hidden" in why
    # half the kernel's own time
    why = physics_gate([_row("mid", p50=160.0, hidden_work_gap_us=85.0)], _op(), COPY, H200)
    assert "mid" in why and "85.0" in why and "80.0" in why
    # small kernels: the 50 us floor
    small = {"name": "small", "dims": {"rows": 100, "ffn": 100}}
    assert physics_gate([_row("small", p50=20.0, hidden_work_gap_us=45.0, shape=small)], _op(), COPY, H200) == ""
    why = physics_gate([_row("small", p50=20.0, hidden_work_gap_us=55.0, shape=small)], _op(), COPY, H200)
    assert "small" in why and "55.0" in why and "50.0" in why
    assert "stage1" in physics_gate([_row(hidden_work_gap_us=None)], _op(), COPY, H200)


def test_attention_is_gated_by_the_tensor_core_peak():
    """The attention op group declares its FLOPs as tensor-core work: cuDNN's measured 73.9 ms at h3_full (~570
    TFLOP/s, ANCHORS.md section f) passes on the H200 (989 dense bf16 TFLOP/s, spec); 30 ms (1,395 TFLOP/s) fails.
    Against the fp32 CUDA-core peak (67) the honest time would have been rejected."""
    from rsi.refs import get_op_group

    op = get_op_group("attention")
    assert op.flops_kind == "tensor"
    shape = next(s for s in op.shapes if s.name == "h3_full")

    def row(p50):
        return {**_row("h3_full", p50=p50), "shape": shape.to_json()}

    assert physics_gate([row(73_900.0)], op, COPY, H200) == ""
    why = physics_gate([row(30_000.0)], op, COPY, H200)
    assert "tensor-core" in why and "h3_full" in why
    assert "CUDA-core" in physics_gate([row(73_900.0)], SimpleNamespace(bytes_moved=op.bytes_moved, flops=op.flops),
                                       COPY, H200)
