"""runtime.bench_attention's code paths on the CPU at an interpreter shape (the timing loop replaced by a host-clock
stand-in, SDPA's default backend standing in for the SDPA backends, the torch emulation of the scheme for cuDNN's
FP8 attention; the figures come from the H200): every row is built with its error against the exact op, the lossy
rows say so and carry their error against the fp8 reference, and the CPU is refused by main."""

from __future__ import annotations

import pytest
import torch

from rsi.contract import Baseline
from rsi.harness import timing as T
from rsi.refs import attention_baselines
from runtime import bench_attention
from runtime.attention import sdpa_documents
from runtime.kernels import Kernels
from tests.interp.test_attention_fp8_cudnn import emulate
from tests.unit.test_bench_fp8 import _host_timed


def test_rows_on_the_cpu(monkeypatch, tmp_path):
    monkeypatch.setattr(T, "time_interleaved", _host_timed)
    sdpa = (lambda q, k, v, cu: (q, k, v, cu)), sdpa_documents
    def fa4_missing(*a):
        raise ModuleNotFoundError("No module named 'flash_attn'")

    monkeypatch.setattr(attention_baselines, "BASELINES",
                        (*(Baseline(n, sdpa[1], sdpa[0]) for n in ("sdpa_cudnn", "sdpa_flash")),
                         Baseline("fa4", fa4_missing, sdpa[0])))
    monkeypatch.setattr(attention_baselines, "cudnn_fp8", lambda q, k, v, bounds: emulate(
        q, k, v, torch.tensor(bounds, dtype=torch.int32)))
    res = bench_attention.bench("two_docs", Kernels("verified", root=tmp_path, target=None), 3, torch.device("cpu"))
    rows = {r["impl"]: r for r in res["rows"]}
    assert list(rows) == ["sdpa_cudnn", "sdpa_cudnn_aa", "sdpa_flash", "attention", "cudnn_fp8", "attention_fp8"]
    assert res["left_out"]["fa4"] == "ModuleNotFoundError: No module named 'flash_attn'"     # left out, said why
    assert res["flop"] > 0 and res["aa_band"] >= 0 and "speedup_vs_sdpa_cudnn" not in rows["sdpa_cudnn"]
    for name in ("sdpa_cudnn", "sdpa_flash", "attention"):
        assert not rows[name]["lossy"] and rows[name]["error_vs_exact"]["rel_l2"] < 5e-3
    for name in ("cudnn_fp8", "attention_fp8"):
        r = rows[name]
        assert r["lossy"] and 5e-3 < r["error_vs_exact"]["rel_l2"] < 0.1 and r["error_vs_exact"]["cosine"] > 0.99
        assert r["error_vs_fp8_reference"]["rel_l2"] < 0.1
        assert len(r["speedup_vs_sdpa_cudnn"]["ci95"]) == 2 and r["tflops"] > 0
    # on the CPU --attention fp8 falls back to the op group's reference (no cuDNN)
    assert rows["attention_fp8"]["error_vs_fp8_reference"]["rel_l2"] == 0
    assert rows["cudnn_fp8"]["error_vs_fp8_reference"]["rel_l2"] > 0
    assert rows["attention_fp8"]["kernel"] == "fp8_reference" and rows["attention"]["kernel"] == "sdpa_documents"


def test_unknown_shape_and_no_gpu(tmp_path, monkeypatch):
    with pytest.raises(SystemExit, match="unknown attention_fp8 shape"):
        bench_attention.bench("nope", Kernels("verified", root=tmp_path, target=None), 2, torch.device("cpu"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert bench_attention.main(["--out", str(tmp_path / "x.json")]) == 2
