"""--precision fp8 with a verified ``swiglu_fp8`` kernel: the MLP hands fc2 the producer's e4m3 bytes and row scales
(Fp8Linear.quantized) instead of quantising SwiGLU's bf16 output inside fc2. Same quantiser, so the two paths agree
to the producer's own difference (silu in fp64 vs torch's fp32: a few bf16 roundings); without a verified kernel the
unfused path runs (the producer's reference would be slower than the bf16 op it replaces)."""

from __future__ import annotations

import torch

from runtime.config import get_config
from runtime.kernels import Kernels
from runtime.model import build_dit
from runtime.precision import to_fp8_


def test_mlp_uses_the_fused_producer_only_where_verified(tmp_path):
    cfg = get_config("tiny").dit
    model = build_dit(cfg, "cpu", seed=3)
    kernels = Kernels("verified", root=tmp_path, target=None)
    to_fp8_(model.blocks, kernels)
    mlp = model.blocks[0].mlp
    h = (torch.randn(70, cfg.hidden, generator=torch.Generator().manual_seed(1))).to(torch.bfloat16)
    with torch.no_grad():
        assert not kernels.verified("swiglu_fp8", mlp.fc1(h))          # no lock here: the unfused path
        unfused = mlp(h, kernels)
        kernels.verified = lambda op, *a: op == "swiglu_fp8"            # as if the lock had one
        fused = mlp(h, kernels)
    ops = {c["op"] for c in kernels.summary()}
    assert "swiglu_fp8" in ops
    d = (fused.float() - unfused.float()).norm() / unfused.float().norm()
    assert d < 1e-2 and fused.shape == unfused.shape and fused.dtype == unfused.dtype


def _fp8_model(seed: int = 3):
    cfg = get_config("tiny").dit
    model = build_dit(cfg, "cpu", seed=seed)
    return cfg, model


def test_out_proj_takes_head_merge_fp8_only_where_verified(tmp_path):
    """One GPU: the merge is a view, so head_merge_fp8 is out_proj's own per-row quantiser run where the attention
    output is written; its bytes are the quantiser's, so the layer's output is bitwise the unfused one."""
    from runtime.kernels import identity_rope

    cfg, model = _fp8_model()
    kernels = Kernels("verified", root=tmp_path, target=None)
    to_fp8_(model.blocks, kernels)
    attn = model.blocks[0].attn
    h = torch.randn(70, cfg.hidden, generator=torch.Generator().manual_seed(2)).to(torch.bfloat16)
    rope = identity_rope(70, "cpu")
    with torch.no_grad():
        unfused = attn(h, rope, [0, 40, 70], kernels)
        assert "head_merge_fp8" not in {c["op"] for c in kernels.summary()}
        kernels.verified = lambda op, *a: op == "head_merge_fp8"
        fused = attn(h, rope, [0, 40, 70], kernels)
    merged = [c for c in kernels.summary() if c["op"] == "head_merge_fp8"]
    assert merged and merged[0]["dims"] == {"rows": 70, "heads": cfg.heads, "world": 1}
    assert "fp8_gemm" in {c["op"] for c in kernels.summary()}     # out_proj on the e4m3 rows: the GEMM op group
    assert torch.equal(fused, unfused)


def test_bf16_out_proj_never_takes_the_producer(tmp_path):
    cfg, model = _fp8_model()
    kernels = Kernels("verified", root=tmp_path, target=None)
    kernels.verified = lambda op, *a: True                  # a lock with every producer: bf16 linears ignore them
    from runtime.kernels import identity_rope

    h = torch.randn(20, cfg.hidden, generator=torch.Generator().manual_seed(4)).to(torch.bfloat16)
    with torch.no_grad():
        out = model.blocks[0].attn(h, identity_rope(20, "cpu"), [0, 20], kernels)
    assert out.dtype == torch.bfloat16 and out.shape == (20, cfg.hidden)
    assert not {"head_merge_fp8", "modulate_fp8"} & {c["op"] for c in kernels.summary()}


def _h3_forward(model, cfg, kernels):
    from runtime.adaln import step_modulation
    from runtime.packing import AUDIO_CH, build_sequence, patchify_video, plan_request
    from runtime.sampler import initial_noise

    plan = plan_request(0.2, 128, 64)
    seq = build_sequence(plan, 10)
    g = torch.Generator().manual_seed(5)
    text = torch.randn(10, cfg.text_dim, generator=g).to(torch.bfloat16)
    vz, az = initial_noise(plan.latent_shape, plan.audio_rows, AUDIO_CH, 0)
    step = step_modulation(model, seq, torch.tensor(0.7), torch.tensor(0.6))
    with torch.no_grad():
        text_h = model.encode_text(text, kernels)
        return model(patchify_video(vz), az, text_h, seq, model.rope.table(seq.positions), step, kernels)


