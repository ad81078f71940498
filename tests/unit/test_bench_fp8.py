"""runtime.bench_fp8's code paths on the CPU at tiny sizes (the timing loop replaced by a host-clock stand-in; the
figures themselves come from the H200): every linear and producer row is built, the fp8 linear's error is an fp8
error (not zero, not bf16-sized), and the fallbacks are named."""

from __future__ import annotations

import time

import pytest
import torch

from rsi.harness import timing as T
from rsi.refs import fp8_common
from runtime import bench_fp8
from runtime.kernels import Kernels


def _host_timed(impls, input_sets, warmup=0, reps=2, sync_reps=0, device="cpu", seed=0):
    out = {}
    for name, fn in impls.items():
        s = T.Samples(name)
        for r in range(reps):
            t0 = time.perf_counter()
            fn(*input_sets[r % len(input_sets)])
            s.times_us.append((time.perf_counter() - t0) * 1e6)
        out[name] = s
    return out


@pytest.fixture
def cpu_bench(monkeypatch, tmp_path):
    monkeypatch.setattr(T, "time_interleaved", _host_timed)
    monkeypatch.setattr(bench_fp8, "LINEARS", (("qkv", 64, 96), ("fc2", 128, 32)))
    # the eager quantiser for the unfused path (torch.compile on the CPU would cost a C++ build)
    monkeypatch.setattr(fp8_common, "quantize_rows_compiled", lambda dynamic=False: fp8_common.quantize_rows)
    return Kernels("verified", root=tmp_path, target=None)


def test_linear_rows_on_the_cpu(cpu_bench):
    rows = bench_fp8.bench_linears(16, cpu_bench, 2, torch.device("cpu"), 0)
    assert [r["layer"] for r in rows] == ["qkv", "fc2"]
    for r in rows:
        assert r["fp8"]["lossy"] and r["speedup_fp8_over_bf16"] > 0
        assert 1e-3 < r["fp8"]["error"]["rel_l2"] < 0.1 and r["bf16"]["error"]["rel_l2"] < 1e-2
        assert r["fp8_impl"] == "scaled_mm_or_reference"   # no lock in tmp_path: the runtime's fallback


def test_producer_rows_on_the_cpu(cpu_bench):
    # the interpreter shapes, not the production ones, on the CPU
    rows = bench_fp8.bench_producers(cpu_bench, 2, torch.device("cpu"), shapes_of=lambda op: op.interp_shapes[:1])
    assert [r["pair"] for r in rows] == [f"{a} -> {b}" for a, b in bench_fp8.PRODUCERS]
    assert all(r["ratio_fp8_over_bf16"] > 0 and r[r["pair"].split(" -> ")[1]]["impl"] == "reference" for r in rows)
    for r in rows:   # the runtime's path without the producer: the bf16 op, then the compiled quantiser
        base = r["pair"].split(" -> ")[0]
        assert r["ratio_fp8_over_unfused"] > 0 and r[f"{base}+quantize"]["impl"].startswith(r[base]["impl"])
