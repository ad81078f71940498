"""LoRA: PEFT (LightX2V) and FastVideo-v2 adapters onto the tiny DiT in merged / native / consumer modes."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

from runtime.adaln import step_modulation
from runtime.checkpoint import load_dit, qkv_from_interleaved, save_dit, swap_halves
from runtime.kernels import Kernels
from runtime.lora import AdapterError, LoRALinear, apply_adapter, compare_modes, load_adapter
from runtime.model import build_dit
from runtime.packing import build_sequence, patchify_video, plan_request
from runtime.sampler import initial_noise
from tests.e2e.adapters import F2, INNER, H, exact, rnd, write_peft


def test_peft_merged_weights(tmp_path, tiny_model):
    t = write_peft(tmp_path / "minimax_h3_fl2v_turbo_4step_v1.0.safetensors")
    w0 = {k: v.clone() for k, v in tiny_model.state_dict().items()}
    ad = load_adapter(tmp_path / "minimax_h3_fl2v_turbo_4step_v1.0.safetensors", tiny_model)
    assert ad.format == "peft" and len(ad.updates) == 3 * 6 and ad.metadata["alpha"] == "8"
    rep = apply_adapter(tiny_model, ad, "merged")
    assert rep["merged"] == 18 and rep["branches"] == 0
    s = 8 / 4
    sd = tiny_model.state_dict()
    A, B = (t[f"transformer_blocks.1.attn.to_k.lora_{x}.default.weight"].float() for x in "AB")
    want = (w0["blocks.1.attn.qkv_proj.weight"][INNER:2 * INNER].float() + s * B @ A).bfloat16()
    assert torch.equal(sd["blocks.1.attn.qkv_proj.weight"][INNER:2 * INNER], want)
    A, B = (t[f"transformer_blocks.0.ff.net.0.proj.lora_{x}.default.weight"].float() for x in "AB")
    B = torch.cat([B[F2 // 2:], B[:F2 // 2]])                                   # [up; gate] -> [gate; up]
    assert torch.equal(sd["blocks.0.mlp.fc1.weight"], (w0["blocks.0.mlp.fc1.weight"].float() + s * B @ A).bfloat16())
    A, B = (t[f"token_refiner.refiner_blocks.0.attn.to_out.0.lora_{x}.default.weight"].float() for x in "AB")
    assert torch.equal(sd["token_refiner.blocks.0.attn.out_proj.weight"],
                       (w0["token_refiner.blocks.0.attn.out_proj.weight"].float() + s * B @ A).bfloat16())


def test_native_branches_keep_state_dict(tmp_path, tiny_model):
    write_peft(tmp_path / "a.safetensors")
    keys = list(tiny_model.state_dict())
    w = tiny_model.blocks[0].attn.qkv_proj.weight.clone()
    rep = apply_adapter(tiny_model, load_adapter(tmp_path / "a.safetensors", tiny_model), "native")
    assert rep["branches"] == 18 and rep["merged"] == 0
    qkv = tiny_model.blocks[0].attn.qkv_proj
    assert isinstance(qkv, LoRALinear) and len(qkv.entries) == 3 and torch.equal(qkv.weight, w)
    assert list(tiny_model.state_dict()) == keys


def forward_fn(model):
    plan = plan_request(0.2, 128, 64)
    seq = build_sequence(plan, 5)
    vz, a = initial_noise(plan.latent_shape, plan.audio_rows, 32, 0)
    text = torch.randn(5, 64, generator=torch.Generator().manual_seed(1)).bfloat16()
    k = Kernels("reference", target=None)
    step = step_modulation(model, seq, torch.tensor(0.2), torch.tensor(0.5))
    return model(patchify_video(vz), a, model.encode_text(text, k), seq, model.rope.table(seq.positions), step, k)


def test_merged_vs_native_vs_consumer(tmp_path, tiny_cfg):
    write_peft(tmp_path / "a.safetensors")
    ad = load_adapter(tmp_path / "a.safetensors", build_dit(tiny_cfg.dit, "cpu", seed=0))
    rep = compare_modes(lambda: build_dit(tiny_cfg.dit, "cpu", seed=0), ad, forward_fn)
    d = rep["merged_vs_native"]
    # merging rounds W + sBA to bf16 once; native rounds the two branch outputs: close, not identical
    assert 0 < d["rel_l2"] < 0.05 and d["cosine"] > 0.999 and d["frac_differ"] > 0.1
    assert rep["consumer_equals_native"]
    assert 0 < rep["merge_rounding"]["update_rel_l2_lost"] < 0.5
    base = forward_fn(build_dit(tiny_cfg.dit, "cpu", seed=0))
    assert not torch.equal(base[0], forward_fn(_applied(tiny_cfg, ad, "native"))[0])    # the adapter does something


def _applied(cfg, ad, mode):
    m = build_dit(cfg.dit, "cpu", seed=0)
    apply_adapter(m, ad, mode)
    return m


def test_fastvideo_v2(tmp_path, tiny_model):
    d = tmp_path / "fasth3"
    d.mkdir()
    t = {"transformer_blocks.0.attn.to_q.lora_A.weight": rnd(2, H, seed=1, scale=0.3),
         "transformer_blocks.0.attn.to_q.lora_B.weight": rnd(INNER, 2, seed=2, scale=0.3),
         "transformer_blocks.1.ff.net.0.proj.diff": rnd(F2, H, seed=3),
         "proj_in.diff_b": rnd(H, seed=4).float(),
         "transformer_blocks.0.norm1.set_weight": rnd(H, seed=5, scale=1.0),
         "transformer_blocks.0.attn.to_gate_compress.set_weight": rnd(INNER, H, seed=6)}
    save_file(t, str(d / "adapter_model.safetensors"), metadata={"format": "fastvideo-lora-v2"})
    (d / "adapter_manifest.json").write_text(json.dumps({"format": "fastvideo-lora-v2",
                                                         "finetuned_model": "FastVideo/FastH3", "tensors": 6}))
    w0 = {k: v.clone() for k, v in tiny_model.state_dict().items()}
    ad = load_adapter(d, tiny_model)
    assert ad.format == "fastvideo-v2" and ad.skipped == ["transformer_blocks.0.attn.to_gate_compress.set_weight"]
    rep = apply_adapter(tiny_model, ad, "native")
    assert rep["branches"] == 1 and rep["skipped"] == 1
    sd = tiny_model.state_dict()
    diff = t["transformer_blocks.1.ff.net.0.proj.diff"].float()
    diff = torch.cat([diff[F2 // 2:], diff[:F2 // 2]])
    assert torch.equal(sd["blocks.1.mlp.fc1.weight"], (w0["blocks.1.mlp.fc1.weight"].float() + diff).bfloat16())
    assert torch.equal(sd["video_patch_proj.bias"], w0["video_patch_proj.bias"] + t["proj_in.diff_b"])
    assert torch.equal(sd["blocks.0.norm1.weight"], t["transformer_blocks.0.norm1.set_weight"])
    q = tiny_model.blocks[0].attn.qkv_proj
    assert isinstance(q, LoRALinear) and q.entries[0][:2] == (0, INNER) and q.entries[0][4] == 1.0


def test_bad_adapters(tmp_path, tiny_model):
    save_file({"transformer_blocks.0.attn.to_x.lora_A.default.weight": rnd(2, H, seed=1),
               "transformer_blocks.0.attn.to_x.lora_B.default.weight": rnd(H, 2, seed=1)}, str(tmp_path / "x.st"))
    with pytest.raises(AdapterError, match="to_x.lora_A.*does not have"):
        load_adapter(tmp_path / "x.st", tiny_model)
    save_file({"transformer_blocks.0.attn.to_q.lora_A.default.weight": rnd(2, H, seed=1)}, str(tmp_path / "y.st"))
    with pytest.raises(AdapterError, match="only one of lora_A"):
        load_adapter(tmp_path / "y.st", tiny_model)
    with pytest.raises(AdapterError, match="does not exist"):
        load_adapter(tmp_path / "nope.safetensors", tiny_model)


def test_alpha_defaults_to_rank(tmp_path, tiny_model):
    """No alpha in the file: alpha = rank (scale 1), as diffusers/PEFT loaders do."""
    t = write_peft(tmp_path / "a.safetensors", rank=4, alpha=None)
    w0 = tiny_model.state_dict()["blocks.0.attn.out_proj.weight"].clone()
    ad = load_adapter(tmp_path / "a.safetensors", tiny_model)
    assert ad.format == "peft" and {u.scale for u in ad.updates.values()} == {1.0}
    apply_adapter(tiny_model, ad, "merged")
    A, B = (t[f"transformer_blocks.0.attn.to_out.0.lora_{x}.default.weight"].float() for x in "AB")
    assert torch.equal(tiny_model.state_dict()["blocks.0.attn.out_proj.weight"], (w0.float() + B @ A).bfloat16())


R = 4


def native_delta():
    """One delta per target in the native checkpoint's own row order: qkv per-head interleaved, fc1 [gate; up]."""
    return {"blocks.1.attn.qkv_proj": (exact(R, H, seed=1), exact(3 * INNER, R, seed=2)),
            "blocks.0.mlp.fc1": (exact(R, H, seed=3), exact(F2, R, seed=4)),
            "token_refiner.blocks.0.attn.out_proj": (exact(R, INNER, seed=5), exact(H, R, seed=6))}


