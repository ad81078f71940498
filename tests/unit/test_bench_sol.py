"""runtime.bench_sol's code paths on the CPU at an interpreter shape (the timing loop replaced by a host-clock
stand-in, SDPA's default backend standing in for cuDNN, the op's reference for FlexAttention; the figures come from
the H200): every row is built, Sol's rows carry density, error and a ratio with its CI, and the CPU is refused by
main."""

from __future__ import annotations

import pytest
import torch

from rsi.harness import timing as T
from rsi.refs import attention_baselines, sol_attn
from runtime import bench_sol
from runtime.attention import sdpa_documents
from runtime.kernels import Kernels
from tests.unit.test_bench_fp8 import _host_timed


def test_rows_on_the_cpu(monkeypatch, tmp_path):
    monkeypatch.setattr(T, "time_interleaved", _host_timed)
    monkeypatch.setattr(attention_baselines, "sol_flex", sol_attn.reference)
    res = bench_sol.bench("interp_one_doc", (1.0, 1.5), Kernels("verified", root=tmp_path, target=None), 3,
                          torch.device("cpu"), dense_fn=sdpa_documents)
    names = [r["impl"] for r in res["rows"]]
    assert names == ["cudnn", "cudnn_aa", "sol@1", "sol_flex@1", "sol@1.5", "sol_flex@1.5"]
    sol = {r["impl"]: r for r in res["rows"]}
    for tau in ("1", "1.5"):
        r = sol[f"sol@{tau}"]
        assert r["lossy"] and 0 < r["density"] <= 1 and r["kernel"] == "sol_flex_or_reference"
        assert 0 < r["error_vs_cudnn"]["rel_l2"] < 1.0 and len(r["speedup_vs_cudnn"]["ci95"]) == 2
        # the fallback on the CPU is the reference itself, which is what sol_flex stands for here
        assert sol[f"sol_flex@{tau}"]["error_vs_cudnn"] == r["error_vs_cudnn"]
    assert sol["sol@1.5"]["density"] <= sol["sol@1"]["density"]    # a higher threshold keeps fewer blocks
    assert "speedup_vs_cudnn" not in sol["cudnn"] and res["aa_band"] >= 0


def test_unknown_shape_and_no_gpu(tmp_path, monkeypatch):
    with pytest.raises(SystemExit, match="unknown sol_attn shape"):
        bench_sol.bench("nope", (1.0,), Kernels("verified", root=tmp_path, target=None), 2, torch.device("cpu"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert bench_sol.main(["--out", str(tmp_path / "x.json")]) == 2
