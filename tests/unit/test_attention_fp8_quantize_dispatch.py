"""rsi/templates/attention_fp8_cute.py's quantisation dispatch: with QVEC 1, 2 or 3 the vectorised passes (32-bit
offsets) run only on inputs spanning fewer than 2**31 - 1 elements; a view of a fused buffer at the op's huge shape
(layout 0's v: 100,352 rows with a row stride of 3 x 56 x 128) takes the scalar passes (64-bit strides). H200 run 71's
first judged QVEC 1 candidate had no such guard and made every output NaN there. The launches are recorded, not run
(meta tensors); skipped without the [cute] extra, which the template imports."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

pytest.importorskip("cutlass.cute", reason="CuTe DSL is not installed (pip install -e '.[cute]')")

TEMPLATE = Path(__file__).resolve().parents[2] / "rsi" / "templates" / "attention_fp8_cute.py"


def _calls(monkeypatch, q, k, v, QVEC):
    spec = importlib.util.spec_from_file_location("tpl_attention_fp8_cute_dispatch", TEMPLATE)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    seen = []
    monkeypatch.setattr(m.K, "cute_launch", lambda fn, *a, **c: seen.append((fn.__name__, a[0] is v, c)))
    monkeypatch.setattr(m.K, "cute_launch_dynamic", lambda fn, *a, **c: seen.append((fn.__name__, a[0] is v, c)))
    S, H, D = q.shape
    meta = {"device": "meta"}
    cu = torch.zeros(3, dtype=torch.int32, **meta)
    m._quantize(q, k, v, cu, torch.empty(3, H, m.AMAX_CTAS, **meta), torch.empty(3, H, **meta),
                torch.empty(S, H, D, dtype=torch.float8_e4m3fn, **meta), torch.empty(S, H, D, dtype=torch.float8_e4m3fn, **meta),
                torch.empty(H, D, S + 96, dtype=torch.float8_e4m3fn, **meta), QVEC=QVEC)
    return seen


def _inputs(S, H=56, D=128):
    q = torch.empty(S, H, D, dtype=torch.bfloat16, device="meta")
    fused = torch.empty(S, 3 * H * D, dtype=torch.bfloat16, device="meta")
    return q, q.clone(), fused[:, 2 * H * D:].view(S, H, D)      # v: layout 0's column view of a fused buffer


@pytest.mark.parametrize("QVEC", [1, 2, 3])
def test_a_view_past_2_31_takes_the_scalar_passes(monkeypatch, QVEC):
    seen = _calls(monkeypatch, *_inputs(100_352), QVEC)
    assert {n for n, is_v, _ in seen if is_v} == {"_amax_host", "_quant_vt_host"}          # v: 64-bit strides
    assert {n for n, is_v, _ in seen if not is_v} == {"_amax_vec_host", "_quant_rows_vec_host"}   # q, k: < 2**31


@pytest.mark.parametrize("QVEC, vt_first, batch", [(1, False, 1), (2, True, 1), (3, True, 8)])
def test_production_shapes_take_the_vectorised_passes(monkeypatch, QVEC, vt_first, batch):
    seen = _calls(monkeypatch, *_inputs(38_272), QVEC)
    assert {n for n, _, _ in seen} == {"_amax_vec_host", "_quant_rows_vec_host", "_quant_vt_vec_host"}
    assert [c for n, _, c in seen if n == "_quant_vt_vec_host"] == [{"LOADS_FIRST": vt_first}]
    # QVEC 3: the amax and row passes load 8 vectors a thread before using any
    assert [c for n, _, c in seen if n != "_quant_vt_vec_host"] == [{"BATCH": batch}] * 5


def test_qvec_0_takes_the_scalar_passes(monkeypatch):
    seen = _calls(monkeypatch, *_inputs(38_272), 0)
    assert {n for n, _, _ in seen} == {"_amax_host", "_quant_rows_host", "_quant_vt_host"}
