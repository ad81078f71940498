"""H3 x2 latent upscaler and H3 -> LTX adapter (runtime/upscaler.py, runtime/adapter.py): tiny-config shapes,
determinism, full-size parameter counts and shapes on the meta device, hand-checked geometry, chunking, and the
``h3_ltx_adapter_safetensors_v1`` checkpoint round trip and its errors."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from runtime.adapter import (
    FORMAT,
    AdapterConfig,
    build_adapter,
    h3_positions,
    load_adapter_checkpoint,
    ltx_frames,
    manifest,
    pack_geometry,
    resample_positions,
    save_adapter,
)
from runtime.checkpoint import CheckpointError
from runtime.upscaler import UpscalerConfig, build_upscaler


def n_params(m) -> int:
    return sum(p.numel() for p in m.parameters())


# ---------------------------------------------------------------------------------------------------- models
def test_tiny_chain_shapes_determinism():
    z = torch.randn(1, 24, 9, 4, 6)                                  # 9 H3 tokens = 30 pixel frames
    up, ad = build_upscaler(UpscalerConfig.tiny(), "cpu", seed=0), build_adapter(AdapterConfig.tiny(), "cpu", seed=0)
    z2 = up.upscale(z)
    assert z2.shape == (1, 24, 9, 8, 12) and z2.dtype == torch.float32 and z2.isfinite().all()
    out = ad.adapt(z2, keep=None)
    assert h3_positions(9)[-1] == 29 and ltx_frames(9) == 5          # 30 frames -> padded to 33 = 8*4+1
    assert out.shape == (1, 128, 5, 4, 6) and out.dtype == torch.float32 and out.isfinite().all()
    assert torch.equal(ad.adapt(z2, keep=3), out[:, :, :3])
    assert torch.equal(ad.adapt(z2), out)                             # keep=16 > 5 frames: all of them
    up_again, ad_again = build_upscaler(UpscalerConfig.tiny(), seed=0), build_adapter(AdapterConfig.tiny(), seed=0)
    assert torch.equal(up_again.upscale(z), z2) and torch.equal(ad_again.adapt(z2, keep=None), out)
    assert not torch.equal(build_upscaler(UpscalerConfig.tiny(), seed=1).upscale(z), z2)
    assert not torch.equal(build_adapter(AdapterConfig.tiny(), seed=1).adapt(z2, keep=None), out)


def test_full_param_counts_meta():
    up, ad = build_upscaler(UpscalerConfig.full(), "meta"), build_adapter(AdapterConfig.full(), "meta")
    assert n_params(up) == 342_097_624
    assert n_params(ad) == 194_759_504 and abs(n_params(ad) / 194.8e6 - 1) < 0.005
    keys = set(ad.state_dict())
    assert {"skip.weight", "stem.bias", "final_norm.weight", "head.weight", "blocks.21.out_proj.weight"} <= keys
    assert ad.state_dict()["blocks.0.temporal.weight"].shape == (752, 1, 3, 1, 1)
    assert ad.state_dict()["blocks.0.in_proj.weight"].shape == (3008, 752, 1, 1, 1)
    assert len(up.in_blocks) == len(up.out_blocks) == 12 and len(up.in_temporal) == 6


def test_full_shape_chain_meta():
    up, ad = build_upscaler(UpscalerConfig.full(), "meta"), build_adapter(AdapterConfig.full(), "meta")
    z2 = up.upscale(torch.empty(1, 24, 37, 24, 42, device="meta"))
    assert z2.shape == (1, 24, 37, 48, 84)
    assert pack_geometry(z2).shape == (1, 384, 17, 24, 42)
    assert ad.adapt(z2, keep=None).shape == (1, 128, 17, 24, 42)
    assert ad.adapt(z2).shape == (1, 128, 16, 24, 42)


def test_upscaler_chunks_and_stats():
    up = build_upscaler(UpscalerConfig.tiny(), seed=0)
    z = torch.randn(1, 24, 40, 4, 6)
    y = up.upscale(z)                                                # chunks of 32 + 8, no overlap
    sep = torch.cat([up.upscale(z[:, :, :32]), up.upscale(z[:, :, 32:])], dim=2)
    torch.testing.assert_close(y, sep, rtol=0, atol=1e-6)
    whole = build_upscaler(dataclasses.replace(UpscalerConfig.tiny(), chunk_frames=64), seed=0).upscale(z)
    assert not torch.allclose(y, whole, atol=1e-4)                   # the chunk edge matters
    mean, std = torch.linspace(-1, 1, 24), torch.linspace(0.5, 2, 24)
    up.set_stats(mean, std)
    zs = z[:, :, :8]
    m, s = mean[:, None, None, None], std[:, None, None, None]
    torch.testing.assert_close(up.upscale(zs), up((zs - m) / s) * s + m)


# ---------------------------------------------------------------------------------------------------- geometry
def test_positions_and_frames():
    pos = h3_positions(37)
    assert pos[:7] == [0, 4, 8, 12, 16, 17, 21] and pos[-2:] == [119, 123]
    assert ltx_frames(37) == 17                                        # 124 frames -> 129 = 8*16+1
    # tokens 1, 2, 3, 5, 6 -> frames 1, 5, 9, 17, 18 -> padded 1, 9, 9, 17, 25
    assert [ltx_frames(t) for t in (1, 2, 3, 5, 6)] == [1, 2, 2, 3, 4]
    lo, hi, w, slots = resample_positions(37)
    assert (lo[15], hi[15], w[15]) == (35, 36, 0.25)                  # frame 120 between 119 and 123
    assert (lo[16], hi[16], w[16], slots[16]) == (36, 36, 0.0, [36, 36, 36])     # frame 128: clamp


def test_positions_match_vae_rule():
    from runtime.vae import h3_video_frames  # the VAE's own frame count for k + 1 tokens

    assert h3_positions(42) == [h3_video_frames(k + 1) - 1 for k in range(42)]
    assert h3_video_frames(37) == 124


def test_pack_geometry_by_hand():
    # value = token index + 100 * (2y + x): the linear/slot part reads off the token, the hundreds the unshuffle
    t = torch.arange(9.0)[:, None, None]
    q = torch.tensor([[0.0, 1.0], [2.0, 3.0]])
    z = (t + 100 * q).expand(9, 2, 2)[None, None]                     # [1, 1, 9, 2, 2]
    out = pack_geometry(z)
    assert out.shape == (1, 16, 5, 1, 1)
    # positions [0, 4, 8, 12, 16, 17, 21, 25, 29]; LTX frames 0, 8, 16, 24, 32
    linear = [0, 2, 4, 6.75, 8]                                        # 24 = 21 + 3/4 of (25 - 21); 32 clamps
    # slot targets 8i - 8 + 8(s+1)/3, e.g. i=3: 18.67 -> 17 (token 5), 21.33 -> 21 (6), 24 -> 25 (7)
    slots = [[0, 0, 0], [1, 1, 2], [3, 3, 4], [5, 6, 7], [7, 8, 8]]
    want = torch.tensor([[linear[i], *slots[i]] for i in range(5)])   # [Tl, 4 groups]
    got = out[0, :, :, 0, 0].view(4, 4, 5)                            # [group, 2dy+dx, Tl]
    for j in range(4):
        torch.testing.assert_close(got[:, j], want.T + 100 * j)
    assert resample_positions(9) == ([0, 2, 4, 6, 8], [1, 3, 5, 7, 8], [0.0, 0.0, 0.0, 0.75, 0.0], slots)


# ---------------------------------------------------------------------------------------------------- checkpoint
def same(a, b) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


@pytest.mark.parametrize("name", ["adapter.safetensors", "adapter_dir"])
def test_checkpoint_roundtrip(tmp_path, name):
    m = build_adapter(AdapterConfig.tiny(), seed=3)
    f = save_adapter(tmp_path / name, m)
    with safe_open(str(f), "pt") as h:
        meta = h.metadata()
    assert meta["format"] == FORMAT and json.loads(meta["manifest"])["config"]["width"] == 32
    if name == "adapter_dir":
        assert f == tmp_path / name / "model.safetensors" and (tmp_path / name / "manifest.json").is_file()
    m2 = load_adapter_checkpoint(tmp_path / name, "cpu", expect=AdapterConfig.tiny())
    assert same(m, m2) and m2.c == AdapterConfig.tiny()
    z = torch.randn(1, 24, 9, 8, 12)
    assert torch.equal(m.adapt(z), m2.adapt(z))


def _write(path, tensors, meta):
    save_file(tensors, str(path), metadata=meta)
    return path


def _bad_files(tmp_path):
    """(name, path, words the error must contain) for each broken checkpoint."""
    m = build_adapter(AdapterConfig.tiny(), seed=0)
    sd = {k: v.contiguous() for k, v in m.state_dict().items()}
    man = manifest(m)
    meta = {"format": FORMAT, "manifest": json.dumps(man)}
    good = save_adapter(tmp_path / "good.safetensors", m)
    raw = good.read_bytes()
    cfg_bad = {**man, "config": {**man["config"], "hidden": "64"}}
    cfg_extra = {**man, "config": {**man["config"], "heads": 4}}
    return [
        ("format", _write(tmp_path / "fmt.safetensors", sd, {**meta, "format": "ltx_v0"}), ["'format'", "ltx_v0"]),
        ("missing", _write(tmp_path / "miss.safetensors", {k: v for k, v in sd.items() if k != "blocks.1.norm.bias"},
                           meta), ["missing key", "'blocks.1.norm.bias'"]),
        ("unexpected", _write(tmp_path / "extra.safetensors", {**sd, "blocks.2.norm.weight": sd["head.bias"].clone()}, meta),
         ["unexpected key", "'blocks.2.norm.weight'"]),
        ("shape", _write(tmp_path / "shape.safetensors", {**sd, "stem.weight": sd["stem.weight"][:16]}, meta),
         ["'stem.weight'", "(16, 384, 3, 3, 3)"]),
        ("count", _write(tmp_path / "count.safetensors", sd, {**meta, "manifest": json.dumps({**man, "tensors": 7})}),
         ["'tensors'"]),
        ("no manifest", _write(tmp_path / "noman.safetensors", sd, {"format": FORMAT}), ["'manifest'"]),
        ("config type", _write(tmp_path / "cfgt.safetensors", sd, {**meta, "manifest": json.dumps(cfg_bad)}),
         ["'config.hidden'"]),
        ("config key", _write(tmp_path / "cfgk.safetensors", sd, {**meta, "manifest": json.dumps(cfg_extra)}),
         ["'config.heads'", "unexpected"]),
        ("truncated", _bytes(tmp_path / "trunc.safetensors", raw[: len(raw) // 2]), ["not a readable"]),
        ("garbage", _bytes(tmp_path / "junk.safetensors", b"not safetensors at all"), ["not a readable"]),
        ("absent", tmp_path / "nope.safetensors", ["does not exist"]),
    ]


def _bytes(path, data: bytes):
    path.write_bytes(data)
    return path


def test_checkpoint_errors_name_file_and_key(tmp_path):
    for name, path, words in _bad_files(tmp_path):
        with pytest.raises(CheckpointError) as e:
            load_adapter_checkpoint(path)
        msg = str(e.value)
        assert str(path) in msg and "\n" not in msg, (name, msg)
        for w in words:
            assert w in msg, (name, w, msg)


def test_checkpoint_expect_and_directory_errors(tmp_path):
    m = build_adapter(AdapterConfig.tiny(), seed=0)
    f = save_adapter(tmp_path / "a.safetensors", m)
    with pytest.raises(CheckpointError, match=r"a\.safetensors: manifest key 'config\.blocks' = 2, the caller expects 22"):
        load_adapter_checkpoint(f, expect=AdapterConfig.full())
    d = tmp_path / "d"
    save_adapter(d, m)
    (d / "manifest.json").write_text("{oops")
    with pytest.raises(CheckpointError, match=r"manifest\.json: not a readable JSON manifest"):
        load_adapter_checkpoint(d)
    (d / "manifest.json").write_text(json.dumps({**manifest(m), "format": "other"}))
    with pytest.raises(CheckpointError, match=r"manifest\.json: manifest key 'format' is 'other'"):
        load_adapter_checkpoint(d)
    (d / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match=r"model\.safetensors: missing"):
        load_adapter_checkpoint(d)
