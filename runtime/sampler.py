"""Flow-matching Euler sampler (eta = 0) with shifted sigma schedules (H3_SPEC.md section 4).

``b = linspace(1, 0, N)`` fp32, ``sigma = s*b / (1 + (s-1)*b)``, unique_consecutive, append 0; video shift 12,
audio shift 3 on the same base grid. The model predicts a data-ward velocity: ``x0 = x_t + sigma * v``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

VIDEO_SHIFT = 12.0
AUDIO_SHIFT = 3.0
BASE_STEPS = 49                                  # N = 50 sigma points
FASTH3_BASE = (0.999, 0.749, 0.5, 0.25, 0.0)     # FastH3 (DMD2 student): 4 forwards
VIDEO_COND_AUG = 0.999                           # condition rows: aug * clean + (1 - aug) * noise
AUDIO_COND_AUG = 1.0


def shift_sigmas(base: torch.Tensor, shift: float) -> torch.Tensor:
    """fp32 sigma = s*b / (1 + (s-1)*b), then unique_consecutive, then a trailing 0 if missing."""
    b = base.float()
    sig = torch.unique_consecutive(shift * b / (1 + (shift - 1) * b))
    if sig[-1] != 0:
        sig = torch.cat([sig, sig.new_zeros(1)])
    return sig


def base_grid(kind: str, steps: int) -> torch.Tensor:
    if kind == "fasth3":
        return torch.tensor(FASTH3_BASE, dtype=torch.float32)
    if kind == "base":
        return torch.linspace(1, 0, steps + 1, dtype=torch.float32)
    raise ValueError(f"unknown schedule {kind!r}; use base or fasth3")


@dataclass(frozen=True)
class Schedule:
    name: str
    video: torch.Tensor          # [steps + 1] fp32, ends in 0
    audio: torch.Tensor          # [steps + 1] fp32

    @property
    def steps(self) -> int:      # forwards
        return len(self.video) - 1

    def timesteps(self, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(t_v, t_a) of step k: t = 1 - sigma, unscaled, fp32 0-dim tensors."""
        return 1 - self.video[k], 1 - self.audio[k]

    def to_json(self) -> dict:
        return {"name": self.name, "steps": self.steps, "video_sigmas": self.video.tolist(),
                "audio_sigmas": self.audio.tolist()}


def make_schedule(kind: str = "base", steps: int = BASE_STEPS, video_shift: float = VIDEO_SHIFT,
                  audio_shift: float = AUDIO_SHIFT) -> Schedule:
    """``base`` with N = steps + 1 points (49 forwards by default) or ``fasth3`` (4 forwards, steps ignored)."""
    b = base_grid(kind, steps)
    video, audio = shift_sigmas(b, video_shift), shift_sigmas(b, audio_shift)
    if len(video) != len(audio):
        raise ValueError("video and audio schedules differ in length after unique_consecutive")
    return Schedule(kind, video, audio)


def euler_step(x: torch.Tensor, v: torch.Tensor, sigma: torch.Tensor, sigma_next: torch.Tensor) -> torch.Tensor:
    """fp32: t = 1 - sigma; x0 = x + (1 - t) v; x_next = (sigma'/sigma) x + (1 - sigma'/sigma) x0."""
    t = 1 - sigma
    x0 = x + (1 - t) * v
    r = sigma_next / sigma
    return r * x + (1 - r) * x0


def condition_reset(clean: torch.Tensor, seed: int, aug: float) -> torch.Tensor:
    """Condition rows each step: aug * clean + (1 - aug) * noise, noise from a fresh CPU generator (seed for video,
    seed + 1 for audio). With aug = 1.0 (audio) the rows are just the clean latents."""
    g = torch.Generator().manual_seed(seed)
    noise = torch.randn(clean.shape, generator=g, dtype=torch.float32).to(clean.device)
    return aug * clean.float() + (1 - aug) * noise


def initial_noise(shape_video: tuple[int, ...], audio_rows: int, audio_ch: int, seed: int
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """Video randn(1, 24, F, Hl, Wl) from seed; audio randn(2 T_a, 32) from a new generator with the same seed
    (CPU generators, so the noise is the same on every device)."""
    video = torch.randn((1, *shape_video), generator=torch.Generator().manual_seed(seed))
    audio = torch.randn((audio_rows, audio_ch), generator=torch.Generator().manual_seed(seed))
    return video[0], audio
