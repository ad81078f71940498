"""Kernel dispatch: reference fallback with logged reasons, a locked verified kernel used inside its bucket,
refused on a hard environment mismatch, and the DiT running through a verified kernel."""

from __future__ import annotations

import json
import logging
import sys

import pytest
import torch

from rsi.contract import Candidate, sha256_text
from rsi.verified import lock_kernel, write_record
from runtime.kernels import Kernels, op_dims

KERNEL_SRC = '''
import torch

CALLS = []


def launch(x, scale=1.0):
    CALLS.append(tuple(x.shape))
    gate, up = x.chunk(2, dim=-1)
    return torch.nn.functional.silu(gate) * up
'''
ENV = {"compute_capability": "9.0", "triton": "3.6.0", "torch": "2.11.0", "cuda": "13.0", "driver": "580"}


def promote(root, op="swiglu", rows=64, ffn=512, cc="9.0", source=KERNEL_SRC):
    cand = Candidate(op=op, source=source, config={"scale": 1.0})
    record = {"schema": 1, "op": op, "candidate_hash": cand.hash, "source_sha256": sha256_text(source),
              "config": dict(cand.config), "search": {"parent": None}, "env": {**ENV, "compute_capability": cc},
              "shapes": [{"shape": {"name": "full", "dims": {"rows": rows, "ffn": ffn}}, "bucket": "full"}]}
    d = write_record(root, cand, "swiglu", record)
    lock_kernel(root, "h200", op, d)
    return cand, d


def module_calls(cand):
    from rsi.kernel import module_name

    return sys.modules[module_name("swiglu")].CALLS


def test_op_dims_names():
    x = torch.zeros(7, 2 * 16)
    assert op_dims("swiglu", (x,)) == {"rows": 7, "ffn": 16}
    table = torch.zeros(6, 6 * 8)
    c = table.view(6, 6, 8).unbind(1)
    h = torch.zeros(7, 8)
    assert op_dims("modulate", (h, None, c[0], c[1], None)) == {"rows": 7, "hidden": 8, "table": 6}
    assert op_dims("gate_residual_modulate", (h, c[2], h, None, c[3], c[4], None)) == {"rows": 7, "hidden": 8,
                                                                                    "table": 6}
    assert op_dims("qk_norm_rope", (torch.zeros(7, 3 * 56 * 128),)) == {"rows": 7, "heads": 56}


def test_reference_mode_logs(caplog):
    k = Kernels("reference", target=None)
    with caplog.at_level(logging.INFO, logger="runtime.kernels"):
        y = k.call("swiglu", torch.randn(4, 32).bfloat16())
        k.call("swiglu", torch.randn(4, 32).bfloat16())
    assert y.shape == (4, 16)
    assert k.summary() == [{"op": "swiglu", "dims": {"rows": 4, "ffn": 16}, "kernel": "reference",
                            "why": "--kernels reference", "calls": 2, "candidate_hash": None}]
    assert sum("swiglu rows=4 ffn=16 -> reference" in r.message for r in caplog.records) == 1   # resolved once


def test_verified_mode_without_gpu_falls_back(caplog, tmp_path):
    k = Kernels("verified", root=tmp_path, target=None, env=ENV)
    with caplog.at_level(logging.INFO, logger="runtime.kernels"):
        k.call("swiglu", torch.randn(4, 32).bfloat16())
    assert k.summary()[0]["kernel"] == "reference" and "no GPU target" in k.summary()[0]["why"]
    assert any("no GPU target" in r.message for r in caplog.records)
    k = Kernels("verified", root=tmp_path, target="h200", env=ENV)         # GPU target but nothing locked
    k.call("swiglu", torch.randn(4, 32).bfloat16())
    assert "no verified kernel locked for swiglu on h200" in k.summary()[0]["why"]


def test_verified_kernel_used_in_bucket_only(tmp_path):
    cand, d = promote(tmp_path)
    k = Kernels("verified", root=tmp_path, target="h200", env=ENV)
    x = torch.randn(80, 1024).bfloat16()                                  # rows 80 within [32, 128], ffn 512
    torch.testing.assert_close(k.call("swiglu", x), Kernels("reference", target=None).call("swiglu", x))
    k.call("swiglu", torch.randn(500, 1024).bfloat16())                   # rows 500: outside the bucket
    k.call("swiglu", torch.randn(80, 64).bfloat16())                      # other ffn
    s = {(c["dims"]["rows"], c["dims"]["ffn"]): c for c in k.summary()}
    assert s[(80, 512)]["kernel"] == d.name and "bucket full" in s[(80, 512)]["why"]
    assert s[(500, 512)]["kernel"] == "reference" and "outside the buckets" in s[(500, 512)]["why"]
    assert s[(80, 32)]["kernel"] == "reference"
    assert module_calls(cand) == [(80, 1024)]


