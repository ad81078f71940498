"""Checkpoint round trips in the native (sharded, per-head-interleaved QKV, [gate; up] fc1) and diffusers
(to_q/to_k/to_v, [up; gate] ff.net.0.proj) layouts, and clear errors naming the key."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from runtime.checkpoint import (
    CheckpointError,
    checkpoint_files,
    diffusers_to_native,
    load_dit,
    native_to_diffusers,
    save_dit,
)
from runtime.model import build_dit


def same(a, b) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) and sa[k].dtype == sb[k].dtype for k in sa)


def test_native_sharded_roundtrip(tmp_path, tiny_cfg, tiny_model):
    files = save_dit(tiny_model, tmp_path / "transformer", "native", max_shard_bytes=400_000)
    assert len(files) > 2
    index = json.loads((tmp_path / "transformer" / "model.safetensors.index.json").read_text())
    assert set(index["weight_map"]) == set(tiny_model.state_dict())
    # the file holds the raw per-head-interleaved qkv: head 0 = [q0; k0; v0], head 1 = [q1; ...]
    key = "blocks.1.attn.qkv_proj.weight"
    with safe_open(str(tmp_path / "transformer" / index["weight_map"][key]), "pt") as f:
        raw = f.get_tensor(key)
    w = tiny_model.state_dict()[key]                                       # contiguous [Q; K; V], inner 256
    assert torch.equal(raw[0:128], w[0:128]) and torch.equal(raw[128:256], w[256:384])
    assert torch.equal(raw[256:384], w[512:640]) and torch.equal(raw[384:512], w[128:256])
    m2 = build_dit(tiny_cfg.dit, "cpu", seed=9)
    assert not same(tiny_model, m2)
    info = load_dit(m2, tmp_path)                                          # partition dir with transformer/
    assert info["layout"] == "native" and info["files"] == len(files)
    assert same(tiny_model, m2)


def test_diffusers_roundtrip(tmp_path, tiny_cfg, tiny_model):
    save_dit(tiny_model, tmp_path, "diffusers")
    sd = load_file(str(tmp_path / "diffusion_pytorch_model.safetensors"))
    assert "rope.inv_freq" not in sd and "transformer_blocks.0.attn.to_q.weight" in sd
    assert "token_refiner.refiner_blocks.1.ff.net.2.weight" in sd and "norm_out.linear.weight" in sd
    fc1 = tiny_model.state_dict()["blocks.0.mlp.fc1.weight"]               # native [gate; up], ffn 512
    assert torch.equal(sd["transformer_blocks.0.ff.net.0.proj.weight"][:512], fc1[512:])     # [up; gate]
    assert torch.equal(sd["transformer_blocks.0.attn.to_k.weight"],
                       tiny_model.state_dict()["blocks.0.attn.qkv_proj.weight"][256:512])
    m2 = build_dit(tiny_cfg.dit, "cpu", seed=9)
    assert load_dit(m2, tmp_path)["layout"] == "diffusers"
    assert same(tiny_model, m2)


def test_both_layouts_give_identical_models(tmp_path, tiny_cfg, tiny_model):
    save_dit(tiny_model, tmp_path / "n", "native", max_shard_bytes=1_000_000)
    save_dit(tiny_model, tmp_path / "d", "diffusers", max_shard_bytes=1_000_000)
    assert (tmp_path / "d" / "diffusion_pytorch_model.safetensors.index.json").exists()
    a, b = build_dit(tiny_cfg.dit, "cpu", seed=3), build_dit(tiny_cfg.dit, "cpu", seed=4)
    load_dit(a, tmp_path / "n")
    load_dit(b, tmp_path / "d")
    assert same(a, b)


def test_name_mapping_tables():
    pairs = {"proj_in.weight": "video_patch_proj.weight", "audio_proj_out.bias": "final_layer.audio_out.bias",
             "time_embedder.linear_2.weight": "time_embedder.proj_out.weight",
             "transformer_blocks.7.attn.norm_k.weight": "blocks.7.attn.k_norm.weight",
             "token_refiner.refiner_blocks.0.attn.to_out.0.weight": "token_refiner.blocks.0.attn.out_proj.weight",
             "norm_out.linear.bias": "final_layer.adaln_proj.linear.bias",
             "transformer_blocks.3.ff.net.2.weight": "blocks.3.mlp.fc2.weight",
             "context_embedder.weight": "condition_proj.weight"}
    for d, n in pairs.items():
        assert diffusers_to_native(d) == n and native_to_diffusers(n) == d


def test_missing_key_is_named(tmp_path, tiny_cfg, tiny_model):
    save_dit(tiny_model, tmp_path, "native")
    f = tmp_path / "model.safetensors"
    sd = load_file(str(f))
    del sd["blocks.1.mlp.fc2.weight"]
    save_file(sd, str(f))
    with pytest.raises(CheckpointError, match=r"missing key 'blocks\.1\.mlp\.fc2\.weight'"):
        load_dit(build_dit(tiny_cfg.dit, "cpu", seed=0), tmp_path)


def test_missing_diffusers_qkv_part_is_named(tmp_path, tiny_cfg, tiny_model):
    save_dit(tiny_model, tmp_path, "diffusers")
    f = tmp_path / "diffusion_pytorch_model.safetensors"
    sd = load_file(str(f))
    del sd["transformer_blocks.0.attn.to_v.weight"]
    save_file(sd, str(f))
    with pytest.raises(CheckpointError, match=r"transformer_blocks\.0\.attn\.to_v\.weight.*blocks\.0\.attn\.qkv"):
        load_dit(build_dit(tiny_cfg.dit, "cpu", seed=0), tmp_path)


def test_bad_shape_unexpected_key_missing_shard(tmp_path, tiny_cfg, tiny_model):
    save_dit(tiny_model, tmp_path / "a", "native")
    f = tmp_path / "a" / "model.safetensors"
    sd = load_file(str(f))
    sd["blocks.0.norm1.weight"] = torch.ones(7, dtype=torch.bfloat16)
    save_file(sd, str(f))
    with pytest.raises(CheckpointError, match=r"'blocks\.0\.norm1\.weight' has shape \(7,\)"):
        load_dit(build_dit(tiny_cfg.dit, "cpu", seed=0), tmp_path / "a")
    save_dit(tiny_model, tmp_path / "b", "native")
    f = tmp_path / "b" / "model.safetensors"
    sd = load_file(str(f))
    sd["blocks.2.norm1.weight"] = torch.ones(256, dtype=torch.bfloat16)     # a block the tiny config lacks
    save_file(sd, str(f))
    with pytest.raises(CheckpointError, match=r"unexpected key.*'blocks\.2\.norm1\.weight'"):
        load_dit(build_dit(tiny_cfg.dit, "cpu", seed=0), tmp_path / "b")
    files = save_dit(tiny_model, tmp_path / "c", "native", max_shard_bytes=400_000)
    files[1].unlink()
    with pytest.raises(CheckpointError, match=files[1].name):
        checkpoint_files(tmp_path / "c")
    with pytest.raises(CheckpointError, match="does not exist"):
        checkpoint_files(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match="no \\*.safetensors"):
        checkpoint_files(tmp_path / "empty")