def as_diffusers(delta):
    """The same deltas in diffusers naming and layout (to_q/k/v thirds of the de-interleaved rows, [up; gate])."""
    (Aq, Bq), (Af, Bf), (Ao, Bo) = delta.values()
    out = {f"transformer_blocks.1.attn.to_{x}": (Aq, b) for x, b in zip("qkv", qkv_from_interleaved(Bq).chunk(3))}
    out["transformer_blocks.0.ff.net.0.proj"] = (Af, swap_halves(Bf))
    out["token_refiner.refiner_blocks.0.attn.to_out.0"] = (Ao, Bo)
    return out


def write_lora(path, delta, infix=""):
    save_file({f"{m}.lora_{x}{infix}.weight": t.bfloat16() for m, (A, B) in delta.items() for x, t in zip("AB", (A, B))},
              str(path))


def merged(cfg, path):
    m = build_dit(cfg.dit, "cpu", seed=0)
    apply_adapter(m, load_adapter(path, m), "merged")
    return m.state_dict()


def merged_in_file(tmp_path, cfg, layout, delta):
    """Merge the deltas into the raw checkpoint tensors of ``layout``, then load: the base mapping's answer."""
    d = tmp_path / layout
    (f,) = save_dit(build_dit(cfg.dit, "cpu", seed=0), d, layout)
    from safetensors.torch import load_file
    sd = load_file(str(f))
    for m, (A, B) in delta.items():
        sd[m + ".weight"] = (sd[m + ".weight"].float() + B @ A).bfloat16()
    save_file(sd, str(f))
    m = build_dit(cfg.dit, "cpu", seed=9)
    load_dit(m, d)
    return m.state_dict()