def test_hard_mismatch_refuses(tmp_path, caplog):
    promote(tmp_path, cc="10.0")                                           # recorded on sm100, this is sm90
    k = Kernels("verified", root=tmp_path, target="h200", env=ENV)
    with caplog.at_level(logging.WARNING, logger="runtime.kernels"):
        k.call("swiglu", torch.randn(64, 1024).bfloat16())
    c = k.summary()[0]
    assert c["kernel"] == "reference" and c["why"].startswith("refused") and "compute capability" in c["why"]
    assert any(r.levelno == logging.WARNING and "refused" in r.message for r in caplog.records)


def test_edited_record_is_unusable(tmp_path):
    _, d = promote(tmp_path)
    (d / "record.json").write_text((d / "record.json").read_text().replace('"full"', '"fullx"'))
    k = Kernels("verified", root=tmp_path, target="h200", env=ENV)
    k.call("swiglu", torch.randn(64, 1024).bfloat16())
    assert "lock entry unusable" in k.summary()[0]["why"]


def test_dit_runs_through_verified_kernel(tmp_path, tiny_model):
    """The tiny DiT's MLP (ffn 512, 64 rows) dispatches to the locked kernel; the output is unchanged."""
    from runtime.adaln import step_modulation
    from runtime.packing import build_sequence, patchify_video, plan_request
    from runtime.sampler import initial_noise

    src = KERNEL_SRC.replace("CALLS = []", "CALLS = []  # dit")
    cand, _ = promote(tmp_path, rows=64, source=src)
    plan = plan_request(0.2, 128, 64)
    seq = build_sequence(plan, 5)
    assert seq.total == 64
    vz, a = initial_noise(plan.latent_shape, plan.audio_rows, 32, 0)
    text = torch.randn(5, 64).bfloat16()
    step = step_modulation(tiny_model, seq, torch.tensor(0.2), torch.tensor(0.5))
    rope = tiny_model.rope.table(seq.positions)
    outs = []
    for k in (Kernels("reference", target=None), Kernels("verified", root=tmp_path, target="h200", env=ENV)):
        outs.append(tiny_model(patchify_video(vz), a, tiny_model.encode_text(text, k), seq, rope, step, k))
    assert torch.equal(outs[0][0], outs[1][0])
    assert module_calls(cand) == [(64, 1024)] * len(tiny_model.blocks)
    with pytest.raises(ValueError, match="--kernels"):
        Kernels("fast")


def test_kernel_that_fails_to_import_falls_back(tmp_path, caplog):
    promote(tmp_path, source="import not_a_module_anywhere\n\ndef launch(x):\n    return x\n")
    k = Kernels("verified", root=tmp_path, target="h200", env=ENV)
    with caplog.at_level(logging.WARNING, logger="runtime.kernels"):
        y = k.call("swiglu", torch.randn(64, 1024).bfloat16())
    assert y.shape == (64, 512) and k.summary()[0]["kernel"] == "reference"
    assert "failed to load" in k.summary()[0]["why"] and caplog.records[-1].levelno == logging.WARNING


ATTENTION_SRC = '''
import torch

CALLS = []


def launch(q, k, v, cu_seqlens_q, cu_seqlens_k):
    CALLS.append((q.shape[0], k.shape[0]))
    o = torch.nn.functional.scaled_dot_product_attention(*(t.transpose(0, 1)[None] for t in (q, k, v)))
    return o[0].transpose(0, 1).contiguous()
'''


