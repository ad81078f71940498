"""The runtime's attention classes (runtime/attention.py): dense dispatch, Sol-Attn in the refiner only (with its
dense layers, tau schedule and density), FP8 inside the denoising loops only, the FlexAttention fallback against
the sol_attn reference, and ``rsi attention-quality`` end to end on the tiny refiner."""

from __future__ import annotations

import json
import warnings

import pytest
import torch

from rsi import cli
from rsi.refs import sol_attn
from rsi.refs.attention_baselines import flex_block_sparse, sol_flex
from runtime.attention import Attention, AttentionConfig, parse_taus, sdpa_documents
from runtime.kernels import Kernels

BF16 = torch.bfloat16


def _qkv(S: int, H: int = 2, D: int = 32, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(S, H, D, generator=g).to(BF16) for _ in range(3))


def _dense(q, k, v):
    return sdpa_documents(q, k, v, torch.tensor([0, q.shape[0]], dtype=torch.int32)).float()


def test_dense_is_sdpa_per_document_through_the_dispatcher():
    q, k, v = _qkv(70)
    kern = Kernels("verified", target=None)
    out = kern.attention.self_attn(q, k, v, [0, 50, 70])
    want = sdpa_documents(q, k, v, torch.tensor([0, 50, 70], dtype=torch.int32))
    assert torch.equal(out.view_as(want), want)
    rep = kern.attention.report()
    assert rep["mode"] == "dense" and rep["calls"] == {"other:dense": 1} and rep["seconds"]["other"] > 0
    assert [c["kernel"] for c in kern.summary()] == ["sdpa_documents"]      # the incumbent, not the fp32 reference


def test_cross_attention_goes_through_the_attention_op():
    """Attention.cross (the refiner's text and audio<->video cross-attention) runs the attention op with one
    document on each side: bitwise what plain SDPA gives, dispatched (and logged) at dims with kv_rows."""
    q, _, _ = _qkv(70)
    _, k, v = _qkv(20, seed=1)
    kern = Kernels("verified", target=None)
    out = kern.attention.cross(q, k, v)
    want = torch.nn.functional.scaled_dot_product_attention(*(t.transpose(0, 1)[None] for t in (q, k, v)))
    assert torch.equal(out, want[0].transpose(0, 1).reshape(70, -1))
    (c,) = kern.summary()
    assert c["op"] == "attention" and c["kernel"] == "sdpa_documents"
    assert c["dims"] == {"rows": 70, "heads": 2, "docs": 1, "kv_rows": 20, "head_dim": 32}
    assert kern.attention.report()["calls"] == {"other:dense": 1}
    kern.attention.cross(q, k, v)                    # the bounds tensors are made once per run, not per call
    assert len(kern.attention._cu) == 2 and kern.attention.cu_tensor([0, 20], q.device) is kern.attention._cu[
        ((0, 20), str(q.device))]


def test_attention_buckets_keep_self_cross_and_head_dims_apart():
    """A verified attention kernel serves the refiner's text cross-attention only through its ltx_text bucket, the
    video self-attention only through ltx_video, and a head dim other than 128 (the refiner's audio) through none."""
    from rsi.refs import attention as A
    from rsi.verified import bucket_of
    from runtime.kernels import op_dims

    record = {"shapes": [{"bucket": s.name, "shape": {"dims": s.dims}} for s in A.OP_GROUP.shapes]}

    def bucket(rows, kv_rows, heads=32, d=128):
        meta = [torch.empty(n, heads, d, device="meta") for n in (rows, kv_rows, kv_rows)]
        cu = torch.empty(2, dtype=torch.int32, device="meta")
        return bucket_of(record, op_dims("attention", (*meta, cu, cu)))

    assert bucket(16128, 1024) == bucket(12000, 1024) == "ltx_text"
    assert bucket(16128, 16128) == bucket(12000, 12000) == "ltx_video"
    assert bucket(16128, 1000) is None and bucket(16128, 1024, d=64) is None and bucket(16128, 16128, d=64) is None


def test_sol_runs_only_in_the_refiner_after_its_dense_layers():
    q, k, v = _qkv(256)
    att = Attention(AttentionConfig("sol", (1.0, 1.5), dense_layers=1, block=16))
    for stage, layer, sparse in (("stage1", 5, True), ("stage2", 0, True), ("stage2", 3, False), ("other", 3, True)):
        att.at(stage, step=0, layer=layer)
        assert torch.equal(att.self_attn(q, k, v, [0, 256], sparse=sparse).view(256, 2, 32).float(),
                           _dense(q, k, v))
    assert att.density == []
    for step in (0, 1, 2):
        att.at("stage2", step=step, layer=1)
        out = att.self_attn(q, k, v, [0, 256], sparse=True).view(256, 2, 32)
        ref, _ = sol_attn.reference(q, k, v, torch.tensor([0, 256], dtype=torch.int32), (1.0, 1.5, 1.5)[step],
                                       0, block=16)
        assert torch.equal(out, ref)
    rep = att.report()
    assert [d["tau"] for d in rep["density"]] == [1.0, 1.5, 1.5]             # the last tau holds after
    assert 0 < rep["density_per_step"]["1"] < rep["density_per_step"]["0"] < 1
    assert rep["calls"]["stage2:sol"] == 3 and rep["calls"]["stage2:dense"] == 2


