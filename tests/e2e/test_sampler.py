"""Sigma schedules and the Euler step against hand-computed values of H3_SPEC.md section 4."""

from __future__ import annotations

import pytest
import torch

from runtime.packing import patchify_video
from runtime.sampler import condition_noise, euler_step, initial_noise, make_schedule, shift_sigmas


def shifted(s: float, b: float) -> float:
    return s * b / (1 + (s - 1) * b)


def test_fasth3_schedule():
    sch = make_schedule("fasth3")
    assert sch.steps == 4
    # video shift 12: 11.988/11.989, 8.988/9.239, 6/6.5, 3/3.75, 0
    want_v = [11.988 / 11.989, 8.988 / 9.239, 12 / 13, 0.8, 0.0]
    assert sch.video.tolist() == pytest.approx(want_v, abs=1e-6)
    assert sch.video.tolist() == pytest.approx([0.99992, 0.97283, 0.92308, 0.8, 0.0], abs=1e-5)
    # audio shift 3: 2.997/2.998, 2.247/2.498, 0.75, 0.5, 0
    assert sch.audio.tolist() == pytest.approx([2.997 / 2.998, 2.247 / 2.498, 0.75, 0.5, 0.0], abs=1e-6)
    assert sch.video.dtype == torch.float32
    t_v, t_a = sch.timesteps(3)
    assert t_v.item() == pytest.approx(0.2, abs=1e-7) and t_a.item() == pytest.approx(0.5, abs=1e-7)


def test_base_schedule_49_forwards():
    sch = make_schedule("base")                      # N = 50 points, linspace(1, 0, 50)
    assert sch.steps == 49 and len(sch.video) == 50
    assert sch.video[0] == 1 and sch.video[-1] == 0 and sch.audio[0] == 1
    assert sch.video[1].item() == pytest.approx(576 / 577, abs=1e-6)         # 12*(48/49) / (1 + 11*48/49)
    assert sch.audio[1].item() == pytest.approx(144 / 145, abs=1e-6)         # 3*(48/49) / (1 + 2*48/49)
    assert sch.video[25].item() == pytest.approx(shifted(12, 24 / 49), abs=1e-6)
    assert (sch.video[1:] < sch.video[:-1]).all()


def test_unique_consecutive_and_trailing_zero():
    s = shift_sigmas(torch.tensor([1.0, 1.0, 0.5, 0.0]), 12.0)
    assert s.tolist() == pytest.approx([1.0, 12 / 13, 0.0], abs=1e-6)
    s = shift_sigmas(torch.tensor([1.0, 0.5]), 3.0)                           # no 0: appended
    assert s.tolist() == pytest.approx([1.0, 0.75, 0.0], abs=1e-6)


def test_euler_step_by_hand():
    # x0 = x + sigma v = 1 + 0.8 * 2 = 2.6; r = 0.5 / 0.8 = 0.625; x' = 0.625 * 1 + 0.375 * 2.6 = 1.6
    out = euler_step(torch.tensor([1.0]), torch.tensor([2.0]), torch.tensor(0.8), torch.tensor(0.5))
    assert out.item() == pytest.approx(1.6, abs=1e-6)
    # last step (sigma' = 0) lands on x0
    out = euler_step(torch.tensor([1.0]), torch.tensor([2.0]), torch.tensor(0.8), torch.tensor(0.0))
    assert out.item() == pytest.approx(2.6, abs=1e-6)


@pytest.mark.parametrize("kind", ["base", "fasth3"])
def test_exact_velocity_reaches_data(kind):
    """A model whose data-ward velocity is exact, v = (c - x) / sigma, ends on c."""
    sch = make_schedule(kind, 49)
    c = torch.randn(64)
    x = torch.randn(64)
    for k in range(sch.steps):
        x = euler_step(x, (c - x) / sch.video[k], sch.video[k], sch.video[k + 1])
    assert torch.allclose(x, c, atol=1e-5)


def test_noise_and_condition_reset():
    v, a = initial_noise((24, 2, 4, 8), 16, 32, seed=5)
    v2, a2 = initial_noise((24, 2, 4, 8), 16, 32, seed=5)
    assert torch.equal(v, v2) and torch.equal(a, a2) and v.shape == (24, 2, 4, 8) and a.shape == (16, 32)
    assert torch.equal(a, torch.randn((16, 32), generator=torch.Generator().manual_seed(5)))


def test_condition_noise_per_condition():
    """FL2VA keyframes (diffusers 0.42.1 MiniMaxH3PrepareConditionLatentsStep): one generator from the request
    seed, one draw per condition in its latent shape [1, 24, t, Hl, Wl], in packed order, mixed at t = 0.999
    (fp32 tensor arithmetic), then patchified."""
    first = torch.randn(24, 1, 4, 8)
    last = first.clone()                                    # same clean latents: only the noise tells them apart
    rows = condition_noise([first, last], seed=7, aug=0.999)
    assert rows.shape == (2 * 8, 96) and rows.dtype == torch.float32
    assert not torch.equal(rows[:8], rows[8:])            # each condition has its own draw
    assert torch.equal(rows, condition_noise([first, last], seed=7, aug=0.999))
    assert not torch.equal(rows, condition_noise([first, last], seed=8, aug=0.999))
    g = torch.Generator().manual_seed(7)
    t = torch.tensor(0.999, dtype=torch.float32)
    want = [patchify_video(t * c + (1.0 - t) * torch.randn((1, 24, 1, 4, 8), generator=g)[0]) for c in (first, last)]
    assert torch.equal(rows, torch.cat(want))
    assert 0 < (rows[:8] - patchify_video(first)).abs().max() < 0.01
    assert torch.equal(condition_noise([first], seed=7, aug=1.0), patchify_video(first))     # aug 1: clean