def test_cross_attention_runs_the_kernel_locked_for_its_bucket(tmp_path):
    """A kernel locked for a cross-attention bucket (kv_rows != 0) serves Attention.cross at those dims, and neither
    self-attention of the same query rows nor a call with another head dim or key count."""
    from rsi.kernel import module_name

    dims = {"rows": 70, "heads": 2, "docs": 1, "kv_rows": 20, "head_dim": 32}
    cand = Candidate(op="attention", source=ATTENTION_SRC, config={})
    record = {"schema": 1, "op": "attention", "candidate_hash": cand.hash, "source_sha256": sha256_text(ATTENTION_SRC),
              "config": {}, "search": {"parent": None}, "env": ENV,
              "shapes": [{"shape": {"name": "text", "dims": dims}, "bucket": "text"}]}
    d = write_record(tmp_path, cand, "attention", record)
    lock_kernel(tmp_path, "h200", "attention", d)
    k = Kernels("verified", root=tmp_path, target="h200", env=ENV)
    g = torch.Generator().manual_seed(0)
    q, kk, v = (torch.randn(n, 2, 32, generator=g).bfloat16() for n in (70, 20, 20))
    want = torch.nn.functional.scaled_dot_product_attention(*(t.transpose(0, 1)[None] for t in (q, kk, v)))
    assert torch.equal(k.attention.cross(q, kk, v), want[0].transpose(0, 1).reshape(70, -1))
    k.attention.self_attn(q, q, q, [0, 70])                                # self-attention: kv_rows 0
    k.attention.cross(q, kk[:15], v[:15])                                 # another key count
    k.attention.cross(*(t[..., :16] for t in (q, kk, v)))                 # another head dim
    assert sys.modules[module_name("attention")].CALLS == [(70, 20)]
    s = [(c["dims"]["kv_rows"], c["dims"]["head_dim"], c["kernel"]) for c in k.summary()]
    assert s == [(20, 32, d.name), (0, 32, "sdpa_documents"), (15, 32, "sdpa_documents"),
                 (20, 16, "sdpa_documents")]


def test_an_incumbent_the_kernel_was_not_timed_against_runs_instead(tmp_path):
    """A verified kernel whose record has an incumbent untimed at the serving bucket (FlashAttention-4 not installed
    where it was judged), or does not name it, never replaces that incumbent as the fallback: it was not shown faster
    than it. Timed, failed the judge's check there, or no incumbent named: the kernel runs."""
    _cand, d = promote(tmp_path)
    record_path = d / "record.json"
    record = json.loads(record_path.read_text())
    record["incumbents"] = {"full": {"fa4": {"timed": False, "reason": "raised ModuleNotFoundError"},
                                     "flex": {"timed": False, "reason": "fails the tolerance check", "error": {}},
                                     "sdpa_cudnn": {"timed": True}}}
    record_path.write_text(json.dumps(record))
    lock_kernel(tmp_path, "h200", "swiglu", d)               # the record's hash again

    def lib(x):
        return torch.zeros(x.shape[0], x.shape[1] // 2, dtype=x.dtype)

    x = torch.randn(64, 1024).bfloat16()
    k = Kernels("verified", root=tmp_path, target="h200", env=ENV)
    assert k.call_or("swiglu", lib, x, incumbent="fa4").abs().sum() == 0           # the library ran
    s = k.summary()[0]
    assert s["kernel"] == "lib" and "was not timed against fa4 (raised ModuleNotFoundError): fa4 runs" in s["why"]
    for incumbent in ("sdpa_cudnn", "flex", None):              # timed; ran and failed the check; none named
        k = Kernels("verified", root=tmp_path, target="h200", env=ENV)
        assert k.call_or("swiglu", lib, x, incumbent=incumbent).abs().sum() > 0
        assert k.summary()[0]["kernel"] == d.name
    k = Kernels("verified", root=tmp_path, target="h200", env=ENV)             # the record does not name it
    assert k.call_or("swiglu", lib, x, incumbent="cudnn_fp8").abs().sum() == 0
    assert "record names no cudnn_fp8: cudnn_fp8 runs" in k.summary()[0]["why"]


def test_the_runtime_names_the_incumbent_its_fallback_is():
    """runtime/attention.py's dispatch passes the baseline name of a fallback that is a declared incumbent (FA4,
    cuDNN FP8), so untimed_incumbent can keep it; SDPA per document and the fp8 reference are not incumbents."""
    from runtime.attention import Attention, fa4_documents, fp8_cudnn, fp8_reference, sdpa_documents

    seen = []

    class Spy:
        def call_or(self, op, fallback, *args, incumbent=None):
            seen.append((op, incumbent))

    att = Attention(kernels=Spy())
    for fallback in (fa4_documents, sdpa_documents, fp8_cudnn, fp8_reference):
        att._dispatch("attention", fallback)
    assert [i for _, i in seen] == ["fa4", None, "cudnn_fp8", None]