@pytest.mark.parametrize("infix", ["", ".default"])      # ai-toolkit / Comfy style, and DiffSynth's peft infix
def test_native_named_lora_matches_base_mapping(tmp_path, tiny_cfg, infix):
    delta = native_delta()
    write_lora(tmp_path / "native.safetensors", delta, infix)
    write_lora(tmp_path / "diffusers.safetensors", as_diffusers(delta), ".default")
    got = merged(tiny_cfg, tmp_path / "native.safetensors")
    want = merged_in_file(tmp_path, tiny_cfg, "native", delta)
    for k in want:
        assert torch.equal(got[k], want[k]), k
    other = merged(tiny_cfg, tmp_path / "diffusers.safetensors")
    assert all(torch.equal(got[k], other[k]) for k in got)
    assert all(torch.equal(other[k], v) for k, v in merged_in_file(tmp_path, tiny_cfg, "diffusers",
                                                                  as_diffusers(delta)).items())
    base = build_dit(tiny_cfg.dit, "cpu", seed=0).state_dict()
    assert not torch.equal(got["blocks.1.attn.qkv_proj.weight"], base["blocks.1.attn.qkv_proj.weight"])


@pytest.mark.parametrize("config", [None, {"r": R, "lora_alpha": 16, "peft_type": "LORA"}])
def test_peft_save_pretrained_layout(tmp_path, tiny_model, config):
    """PEFT ``save_pretrained``: ``base_model.model.`` prefix, no ``.default``, alpha/rank in adapter_config.json."""
    A, B = exact(R, H, seed=1), exact(INNER, R, seed=2)
    save_file({"base_model.model.transformer_blocks.0.attn.to_v.lora_A.weight": A.bfloat16(),
               "base_model.model.transformer_blocks.0.attn.to_v.lora_B.weight": B.bfloat16()},
              str(tmp_path / "adapter_model.safetensors"), metadata={"format": "pt"})
    if config:
        (tmp_path / "adapter_config.json").write_text(json.dumps(config))
    w0 = tiny_model.state_dict()["blocks.0.attn.qkv_proj.weight"].clone()
    for path in (tmp_path / "adapter_model.safetensors", tmp_path):
        ad = load_adapter(path, tiny_model)
        (u,) = ad.updates.values()
        assert ad.format == "peft" and u.module == "blocks.0.attn.qkv_proj" and u.rows == (2 * INNER, 3 * INNER)
        assert u.scale == (16 / R if config else 1.0)
    apply_adapter(tiny_model, ad, "merged")
    s = 16 / R if config else 1.0
    assert torch.equal(tiny_model.state_dict()["blocks.0.attn.qkv_proj.weight"][2 * INNER:],
                       (w0[2 * INNER:].float() + s * B @ A).bfloat16())


def test_adapter_config_rank_mismatch(tmp_path, tiny_model):
    save_file({"base_model.model.transformer_blocks.0.attn.to_v.lora_A.weight": rnd(R, H, seed=1),
               "base_model.model.transformer_blocks.0.attn.to_v.lora_B.weight": rnd(INNER, R, seed=2)},
              str(tmp_path / "adapter_model.safetensors"))
    (tmp_path / "adapter_config.json").write_text(json.dumps({"r": 8, "lora_alpha": 8}))
    with pytest.raises(AdapterError, match=r"adapter_config\.json.*r = 8.*rank 4"):
        load_adapter(tmp_path, tiny_model)
