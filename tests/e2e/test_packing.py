"""Shape planner and packed sequence against hand-computed values of H3_SPEC.md section 2."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from runtime.packing import (
    RequestError,
    build_sequence,
    canvas_for_aspect,
    modulation_index,
    pack_audio,
    patchify_video,
    plan_request,
    snap_frames,
    unpack_audio,
    unpatchify_video,
)


def test_plan_1344x768_5s():
    p = plan_request(5.0, 1344, 768)
    assert p.frames == 124 and p.latent_shape == (24, 37, 48, 84)
    assert p.rows_per_frame == 24 * 42 == 1008
    assert p.video_rows == 37_296
    assert p.audio_t == 207 and p.audio_rows == 414          # round(124 / 24 * 40) = round(206.67)


def test_plan_672x384_5s():
    p = plan_request(5.0, 672, 384)
    assert p.latent_shape == (24, 37, 24, 42)
    assert p.rows_per_frame == 252 and p.video_rows == 9_324 and p.audio_rows == 414


def test_plan_10s_and_snapping():
    assert snap_frames(120) == snap_frames(121) == 124 and snap_frames(5) == 5 and snap_frames(6) == 22
    p = plan_request(10.0, 1344, 768)
    assert p.frames == 243 and p.latent_t == 72 and p.video_rows == 72_576 and p.audio_t == 405


@pytest.mark.parametrize("dur,w,h,msg", [(5, 1000, 768, "multiples of 32"), (5, 1344, 770, "multiples of 32"),
                                         (0, 672, 384, "duration"), (10.5, 672, 384, "duration"),
                                         (5, 1376, 800, "area")])
def test_bad_requests(dur, w, h, msg):
    with pytest.raises(RequestError, match=msg):
        plan_request(dur, w, h)


@pytest.mark.parametrize("aspect,canvas", [((16, 9), (1344, 768)), ((9, 16), (768, 1344)), ((1, 1), (768, 768)),
                                           ((21, 9), (1536, 672)), ((4, 1), (2016, 512)), ((2, 1), (1440, 704))])
def test_canvas_for_aspect(aspect, canvas):
    """diffusers 0.42.1 resolve_canvas_size: short edge 768, area scaled down to 768*1344, each edge rounded to the
    nearest multiple of 32. 21:9: 1792x768 -> x0.866 -> 1551.8x665.1 -> 1536x672."""
    assert canvas_for_aspect(*aspect) == canvas


def test_canvas_aspect_limits_and_rounding_overshoot():
    with pytest.raises(RequestError, match="aspect"):
        canvas_for_aspect(5, 1)
    w, h = canvas_for_aspect(5, 9)                        # rounding may end slightly above the pixel budget
    assert (w, h) == (768, 1376) and w * h > 1344 * 768
    assert plan_request(1.0, w, h, canvas=True).latent_w == w // 16
    with pytest.raises(RequestError, match="area"):
        plan_request(1.0, w, h)


def test_layout_and_padding():
    L = 20
    seq = build_sequence(plan_request(5.0, 1344, 768), L)
    assert seq.used == L + 414 + 37_296 == 37_730 and seq.total == 37_760 and seq.total % 64 == 0
    assert seq.cu_seqlens == [0, 37_730, 37_760]
    assert (seq.text, seq.audio, seq.video) == (slice(0, 20), slice(20, 434), slice(434, 37_730))
    tags = seq.tags
    assert (tags[:20] == 1).all() and (tags[20:434] == 2).all() and (tags[434:37_730] == 0).all()
    assert (tags[37_730:] == -1).all()
    s = build_sequence(plan_request(5.0, 672, 384), L)
    assert s.used == L + 9_738 and s.total == 9_792


def test_positions_1344x768():
    L = 20
    seq = build_sequence(plan_request(5.0, 1344, 768), L)
    pos = seq.positions
    # text: (i, 0, 0)
    assert np.array_equal(pos[:L], np.stack([np.arange(L), np.zeros(L), np.zeros(L)], 1))
    # spatial grid: r_h = 48/sqrt(48*84) = sqrt(4/7), r_w = sqrt(7/4); 24 and 42 points, endpoint excluded, x32
    rh, rw = math.sqrt(4 / 7), math.sqrt(7 / 4)
    h = [((1 - rh) / 2 + i * rh / 24) * 32 for i in range(24)]
    w = [((1 - rw) / 2 + j * rw / 42) * 32 for j in range(42)]
    assert h[0] == pytest.approx(3.905137, abs=1e-6) and w[0] == pytest.approx(-5.166010, abs=1e-6)
    # video clock: L + 0, 5/3, 25/3, 45/3, 65/3, 85/3 (next clip), 90/3, ...; last latent (k = 36) at L + 200
    clock = {0: 0, 1: 5 / 3, 2: 25 / 3, 4: 65 / 3, 5: 85 / 3, 6: 30, 36: 200}
    v0 = seq.video.start
    for k, t in clock.items():
        for (i, j) in ((0, 0), (3, 5), (23, 41)):
            row = pos[v0 + k * 1008 + i * 42 + j]
            assert row == pytest.approx([L + t, h[i], w[j]], abs=1e-9), (k, i, j)
    # audio: t = L + a; h = 0; w = w_grid[0] (channel 0) and w_grid[-1] (channel 1)
    a0 = seq.audio.start
    assert pos[a0 + 10] == pytest.approx([L + 10, 0, w[0]], abs=1e-9)
    assert pos[a0 + 207 + 10] == pytest.approx([L + 10, 0, w[41]], abs=1e-9)
    assert pos[a0 + 206] == pytest.approx([L + 206, 0, w[0]], abs=1e-9)


def test_positions_672x384_same_extent():
    """Half the canvas: same r (sqrt(4/7)), so the same extent with half the points (twice the step)."""
    pos = build_sequence(plan_request(5.0, 672, 384), 5).positions
    v0 = 5 + 414
    rh = math.sqrt(4 / 7)
    assert pos[v0][1] == pytest.approx((1 - rh) / 2 * 32, abs=1e-9)
    assert pos[v0 + 21][1] - pos[v0][1] == pytest.approx(rh / 12 * 32, abs=1e-9)    # next h row (21 per row)
    assert pos[v0 + 252 * 36][0] == pytest.approx(5 + 200, abs=1e-9)


def test_fl2va_keyframes():
    """First keyframe at t = L; last at L + span(37) - 5/3 = L + 620/3 - 5/3 = L + 205."""
    L = 7
    seq = build_sequence(plan_request(5.0, 672, 384), L, keyframes=("first", "last"))
    assert seq.cond_rows == 2 * 252 and seq.cond == slice(7, 7 + 504)
    assert seq.positions[7][0] == L and seq.positions[7 + 252][0] == pytest.approx(L + 205, abs=1e-9)
    assert (seq.tags[seq.cond] == 0).all()


def test_modulation_indices():
    seq = build_sequence(plan_request(0.2, 128, 64), 3)            # T2VA: text 3, audio 16, video 16, pad
    u, inv, idx = modulation_index(seq, torch.tensor(0.2), torch.tensor(0.5))
    assert torch.equal(u, torch.tensor([0.2, 0.5]))
    assert (idx[seq.text] == 1).all() and (idx[seq.video] == 0).all() and (idx[seq.audio] == 5).all()
    assert (idx[seq.used:] == 0).all() and (inv[seq.audio] == 1).all()
    u, inv, idx = modulation_index(seq, torch.tensor(0.7), torch.tensor(0.3))   # audio before video now
    assert (idx[seq.text] == 4).all() and (idx[seq.video] == 3).all() and (idx[seq.audio] == 2).all()
    assert (idx[seq.used:] == 3).all()
    # FL2VA: condition rows at max(t_v, 0.999) -> a third timestep, index 2 * 3 + 0
    fl = build_sequence(plan_request(0.2, 128, 64), 3, keyframes=("first",))
    u, inv, idx = modulation_index(fl, torch.tensor(0.2), torch.tensor(0.5))
    assert torch.equal(u, torch.tensor([0.2, 0.5, 0.999])) and (idx[fl.cond] == 6).all()
    u, _, idx = modulation_index(seq, torch.tensor(0.4), torch.tensor(0.4))     # one timestep: M = 1
    assert len(u) == 1 and set(idx.tolist()) == {0, 1, 2}


def test_patchify_roundtrip_and_order():
    p = plan_request(0.2, 128, 64)
    z = torch.randn(p.latent_shape)
    rows = patchify_video(z)
    assert rows.shape == (p.video_rows, 96)
    assert torch.equal(unpatchify_video(rows, p), z)
    # row (t=1, h=1, w=3) of the 2x4 grid, feature (c=5, ph=1, pw=0)
    assert p.grid == (2, 4)
    assert rows[1 * p.rows_per_frame + 1 * p.grid[1] + 3, 5 * 4 + 2] == z[5, 1, 1 * 2 + 1, 3 * 2]
    a = torch.randn(2, 32, 9)
    ar = pack_audio(a)
    assert ar.shape == (18, 32) and torch.equal(ar[9], a[1, :, 0]) and torch.equal(unpack_audio(ar), a)