def test_sol_with_every_block_kept_is_dense_attention():
    q, k, v = _qkv(200)
    att = Attention(AttentionConfig("sol", (-1e9,), dense_layers=0, block=16))
    att.at("stage2", step=0, layer=0)
    out = att.self_attn(q, k, v, [0, 200], sparse=True).view(200, 2, 32).float()
    assert att.report()["density_per_step"]["0"] == 1.0
    assert (out - _dense(q, k, v)).abs().max() <= 2 ** -7 * _dense(q, k, v).abs().max()


def test_fp8_only_inside_the_denoising_loops_and_lossy():
    q, k, v = _qkv(96)
    att = Attention(AttentionConfig("fp8"))
    att.at("other")
    assert torch.equal(att.self_attn(q, k, v, [0, 96]).view(96, 2, 32).float(), _dense(q, k, v))
    att.at("stage1", step=0)
    out = att.self_attn(q, k, v, [0, 96]).view(96, 2, 32).float()
    d = _dense(q, k, v)
    err = float((out - d).norm() / d.norm())
    assert 0 < err < 0.1
    assert att.report()["calls"] == {"other:dense": 1, "stage1:fp8": 1}


@pytest.mark.parametrize("S", [512, 450])
def test_flex_fallback_matches_the_sol_reference(S):
    q, k, v = _qkv(S, seed=S)
    cu = torch.tensor([0, S], dtype=torch.int32)
    ref, mask = sol_attn.reference(q, k, v, cu, 1.0, 0)
    assert 0 < sol_attn.mask_density(mask, cu) < 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")            # eager flex_attention warns that it is not compiled
        out = flex_block_sparse(q, k, v, mask.bool())
        out2, mask2 = sol_flex(q, k, v, cu, 1.0, 0)                  # the sol_attn incumbent: same selection
    assert (out.float() - ref.float()).abs().max() <= 2 ** -7 * ref.float().abs().max()
    assert torch.equal(out2, out) and torch.equal(mask2, mask)
    with pytest.raises(ValueError, match="one document"):
        sol_flex(q, k, v, torch.tensor([0, 100, S], dtype=torch.int32), 1.0, 0)


def test_config_and_tau_errors_name_the_flag():
    assert parse_taus("1,1.25, 1.5") == (1.0, 1.25, 1.5)
    for bad, flag in (("1,x", "--sol-tau"), ("nan", "--sol-tau")):
        with pytest.raises(ValueError, match=flag):
            parse_taus(bad)
    for kw, flag in (({"mode": "sparse"}, "--attention"), ({"dense_layers": -1}, "--sol-dense-layers"),
                     ({"block": 0}, "--sol-block")):
        with pytest.raises(ValueError, match=flag):
            AttentionConfig(**kw)