def test_block0_takes_modulate_fp8_only_where_verified(tmp_path):
    """Block 0's qkv input from the fused producer (the canonical modulate, then the same quantiser): the forward
    agrees with the unfused fp8 path to modulate's own last-bit differences."""
    cfg, model = _fp8_model()
    kernels = Kernels("verified", root=tmp_path, target=None)
    to_fp8_(model.blocks, kernels)
    v0, a0 = _h3_forward(model, cfg, kernels)
    assert "modulate_fp8" not in {c["op"] for c in kernels.summary()}
    kernels.verified = lambda op, *a: op in ("modulate_fp8", "head_merge_fp8")
    v1, a1 = _h3_forward(model, cfg, kernels)
    calls = {c["op"]: c["calls"] for c in kernels.summary()}
    assert calls["modulate_fp8"] == 1 and calls["head_merge_fp8"] == cfg.blocks
    for x, y in ((v1, v0), (a1, a0)):
        assert torch.isfinite(x).all() and ((x - y).norm() / y.norm()).item() < 1e-2


def test_blocks_take_gate_residual_modulate_fp8_only_where_verified(tmp_path):
    """fc1 of every block and qkv_proj of every block after the first take gate_residual_modulate_fp8's (h8, h_scale)
    where the lock has the kernel: 2 * blocks - 1 calls a forward, fc1 (and, with it verified, fc2 after swiglu_fp8)
    on e4m3 rows through fp8_gemm, and the output within the canonical modulate's last-bit differences of the
    unfused fp8 path. bf16 linears never take it."""
    cfg, model = _fp8_model()
    kernels = Kernels("verified", root=tmp_path, target=None)
    kernels.verified = lambda op, *a: True
    _h3_forward(model, cfg, kernels)
    assert "gate_residual_modulate_fp8" not in {c["op"] for c in kernels.summary()}   # bf16 linears
    to_fp8_(model.blocks, kernels)
    kernels = Kernels("verified", root=tmp_path, target=None)
    v0, a0 = _h3_forward(model, cfg, kernels)
    assert "gate_residual_modulate_fp8" not in {c["op"] for c in kernels.summary()}
    kernels.verified = lambda op, *a: op in ("gate_residual_modulate_fp8", "swiglu_fp8")
    v1, a1 = _h3_forward(model, cfg, kernels)
    calls = {c["op"]: c["calls"] for c in kernels.summary()}
    assert calls["gate_residual_modulate_fp8"] == 2 * cfg.blocks - 1 and calls["swiglu_fp8"] == cfg.blocks
    assert calls["gate_residual_modulate"] == 2 * cfg.blocks - 1           # the run before, unfused
    for x, y in ((v1, v0), (a1, a0)):
        assert torch.isfinite(x).all() and ((x - y).norm() / y.norm()).item() < 1e-2


def test_merge_rows_reads_its_input_every_call(tmp_path):
    """merge_rows keeps nothing between calls (a buffer reused in place gets merged afresh)."""
    from rsi.refs.fp8_common import quantize_rows
    from runtime.attention import merge_rows

    kernels = Kernels("verified", root=tmp_path, target=None)
    kernels.verified = lambda op, *a: op == "head_merge_fp8"
    x = torch.randn(2, 5, 3, 128, generator=torch.Generator().manual_seed(6)).to(torch.bfloat16)
    for scale in (1.0, 4.0):
        x.mul_(scale)
        h8, s = merge_rows(x, kernels, quantize=True)
        want = quantize_rows(x.permute(1, 0, 2, 3).reshape(5, -1))
        assert torch.equal(h8.view(torch.uint8), want[0].view(torch.uint8)) and torch.equal(s, want[1])
    assert torch.equal(merge_rows(x[:1], kernels), x[0].reshape(5, -1))


def test_verified_reads_the_lock_once_per_dims(tmp_path, monkeypatch):
    """merge_rows asks on every attention call: a miss is remembered per (op, dims), a new shape asks again."""
    import runtime.kernels as RK

    asked = []

    def resolve(root, target, op, dims, env):
        asked.append((op, tuple(sorted(dims.items()))))
        return None, "no lock entry"

    monkeypatch.setattr(RK, "resolve", resolve)
    kernels = Kernels("verified", root=tmp_path, target="h200", env={})
    x = torch.zeros(1, 5, 3, 128, dtype=torch.bfloat16)
    assert not any(kernels.verified("head_merge_fp8", x) for _ in range(3))
    assert not kernels.verified("head_merge_fp8", torch.zeros(1, 6, 3, 128, dtype=torch.bfloat16))
    assert [a[1] for a in asked] == [(("heads", 3), ("rows", 5), ("world", 1)), (("heads", 3), ("rows", 6), ("world", 1))]
