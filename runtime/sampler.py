"""Flow-matching Euler sampler (eta = 0) with shifted sigma schedules (H3_SPEC.md section 4).

``b = linspace(1, 0, N)`` fp32, ``sigma = s*b / (1 + (s-1)*b)``, unique_consecutive, append 0; video shift 12,
audio shift 3 on the same base grid. The model predicts a data-ward velocity: ``x0 = x_t + sigma * v``.
Base grids: ``base`` (uniform), ``fasth3`` (the FastH3 student's 4 forwards) or ``checkpoint`` (a release's
``base_schedule``, runtime.release).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from runtime.packing import patchify_video

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


def base_grid(kind: str, steps: int, base: Sequence[float] | None = None) -> torch.Tensor:
    if kind == "fasth3":
        return torch.tensor(FASTH3_BASE, dtype=torch.float32)
    if kind == "base":
        return torch.linspace(1, 0, steps + 1, dtype=torch.float32)
    if kind == "checkpoint" and base is not None:
        return torch.tensor(list(base), dtype=torch.float32)
    raise ValueError(f"unknown schedule {kind!r}; use base, fasth3 or checkpoint (with base=)")


@dataclass(frozen=True)
class Schedule:
    name: str                    # base | fasth3 | checkpoint
    video: torch.Tensor          # [steps + 1] fp32, ends in 0
    audio: torch.Tensor          # [steps + 1] fp32
    video_shift: float = VIDEO_SHIFT
    audio_shift: float = AUDIO_SHIFT
    source: str = "built-in"     # where the base grid came from (a model_index.json for checkpoint)
    shift_source: str = "built-in"
    why: str = ""                # why this schedule was picked (runtime.request.pick_schedule)

    @property
    def steps(self) -> int:      # forwards
        return len(self.video) - 1

    def timesteps(self, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(t_v, t_a) of step k: t = 1 - sigma, unscaled, fp32 0-dim tensors."""
        return 1 - self.video[k], 1 - self.audio[k]

    def describe(self) -> str:
        return (f"{self.name}, {self.steps} steps (video shift {self.video_shift:g}, audio shift {self.audio_shift:g}); "
                f"grid: {self.source}; shifts: {self.shift_source}" + (f"; {self.why}" if self.why else ""))

    def to_json(self) -> dict:
        return {"name": self.name, "steps": self.steps, "video_shift": self.video_shift,
                "audio_shift": self.audio_shift, "source": self.source, "shift_source": self.shift_source,
                "why": self.why, "video_sigmas": self.video.tolist(), "audio_sigmas": self.audio.tolist()}


def make_schedule(kind: str = "base", steps: int = BASE_STEPS, video_shift: float = VIDEO_SHIFT,
                  audio_shift: float = AUDIO_SHIFT, base: Sequence[float] | None = None, **info: str) -> Schedule:
    """``base`` with N = steps + 1 points (49 forwards by default), ``fasth3`` (4 forwards, steps ignored) or
    ``checkpoint`` (the positions ``base``). ``info``: source / shift_source / why, reported only."""
    b = base_grid(kind, steps, base)
    video, audio = shift_sigmas(b, video_shift), shift_sigmas(b, audio_shift)
    if len(video) != len(audio):
        raise ValueError("video and audio schedules differ in length after unique_consecutive")
    return Schedule(kind, video, audio, float(video_shift), float(audio_shift), **info)


def euler_step(x: torch.Tensor, v: torch.Tensor, sigma: torch.Tensor, sigma_next: torch.Tensor) -> torch.Tensor:
    """fp32: t = 1 - sigma; x0 = x + (1 - t) v; x_next = (sigma'/sigma) x + (1 - sigma'/sigma) x0."""
    t = 1 - sigma
    x0 = x + (1 - t) * v
    r = sigma_next / sigma
    return r * x + (1 - r) * x0


def condition_noise(latents: Sequence[torch.Tensor], seed: int, aug: float = VIDEO_COND_AUG) -> torch.Tensor:
    """FL2VA condition rows [C, 96] fp32 from the clean condition latents ([24, t, Hl, Wl] each, packed order), as
    diffusers 0.42.1 (MiniMaxH3PrepareConditionLatentsStep) noises them: one CPU generator from ``seed``, one draw
    per condition in its own latent shape [1, 24, t, Hl, Wl] (a keyframe: its one frame), ``t * clean + (1 - t) *
    noise`` with t an fp32 tensor, then patchified. The rows are held for every step. aug = 1: the clean rows."""
    g, t = torch.Generator().manual_seed(seed), torch.tensor(aug, dtype=torch.float32)
    rows = []
    for z in latents:
        noise = torch.randn((1, *z.shape), generator=g, dtype=torch.float32)[0]
        mixed = z.float().cpu() if aug == 1.0 else t * z.float().cpu() + (1.0 - t) * noise
        rows.append(patchify_video(mixed))
    return torch.cat(rows).to(latents[0].device)


def initial_noise(shape_video: tuple[int, ...], audio_rows: int, audio_ch: int, seed: int
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """Video randn(1, 24, F, Hl, Wl) from seed; audio randn(2 T_a, 32) from a new generator with the same seed
    (CPU generators, so the noise is the same on every device)."""
    video = torch.randn((1, *shape_video), generator=torch.Generator().manual_seed(seed))
    audio = torch.randn((audio_rows, audio_ch), generator=torch.Generator().manual_seed(seed))
    return video[0], audio
