"""Stage 2 on the CPU: our refiner forward equals diffusers' LTX2VideoTransformer3DModel.forward (same weights,
tiny config), the text K/V cache, the prompt-context cache, and the refine loop."""

from __future__ import annotations

import pytest
import torch

from runtime.kernels import Kernels
from runtime.prompt_cache import PromptCache, context_key, stage2_context
from runtime.refiner import SIGMAS, Refiner, build_refiner, pack_video, refine, refiner_config, unpack_video

F_, H, W, NA, L = 3, 4, 6, 5, 7


@pytest.fixture(scope="module")
def inputs():
    g = torch.Generator().manual_seed(0)
    return {"z": torch.randn(1, 128, F_, H, W, generator=g), "audio": torch.randn(1, NA, 128, generator=g),
                "ctx": torch.randn(1, L, 48, generator=g), "actx": torch.randn(1, L, 48, generator=g)}


def diffusers_forward(m, inp, sigma, dtype):
    return m(hidden_states=pack_video(inp["z"]).to(dtype), audio_hidden_states=inp["audio"].to(dtype),
             encoder_hidden_states=inp["ctx"].to(dtype), audio_encoder_hidden_states=inp["actx"].to(dtype),
             timestep=torch.full((1,), 1000.0 * sigma), num_frames=F_, height=H, width=W, audio_num_frames=NA,
             return_dict=False)


@pytest.mark.parametrize("dtype,rope_type", [(torch.float32, "interleaved"), (torch.bfloat16, "interleaved"),
                                             (torch.float32, "split"), (torch.bfloat16, "split")])
def test_forward_equals_diffusers(inputs, dtype, rope_type):
    """Reference ops through the dispatcher, our block loop (fused residual+norm, cached text K/V) vs diffusers'
    own forward: bitwise equal in fp32 and in bf16 on the CPU, for both RoPE layouts (the LTX-2.x release configs
    use split)."""
    m = build_refiner({**refiner_config("tiny"), "rope_type": rope_type}, torch.device("cpu"), seed=3)
    torch.nn.Module.to(m, dtype)
    kernels = Kernels("reference")
    r = Refiner(m, kernels)
    st = r.prepare(inputs["ctx"], inputs["actx"], F_, H, W, NA)
    for sigma in (SIGMAS[0], SIGMAS[2]):
        v, va = r.forward(pack_video(inputs["z"]), inputs["audio"], sigma, st)
        ref_v, ref_a = diffusers_forward(m, inputs, sigma, dtype)
        assert torch.equal(v, ref_v.float()) and torch.equal(va, ref_a.float())
    ops = {c["op"] for c in kernels.summary()}
    assert {"ltx_modulate", "ltx_gate_residual_modulate", "gelu_tanh"} <= ops
    assert ("ltx_qk_norm_rope" in ops) == (rope_type == "interleaved")


def test_text_kv_cache_is_used(inputs):
    """The text cross-attention K/V are computed in prepare (once per request), never in forward."""
    m = build_refiner("tiny", torch.device("cpu"), seed=3)
    r = Refiner(m, Kernels("reference"))
    st = r.prepare(inputs["ctx"], inputs["actx"], F_, H, W, NA)
    assert len(st.text_kv) == len(m.transformer_blocks)
    calls = []
    for blk in m.transformer_blocks:
        for attn in (blk.attn2, blk.audio_attn2):
            attn.to_k.register_forward_hook(lambda *a: calls.append(1))
            attn.to_v.register_forward_hook(lambda *a: calls.append(1))
    r.forward(pack_video(inputs["z"]), inputs["audio"], SIGMAS[1], st)
    assert calls == []


def test_refine_loop_shapes_and_determinism(inputs):
    m = build_refiner("tiny", torch.device("cpu"), seed=3)
    r = Refiner(m, Kernels("reference"))
    st = r.prepare(inputs["ctx"], inputs["actx"], F_, H, W, NA)
    steps = []
    a = refine(r, inputs["z"], inputs["audio"], st, seed=5, on_step=lambda i, dt: steps.append(i))
    b = refine(r, inputs["z"], inputs["audio"], st, seed=5)
    assert steps == [0, 1, 2] and a[0].shape == inputs["z"].shape and a[1].shape == inputs["audio"].shape
    assert torch.equal(a[0], b[0]) and torch.isfinite(a[0]).all()
    assert torch.equal(unpack_video(pack_video(inputs["z"]), tuple(inputs["z"].shape)), inputs["z"])


@pytest.mark.parametrize("key,value", [("cross_attn_mod", True), ("norm_eps", 1e-5), ("activation_fn", "gelu"),
                                       ("rope_type", "other")])
def test_unsupported_config_is_refused(key, value):
    with pytest.raises(NotImplementedError, match=key):
        build_refiner({**refiner_config("tiny"), key: value}, torch.device("cpu"), seed=0)


def test_full_config_is_the_48_layer_ltx2():
    from diffusers import LTX2VideoTransformer3DModel

    with torch.device("meta"):
        m = LTX2VideoTransformer3DModel()
    c = m.config
    assert (c.num_layers, c.num_attention_heads, c.attention_head_dim, c.caption_channels) == (48, 32, 128, 3840)
    assert sum(p.numel() for p in m.parameters()) == 18_876_174_592


def test_prompt_cache_hit_miss_and_keys(tmp_path):
    dev = torch.device("cpu")
    v1, a1, i1 = stage2_context("a fox", True, "tiny", dev, 0, str(tmp_path))
    v2, _a2, i2 = stage2_context("another prompt", True, "tiny", dev, 0, str(tmp_path))
    assert not i1["hit"] and i2["hit"] and torch.equal(v1, v2)            # generic: one context for every prompt
    v3, _, i3 = stage2_context("a fox", False, "tiny", dev, 0, str(tmp_path))
    v4, _, i4 = stage2_context("a fox", False, "tiny", dev, 0, str(tmp_path))
    assert not i3["hit"] and i4["hit"] and torch.equal(v3, v4) and not torch.equal(v1, v3)
    _, _, i5 = stage2_context("a fox", False, "tiny", dev, 1, str(tmp_path))   # other encoder weights: other key
    assert not i5["hit"] and i5["key"] != i3["key"]
    assert v1.shape == (1, 16, 48) and a1.shape == (1, 16, 48)
    assert not list(tmp_path.glob("*.partial"))
    assert context_key("x", "e1") != context_key("x", "e2")
    assert PromptCache(tmp_path).get("missing", dev) is None


def test_corrupt_prompt_cache_entry_is_remade(tmp_path):
    dev = torch.device("cpu")
    v1, _, i1 = stage2_context("x", True, "tiny", dev, 0, str(tmp_path))
    p = tmp_path / f"{i1['key']}.safetensors"
    p.write_bytes(b"garbage")
    v2, _, i2 = stage2_context("x", True, "tiny", dev, 0, str(tmp_path))
    assert not i2["hit"] and torch.equal(v1, v2) and p.stat().st_size > 100
    from safetensors.torch import save_file

    save_file({"video": torch.zeros(1, 3, 48)}, str(p))                     # audio missing, wrong shape
    _, _, i3 = stage2_context("x", True, "tiny", dev, 0, str(tmp_path))
    assert not i3["hit"] and stage2_context("x", True, "tiny", dev, 0, str(tmp_path))[2]["hit"]
