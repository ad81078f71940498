"""Sigma schedules and the Euler step against hand-computed values of H3_SPEC.md section 4."""

from __future__ import annotations

import pytest
import torch

from runtime.sampler import condition_reset, euler_step, initial_noise, make_schedule, shift_sigmas


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
    clean = torch.randn(10, 96)
    assert torch.equal(condition_reset(clean, 1, 1.0), clean)                 # audio: aug 1.0 -> clean
    r1, r2 = condition_reset(clean, 3, 0.999), condition_reset(clean, 3, 0.999)
    assert torch.equal(r1, r2) and 0 < (r1 - clean).abs().max() < 0.01
