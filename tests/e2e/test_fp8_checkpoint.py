"""FP8 checkpoints (H3_SPEC.md section 7: ModelOpt's split to_{q,k,v} and Comfy's single e4m3 tensors with scalar
scales) written from the tiny model and loaded back: the bf16 parameters are the dequantised weights, the e4m3
bytes and scales are kept and used as stored by ``--precision fp8``, every other tensor is the source's, and a
checkpoint that does not fit fails naming the key."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file, save_file

from runtime.checkpoint import FP8_ATTR, CheckpointError, load_dit, save_fp8_dit
from runtime.kernels import Kernels
from runtime.model import build_dit
from runtime.precision import Fp8Linear, to_fp8_

LINEARS = ("attn.qkv_proj", "attn.out_proj", "mlp.fc1", "mlp.fc2")


@pytest.mark.parametrize("fmt", ["comfy", "modelopt"])
def test_fp8_checkpoint_round_trip(tmp_path, tiny_cfg, tiny_model, fmt):
    f = save_fp8_dit(tiny_model, tmp_path / "transformer", fmt)
    raw = load_file(str(f))
    if fmt == "modelopt":
        assert "blocks.0.attn.qkv_proj.to_k.weight" in raw and "blocks.0.attn.qkv_proj.weight" not in raw
    else:
        assert raw["blocks.0.attn.qkv_proj.weight"].dtype == torch.float8_e4m3fn and "blocks.0.mlp.fc2.comfy_quant" in raw
        assert "blocks.0.mlp.fc2.input_scale" not in raw and "blocks.0.mlp.fc1.input_scale" in raw
    m = build_dit(tiny_cfg.dit, "cpu", seed=None)
    info = load_dit(m, tmp_path)
    assert info["fp8"]["format"] == fmt and info["fp8"]["linears"] == 4 * tiny_cfg.dit.blocks
    store = getattr(m, FP8_ATTR)
    src, got = tiny_model.state_dict(), m.state_dict()
    for b in range(tiny_cfg.dit.blocks):
        for lin in LINEARS:
            name = f"blocks.{b}.{lin}"
            w8, scale = store[name]
            assert w8.dtype == torch.float8_e4m3fn and scale.shape == (w8.shape[0],)
            assert torch.equal(got[name + ".weight"], (w8.float() * scale[:, None]).to(torch.bfloat16))
            err = (got[name + ".weight"].float() - src[name + ".weight"].float()).norm() / src[name + ".weight"].float().norm()
            assert 1e-3 < err < 0.1                                          # e4m3, per tensor
    for k in src:                                                             # everything else as written
        if not any(k.endswith(lin + ".weight") for lin in LINEARS) or not k.startswith("blocks."):
            assert torch.equal(got[k], src[k]), k
    # --precision fp8 uses the stored bytes as they are
    summary = to_fp8_(m.blocks, Kernels("reference", target=None), quantized=store)
    assert summary["from_checkpoint"] == summary["converted"] == 4 * tiny_cfg.dit.blocks
    q = m.blocks[0].attn.qkv_proj
    assert isinstance(q, Fp8Linear)
    assert torch.equal(q.w8.view(torch.uint8), store["blocks.0.attn.qkv_proj"][0].view(torch.uint8))


def test_fp8_checkpoint_errors(tmp_path, tiny_cfg, tiny_model):
    f = save_fp8_dit(tiny_model, tmp_path / "t", "comfy")
    raw = load_file(str(f))
    m = build_dit(tiny_cfg.dit, "cpu", seed=None)
    bad = dict(raw)
    del bad["blocks.1.mlp.fc1.weight_scale"]
    save_file(bad, str(tmp_path / "t" / "model.safetensors"))
    with pytest.raises(CheckpointError, match="blocks.1.mlp.fc1.weight_scale"):
        load_dit(m, tmp_path / "t")
    bad = dict(raw)
    bad["blocks.0.mlp.fc2.weight"] = bad["blocks.0.mlp.fc2.weight"].float().to(torch.bfloat16)
    save_file(bad, str(tmp_path / "t" / "model.safetensors"))
    with pytest.raises(CheckpointError, match="float8_e4m3fn"):
        load_dit(m, tmp_path / "t")
    bad = dict(raw)
    bad["blocks.0.mlp.fc2.weight_scale"] = torch.ones(3)
    save_file(bad, str(tmp_path / "t" / "model.safetensors"))
    with pytest.raises(CheckpointError, match="one per output row"):
        load_dit(m, tmp_path / "t")
    dif = {("transformer_blocks." + k[len("blocks."):]) if k.startswith("blocks.") else k: v for k, v in raw.items()}
    save_file(dif, str(tmp_path / "t" / "model.safetensors"))
    with pytest.raises(CheckpointError, match="diffusers layout is not supported"):
        load_dit(m, tmp_path / "t")


def test_pipeline_with_an_fp8_checkpoint(tmp_path, tiny_model):
    from runtime.pipeline import run_pipeline
    from runtime.request import Request

    save_fp8_dit(tiny_model, tmp_path / "w" / "transformer", "modelopt")
    base = {"prompt": "a fox", "duration_s": 0.2, "width": 128, "height": 64, "config": "tiny",
            "kernels": "reference", "device": "cpu", "mux": False, "weights": str(tmp_path / "w"),
            "out": str(tmp_path / "o.mp4")}
    fp8 = run_pipeline(Request(**base, precision="fp8"))
    assert any("FP8 checkpoint (modelopt)" in n and "used as stored" in n for n in fp8.notes), fp8.notes
    assert fp8.model["precision"]["h3"]["from_checkpoint"] == 8
    bf = run_pipeline(Request(**base))
    assert any("dequantised to bf16" in n for n in bf.notes)
    assert bf.latent_sha256 != fp8.latent_sha256 and torch.isfinite(fp8.outputs["z_video"]).all()