def test_attention_quality_cli_tiny(tmp_path, capsys):
    out = tmp_path / "q.json"
    rc = cli.main(["attention-quality", "--latent", "2x8x8", "--sol-tau", "1.0,1.25,1.5", "--sol-tau", "-100",
                   "--prompt-cache", str(tmp_path / "pc"), "--json", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "sol attention, bf16 linears (lossy)" in text and "PSNR" in text
    d = json.loads(out.read_text())
    sched, everything = d["variants"]
    assert [r["tau"] for r in sched["steps"]] == [1.0, 1.25, 1.5]
    assert all(0 < r["density"] < 1 and r["latent_rel_l2"] > 0 for r in sched["steps"])
    assert all(r["density"] == 1.0 for r in everything["steps"])   # every block kept: only bf16 rounding differs
    assert all(r["latent_rel_l2"] < sched["steps"][i]["latent_rel_l2"] for i, r in enumerate(everything["steps"]))
    assert all(isinstance(r["psnr_db"], (float, str)) for r in sched["steps"])


def test_quality_with_fp8_linears(tmp_path, capsys):
    out = tmp_path / "p.json"
    assert cli.main(["quality", "--attention", "dense", "--precision", "fp8", "--latent", "2x4x8", "--no-decode",
                     "--prompt-cache", str(tmp_path / "pc"), "--json", str(out)]) == 0
    assert "dense attention, fp8 linears (lossy)" in capsys.readouterr().out
    d = json.loads(out.read_text())
    assert d["precision"]["mode"] == "fp8" and d["precision"]["converted"] > 0
    assert 0 < d["precision"]["weight_error"]["rel_l2_mean"] < 0.1
    assert all(0 < r["latent_rel_l2"] < 0.2 for r in d["variants"][0]["steps"])


def test_attention_quality_usage_error(capsys):
    assert cli.main(["attention-quality", "--sol-tau", "1,x"]) == 2
    assert "--sol-tau" in capsys.readouterr().out
    assert cli.main(["quality", "--attention", "dense"]) == 2
    assert "reference itself" in capsys.readouterr().out


def test_two_stage_cli_with_sol_reports_attention_per_stage_and_density(tmp_path, capsys):
    out = tmp_path / "s.mp4"
    rc = cli.main(["run-pipeline", "--prompt", "rain", "--duration", "0.5", "--resolution", "128x64", "--two-stage",
                   "--attention", "sol", "--sol-tau", "1.0,1.5", "--out", str(out), "--prompt-cache",
                   str(tmp_path / "pc"), "--no-mux"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "attention, stage 2 (refiner) (sol)" in text and "sol density, refiner step 3" in text
    assert "attention, stage 1 (H3 denoising) (dense)" in text
    a = json.loads(out.with_suffix(".json").read_text())["timings_s"]["attention"]
    assert a["mode"] == "sol" and a["taus"] == [1.0, 1.5] and a["dense_layers"] == 1 and a["block"] == 8
    assert [d["tau"] for d in a["density"]] == [1.0, 1.5, 1.5]               # tiny refiner: 2 layers, 1 dense
    assert a["seconds"]["stage1"] > 0 and a["seconds"]["stage2"] > 0 and a["calls"]["stage2:sol"] == 3


def test_two_stage_cli_with_fp8_linears_and_fp8_attention(tmp_path, capsys):
    out = tmp_path / "f.mp4"
    rc = cli.main(["run-pipeline", "--prompt", "rain", "--duration", "0.5", "--resolution", "128x64", "--two-stage",
                   "--precision", "fp8", "--attention", "fp8", "--out", str(out), "--prompt-cache",
                   str(tmp_path / "pc"), "--no-mux", "--save-latents", str(tmp_path / "fp8.pt")])
    assert rc == 0
    text = capsys.readouterr().out
    assert "to_fp8" in text and "attention, stage 2 (refiner) (fp8)" in text
    d = json.loads(out.with_suffix(".json").read_text())
    p = d["model"]["precision"]
    assert p["mode"] == "fp8" and p["h3"]["converted"] == 2 * 4 and p["refiner"]["converted"] > 0
    assert any(n.startswith("precision fp8 (lossy)") for n in d["notes"])
    ops = {c["op"]: c["kernel"] for c in d["kernels"]}
    assert ops["fp8_linear"] == "scaled_mm_or_reference" and ops["attention_fp8"] == "fp8_reference"
    # the same request in bf16 with dense attention, and the end-to-end error of the lossy one against it
    rc = cli.main(["run-pipeline", "--prompt", "rain", "--duration", "0.5", "--resolution", "128x64", "--two-stage",
                   "--out", str(tmp_path / "b.mp4"), "--prompt-cache", str(tmp_path / "pc"), "--no-mux",
                   "--save-latents", str(tmp_path / "bf16.pt")])
    assert rc == 0
    from runtime import latent_error

    assert latent_error.main([str(tmp_path / "bf16.pt"), str(tmp_path / "fp8.pt"), "--json",
                              str(tmp_path / "e.json")]) == 0
    e = json.loads((tmp_path / "e.json").read_text())["outputs"]
    assert {"z_draft", "z_refined", "z_audio", "frames"} <= set(e)
    for k in ("z_draft", "z_refined"):          # lossy: moved, but not to noise
        assert 1e-4 < e[k]["rel_l2"] < 0.5 and e[k]["cosine"] > 0.8
    assert 10 < e["frames"]["psnr_db"] < float("inf")
    assert latent_error.main([str(tmp_path / "bf16.pt"), str(tmp_path / "missing.pt")]) == 2


def test_fp8_precision_refuses_unmerged_lora(tmp_path, capsys):
    argv = ["run-pipeline", "--prompt", "p", "--out", str(tmp_path / "x.mp4"), "--precision", "fp8",
            "--lora", str(tmp_path / "a.safetensors"), "--lora-mode", "native"]
    (tmp_path / "a.safetensors").write_bytes(b"")
    assert cli.main(argv) == 2
    assert "--lora-mode merged" in capsys.readouterr().out
