"""H3 DiT: sizes of the full config (meta device), block order against a literal transcription of the spec,
attention documents, RoPE/time tables, and the AdaLN precompute (bitwise against per-step recomputation)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from rsi.refs.modulate import rms_norm
from runtime.adaln import AdaLNCache, step_modulation
from runtime.config import get_config
from runtime.kernels import identity_rope
from runtime.layers import sdpa_documents, sinusoid
from runtime.model import build_dit, param_counts
from runtime.packing import build_sequence, patchify_video, plan_request
from runtime.sampler import initial_noise, make_schedule


def test_full_config_sizes_on_meta():
    m = build_dit(get_config("full").dit, "meta")
    n = param_counts(m)
    H, inner, F2, T = 5376, 7168, 28672, 2688
    per_block = 3 * inner * H + H * inner + F2 * H + H * F2 // 2 + 2 * H + 2 * 128          # attn+MLP+norms
    assert 3 * inner * H + H * inner + F2 * H + H * F2 // 2 == 385_351_680                   # ~385M
    adaln = 50 * (18 * H * T + 18 * H) + (2 * H * T + 2 * H)
    assert n["adaln"] == adaln == 13_039_369_728                                               # ~13B
    assert 32.5e9 < n["total"] < 33.5e9 and n["total"] - n["adaln"] - 52 * per_block < 60e6
    assert all(p.is_meta for p in m.parameters())
    qkv = m.blocks[0].attn.qkv_proj.weight
    assert qkv.shape == (21504, 5376) and qkv.dtype == torch.bfloat16
    assert m.video_patch_proj.weight.dtype == torch.float32 and m.final_layer.video_out.weight.dtype == torch.float32
    assert m.blocks[49].adaln_proj.linear.weight.shape == (96768, 2688)


def test_rope_table_and_sinusoid(tiny_model):
    inv = tiny_model.rope.inv_freq
    assert inv.dtype == torch.float32 and inv.shape == (16,)
    assert inv[1].item() == pytest.approx(10000 ** (-1 / 16), rel=1e-6)
    tab = tiny_model.rope.table([[3.0, 0.0, 2.0]])                                        # t=3, h=0, w=2
    assert tab.shape == (1, 96) and tab.dtype == torch.bfloat16
    theta = [3 * inv[j].item() for j in range(16)] + [0.0] * 16 + [2 * inv[j].item() for j in range(16)]
    want = torch.tensor([math.cos(x) for x in theta] + [math.sin(x) for x in theta]).bfloat16()
    assert torch.equal(tab[0], want)
    s = sinusoid(torch.tensor([0.0, 0.5]))
    assert s.shape == (2, 256) and torch.equal(s[0, :128], torch.ones(128)) and torch.equal(s[0, 128:], torch.zeros(128))
    assert s[1, 1].item() == pytest.approx(math.cos(0.5 * math.exp(-math.log(1e4) / 128)), abs=1e-6)


def test_sdpa_documents_matches_masked_attention():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(12, 2, 16, generator=g) for _ in range(3))
    out = sdpa_documents(q, k, v, [0, 9, 12])
    doc = torch.tensor([0] * 9 + [1] * 3)
    mask = doc[:, None] == doc[None, :]
    ref = F.scaled_dot_product_attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), attn_mask=mask)
    assert torch.allclose(out, ref.transpose(0, 1).reshape(12, 32), atol=1e-6)


def test_identity_rope_is_plain_qk_norm(ref_kernels):
    from rsi.refs.qk_norm_rope import reference

    qkv = torch.randn(5, 3 * 2 * 128).bfloat16()
    wq, wk = torch.rand(128).bfloat16() + 0.5, torch.rand(128).bfloat16() + 0.5
    q, k = reference(qkv, wq, wk, identity_rope(5, "cpu"))
    assert torch.equal(q, rms_norm(qkv[:, :256].view(5, 2, 128), wq))
    assert torch.equal(k, rms_norm(qkv[:, 256:512].view(5, 2, 128), wk))


def _inputs(model, plan_args=(0.2, 128, 64), L=5, seed=0):
    plan = plan_request(*plan_args)
    seq = build_sequence(plan, L)
    vz, a = initial_noise(plan.latent_shape, plan.audio_rows, 32, seed)
    text = torch.randn(L, model.cfg.text_dim, generator=torch.Generator().manual_seed(seed)).bfloat16()
    return plan, seq, patchify_video(vz), a, text


def sdpa(q, k, v):
    """[n, heads, D] each -> [n, heads, D]; SDPA on 4-D [1, heads, n, D] (CPU picks another kernel for 3-D)."""
    return F.scaled_dot_product_attention(*(t.transpose(0, 1)[None] for t in (q, k, v)))[0].transpose(0, 1)


def naive_forward(model, video, audio, text, seq, rope, step):
    """H3_SPEC.md section 1 block order, written out literally with the reference ops (no fusion across blocks)."""
    from rsi.refs.qk_norm_rope import reference as qk_norm_rope
    from rsi.refs.swiglu import reference as swiglu

    H, idx = model.cfg.hidden, step.mod_idx
    x = torch.zeros(seq.total, H, dtype=torch.bfloat16)
    t = model.condition_proj(text)
    for blk in model.token_refiner.blocks:                       # pre-norm refiner, no RoPE / AdaLN
        hh = rms_norm(t, blk.norm1.weight)
        qkv = blk.attn.qkv_proj(hh)
        q, k = (rms_norm(qkv[:, i * 256:(i + 1) * 256].view(-1, 2, 128), w)
                for i, w in enumerate((blk.attn.q_norm.weight, blk.attn.k_norm.weight)))
        o = sdpa(q, k, qkv[:, 512:].view(-1, 2, 128))
        t = t + blk.attn.out_proj(o.reshape(-1, 256))
        t = t + blk.mlp.fc2(swiglu(blk.mlp.fc1(rms_norm(t, blk.norm2.weight))))
    x[seq.text] = rms_norm(t, model.token_refiner.final_norm.weight)
    x[seq.audio] = model.audio_patch_proj(audio).bfloat16()
    x[seq.video] = model.video_patch_proj(video).bfloat16()
    for b, blk in enumerate(model.blocks):
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = step.block_chunks(b)
        h = rms_norm(x, blk.norm1.weight) * (1 + scale_msa[idx]) + shift_msa[idx]
        qkv = blk.attn.qkv_proj(h)
        q, k = qk_norm_rope(qkv, blk.attn.q_norm.weight, blk.attn.k_norm.weight, rope)
        v = qkv[:, 512:].view(-1, 2, 128)
        o = torch.empty_like(q)
        for a, e in ((0, seq.used), (seq.used, seq.total)):     # cu_seqlens [0, used, S]
            o[a:e] = sdpa(q[a:e], k[a:e], v[a:e])
        x = x + gate_msa[idx] * blk.attn.out_proj(o.reshape(-1, 256))
        h = rms_norm(x, blk.norm2.weight) * (1 + scale_mlp[idx]) + shift_mlp[idx]
        x = x + gate_mlp[idx] * blk.mlp.fc2(swiglu(blk.mlp.fc1(h)))
    shift, scale = step.final_chunks()
    h = (rms_norm(x, model.final_layer.norm.weight) * (1 + scale[step.t_idx]) + shift[step.t_idx]).float()
    return model.final_layer.video_out(h)[seq.video], model.final_layer.audio_out(h)[seq.audio]


def test_forward_equals_literal_block_order(tiny_model, ref_kernels):
    m = tiny_model
    plan, seq, v, a, text = _inputs(m)
    sch = make_schedule("fasth3")
    step = step_modulation(m, seq, *sch.timesteps(1))
    rope = m.rope.table(seq.positions)
    out = m(v, a, m.encode_text(text, ref_kernels), seq, rope, step, ref_kernels)
    ref = naive_forward(m, v, a, text, seq, rope, step)
    assert out[0].shape == (plan.video_rows, 96) and out[1].shape == (plan.audio_rows, 32)
    assert out[0].dtype == torch.float32 and torch.isfinite(out[0]).all() and out[0].std() > 0.1
    assert torch.equal(out[0], ref[0]) and torch.equal(out[1], ref[1])


def test_pad_rows_are_their_own_document(tiny_model, ref_kernels):
    m = tiny_model
    _, seq, v, a, text = _inputs(m)
    step = step_modulation(m, seq, torch.tensor(0.3), torch.tensor(0.6))
    rope = m.rope.table(seq.positions)
    text_h = m.encode_text(text, ref_kernels)
    out = m(v, a, text_h, seq, rope, step, ref_kernels)
    rope2 = rope.clone()
    rope2[seq.used:] = torch.randn(seq.total - seq.used, 96).bfloat16()    # pad rows see other positions
    out2 = m(v, a, text_h, seq, rope2, step, ref_kernels)
    assert torch.equal(out[0], out2[0]) and torch.equal(out[1], out2[1])


def test_adaln_precompute_bitwise_and_release(tiny_model):
    m = tiny_model
    _, seq, *_ = _inputs(m)
    sch = make_schedule("fasth3")
    cache = AdaLNCache(m, seq, sch)
    H = m.cfg.hidden
    for k in range(sch.steps):
        t_v, t_a = sch.timesteps(k)
        st = cache[k]
        assert torch.equal(st.unique_t, torch.sort(torch.stack([t_v, t_a]))[0])
        c = F.silu(m.time_embedder(st.unique_t)).bfloat16()                       # independent recomputation
        for b, blk in enumerate(m.blocks):
            w, bias = blk.adaln_proj.linear.weight, blk.adaln_proj.linear.bias
            want = F.linear(c, w, bias).view(-1, 6 * H)                           # [3M, 6H]
            assert torch.equal(st.blocks[b], want), (k, b)
            # modality-outer layout: row m*3 + 1 (text) is columns 6H..12H of timestep m
            assert torch.equal(st.block_chunks(b)[2][1], F.linear(c, w, bias)[0, 6 * H + 2 * H:6 * H + 3 * H])
        fw = m.final_layer.adaln_proj.linear
        assert torch.equal(st.final, F.linear(c, fw.weight, fw.bias))
    n_adaln = param_counts(m)["adaln"]
    rel = AdaLNCache.release(m)
    assert rel["params"] == n_adaln and rel["bytes"] == 2 * n_adaln and param_counts(m)["adaln"] == 0
    with pytest.raises(RuntimeError, match="released"):
        step_modulation(m, seq, *sch.timesteps(0))


def test_fl2va_keyframes_denoise(tiny_model, ref_kernels):
    """Keyframe rows: a third timestep (max(t_v, 0.999)) -> 9-row tables; excluded from the velocity output."""
    from runtime.pipeline import denoise
    from runtime.sampler import condition_noise

    plan = plan_request(0.2, 128, 64)
    seq = build_sequence(plan, 5, keyframes=("first", "last"))
    sch = make_schedule("fasth3")
    cache = AdaLNCache(tiny_model, seq, sch)
    assert cache[0].blocks.shape[1] == 9 and cache[0].unique_t[-1].item() == pytest.approx(0.999)
    text_h = tiny_model.encode_text(torch.randn(5, 64).bfloat16(), ref_kernels)
    keyframes = [torch.randn(24, 1, plan.latent_h, plan.latent_w) for _ in range(2)]      # first, last
    seen, forward = [], tiny_model.forward
    tiny_model.forward = lambda *a, cond=None: seen.append(cond) or forward(*a, cond=cond)
    zv, za = denoise(tiny_model, text_h, seq, tiny_model.rope.table(seq.positions), cache, sch, plan, 0, ref_kernels,
                     cond_latents=keyframes)
    want = condition_noise(keyframes, 0, 0.999)                  # noised once per condition, held every step
    assert len(seen) == sch.steps and all(torch.equal(c, want) for c in seen)
    assert zv.shape == plan.latent_shape and za.shape == (2, 32, plan.audio_t) and torch.isfinite(zv).all()
