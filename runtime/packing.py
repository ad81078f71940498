"""Shape planner and packed-sequence builder (H3_SPEC.md section 2).

One forward sees ``[text L | condition video C | audio A = 2*T_a | target video V | pad]`` padded to a multiple of
64, as one full-attention document plus a pad document (``cu_seqlens = [0, used, S]``). Per row this module gives
the 3-D position ids (fp64), the modality tag and, per step, the timestep and the AdaLN modulation-row index
``inverse_index * 3 + clamp(tag, 0)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

FPS = 24
AUDIO_LATENTS_PER_S = 40
LATENT_CH = 24
AUDIO_CH = 32
VAE_SPATIAL = 16
PATCH = 2                      # video patch (1, 2, 2)
ROW_MULTIPLE = 64
CANVAS_MULTIPLE = 32
MAX_AREA = 1344 * 768
MIN_ASPECT = 1 / 4             # the aspect ratios H3 was trained over: 1:4 .. 4:1
MAX_DURATION_S = 10.0          # 243 frames, 72 latents (the longest request H3_SPEC.md lists)
TAG_VIDEO, TAG_TEXT, TAG_AUDIO, TAG_PAD = 0, 1, 2, -1
COND_T = 0.999                 # condition video rows run at max(t_v, 0.999)
SPANS = (5.0 / 3.0) * np.array([1.0, 4.0, 4.0, 4.0, 4.0])   # clock units per latent frame (40 units/s)


class RequestError(ValueError):
    """A request the runtime refuses before doing any work; the message says what to change."""


# ------------------------------------------------------------------------------------------------ shape planner
def snap_frames(frames: int) -> int:
    """Frames snapped up to 17n + 5 (121 -> 124)."""
    n = max(0, math.ceil((frames - 5) / 17))
    return 17 * n + 5


@dataclass(frozen=True)
class ShapePlan:
    width: int
    height: int
    duration_s: float
    fps: int
    frames: int                # 17n + 5
    latent_t: int              # 5n + 2
    latent_h: int
    latent_w: int
    audio_t: int               # audio latents per channel, 40/s

    @property
    def latent_shape(self) -> tuple[int, int, int, int]:
        return (LATENT_CH, self.latent_t, self.latent_h, self.latent_w)

    @property
    def grid(self) -> tuple[int, int]:                # patch grid per latent frame
        return self.latent_h // PATCH, self.latent_w // PATCH

    @property
    def rows_per_frame(self) -> int:
        return self.grid[0] * self.grid[1]

    @property
    def video_rows(self) -> int:
        return self.latent_t * self.rows_per_frame

    @property
    def audio_rows(self) -> int:               # stereo, channel-major
        return 2 * self.audio_t

    @property
    def audio_samples(self) -> int:
        return self.audio_t * 800

    def to_json(self) -> dict:
        return {"width": self.width, "height": self.height, "duration_s": self.duration_s, "fps": self.fps,
                "frames": self.frames, "latent": list(self.latent_shape), "rows_per_frame": self.rows_per_frame,
                "video_rows": self.video_rows, "audio_t": self.audio_t, "audio_rows": self.audio_rows}


def plan_request(duration_s: float, width: int, height: int, fps: int = FPS, canvas: bool = False) -> ShapePlan:
    """5 s at 1344x768 -> 124 frames, latent [24, 37, 48, 84], 37,296 video rows, 414 audio rows.
    ``canvas``: width x height came from ``canvas_for_aspect``, whose rounding may exceed the area budget."""
    if not (duration_s > 0 and duration_s <= MAX_DURATION_S):
        raise RequestError(f"--duration {duration_s} s is not supported: use 0 < duration <= {MAX_DURATION_S:g} s "
                           f"(frames are snapped up to 17n+5 at {fps} fps)")
    if width % CANVAS_MULTIPLE or height % CANVAS_MULTIPLE or width <= 0 or height <= 0:
        raise RequestError(f"--resolution {width}x{height}: width and height must be positive multiples of "
                           f"{CANVAS_MULTIPLE} (e.g. 1344x768 or 672x384)")
    if width * height > MAX_AREA and not canvas:
        raise RequestError(f"--resolution {width}x{height}: area {width * height} exceeds H3's canvas maximum "
                           f"{MAX_AREA} (1344x768)")
    if fps != FPS:
        raise RequestError(f"fps {fps} is not supported: H3 runs at {FPS} fps")
    frames = snap_frames(round(duration_s * fps))
    n = (frames - 5) // 17
    return ShapePlan(width=width, height=height, duration_s=duration_s, fps=fps, frames=frames, latent_t=5 * n + 2,
                     latent_h=height // VAE_SPATIAL, latent_w=width // VAE_SPATIAL,
                     audio_t=round(frames / FPS * AUDIO_LATENTS_PER_S))


def canvas_for_aspect(aspect_w: float, aspect_h: float, short: int = 768, max_area: int = MAX_AREA
                      ) -> tuple[int, int]:
    """(width, height) for an aspect ratio, the public canvas rule (diffusers 0.42.1 ``resolve_canvas_size``): short
    edge 768, both edges scaled down together to an area of 768*1344 when above it, then each rounded to the nearest
    multiple of 32 (so the area may end slightly above the budget). 16:9 -> 1344x768, 21:9 -> 1536x672."""
    if not (aspect_w > 0 and aspect_h > 0):
        raise RequestError(f"aspect ratio {aspect_w}:{aspect_h}: both sides must be positive")
    r = aspect_w / aspect_h
    if not MIN_ASPECT <= r <= 1 / MIN_ASPECT:
        raise RequestError(f"aspect ratio {aspect_w:g}:{aspect_h:g} ({r:.3g}): H3 supports 1:4 to 4:1")
    w, h = (short * r, float(short)) if r >= 1 else (float(short), short / r)
    if w * h > max_area:
        s = (max_area / (w * h)) ** 0.5
        w, h = w * s, h * s
    m = CANVAS_MULTIPLE
    return max(m, round(w / m) * m), max(m, round(h / m) * m)


# ------------------------------------------------------------------------------------------------ positions
def spatial_grid(latent_h: int, latent_w: int) -> tuple[np.ndarray, np.ndarray]:
    """h/w positions: ``linspace((1-r)/2, (1+r)/2, dim/2, endpoint=False) * 32`` with r = dim / sqrt(Hl * Wl)."""
    g = math.sqrt(latent_h * latent_w)

    def axis(dim: int) -> np.ndarray:
        r = dim / g
        return np.linspace((1 - r) / 2, (1 + r) / 2, dim // PATCH, endpoint=False) * 32

    return axis(latent_h), axis(latent_w)


def video_clock(latent_t: int, text_len: int) -> np.ndarray:
    """t of each latent frame: L + exclusive cumsum of spans (5/3)*(1,4,4,4,4)[k mod 5]."""
    spans = SPANS[np.arange(latent_t) % 5]
    return text_len + np.concatenate([[0.0], np.cumsum(spans)[:-1]])


def clip_span(latent_t: int) -> float:
    """Clock span of latent_t frames (numpy pairwise summation, as the FL2VA keyframe rule specifies)."""
    return float(np.sum(SPANS[np.arange(latent_t) % 5]))


def _frame_positions(t: float, hg: np.ndarray, wg: np.ndarray) -> np.ndarray:
    hh, ww = np.meshgrid(hg, wg, indexing="ij")                   # rows in (h, w) order
    return np.stack([np.full(hh.size, t), hh.ravel(), ww.ravel()], axis=1)


# ------------------------------------------------------------------------------------------------ the sequence
@dataclass
class PackedSequence:
    text_len: int
    cond_rows: int
    audio_rows: int
    video_rows: int
    used: int
    total: int
    keyframes: tuple[str, ...]
    positions: np.ndarray          # [S, 3] fp64 (t, h, w)
    tags: torch.Tensor             # [S] int64

    @property
    def text(self) -> slice:
        return slice(0, self.text_len)

    @property
    def cond(self) -> slice:
        return slice(self.text_len, self.text_len + self.cond_rows)

    @property
    def audio(self) -> slice:
        s = self.text_len + self.cond_rows
        return slice(s, s + self.audio_rows)

    @property
    def video(self) -> slice:
        s = self.text_len + self.cond_rows + self.audio_rows
        return slice(s, s + self.video_rows)

    @property
    def cu_seqlens(self) -> list[int]:
        return [0, self.used, self.total]

    def to(self, device: torch.device | str) -> PackedSequence:
        self.tags = self.tags.to(device)
        return self


def build_sequence(plan: ShapePlan, text_len: int, keyframes: tuple[str, ...] = ()) -> PackedSequence:
    """T2VA by default; ``keyframes`` ("first", "last") adds FL2VA condition frames (rows_per_frame each)."""
    L = text_len
    hg, wg = spatial_grid(plan.latent_h, plan.latent_w)
    text = np.stack([np.arange(L, dtype=np.float64), np.zeros(L), np.zeros(L)], axis=1)
    cond = [_frame_positions(L if k == "first" else L + clip_span(plan.latent_t) - 5.0 / 3.0, hg, wg)
            for k in keyframes]
    a = np.arange(plan.audio_t, dtype=np.float64)
    audio = np.concatenate([np.stack([L + a, np.zeros_like(a), np.full_like(a, w)], axis=1)
                            for w in (wg[0], wg[-1])])             # channel-major: ch0 t0..T-1, then ch1
    video = np.concatenate([_frame_positions(t, hg, wg) for t in video_clock(plan.latent_t, L)])
    C = len(keyframes) * plan.rows_per_frame
    used = L + C + plan.audio_rows + plan.video_rows
    total = -(-used // ROW_MULTIPLE) * ROW_MULTIPLE
    pos = np.concatenate([text, *cond, audio, video, np.zeros((total - used, 3))])
    tags = torch.cat([torch.full((L,), TAG_TEXT), torch.full((C,), TAG_VIDEO), torch.full((plan.audio_rows,), TAG_AUDIO),
                      torch.full((plan.video_rows,), TAG_VIDEO), torch.full((total - used,), TAG_PAD)]).long()
    return PackedSequence(text_len=L, cond_rows=C, audio_rows=plan.audio_rows, video_rows=plan.video_rows, used=used,
                          total=total, keyframes=tuple(keyframes), positions=pos, tags=tags)


# ------------------------------------------------------------------------------------------------ per-step indices
def row_timesteps(seq: PackedSequence, t_v: torch.Tensor, t_a: torch.Tensor) -> torch.Tensor:
    """[S] fp32: text/pad and target video t_v; condition video max(t_v, 0.999); audio t_a."""
    ts = t_v.float().expand(seq.total).clone()
    ts[seq.cond] = torch.maximum(t_v.float(), torch.tensor(COND_T, dtype=torch.float32, device=ts.device))
    ts[seq.audio] = t_a.float()
    return ts


def modulation_index(seq: PackedSequence, t_v: torch.Tensor, t_a: torch.Tensor
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(unique_timesteps [M] fp32 ascending, inverse [S] int64, mod_idx [S] int64 = inverse * 3 + clamp(tag, 0))."""
    ts = row_timesteps(seq, t_v.to(seq.tags.device), t_a.to(seq.tags.device))
    unique, inverse = torch.unique(ts, sorted=True, return_inverse=True)
    return unique, inverse, inverse * 3 + seq.tags.clamp(min=0)


# ------------------------------------------------------------------------------------------------ latents <-> rows
def patchify_video(z: torch.Tensor) -> torch.Tensor:
    """[24, T, Hl, Wl] -> [T * Hl/2 * Wl/2, 96]; rows (t, h, w), features (c, ph, pw)."""
    C, T, Hl, Wl = z.shape
    z = z.reshape(C, T, Hl // PATCH, PATCH, Wl // PATCH, PATCH).permute(1, 2, 4, 0, 3, 5)
    return z.reshape(T * (Hl // PATCH) * (Wl // PATCH), C * PATCH * PATCH)


def unpatchify_video(rows: torch.Tensor, plan: ShapePlan) -> torch.Tensor:
    C, T, Hl, Wl = plan.latent_shape
    z = rows.reshape(T, Hl // PATCH, Wl // PATCH, C, PATCH, PATCH).permute(3, 0, 1, 4, 2, 5)
    return z.reshape(C, T, Hl, Wl)


def pack_audio(z: torch.Tensor) -> torch.Tensor:
    """(2, 32, T_a) -> (2 * T_a, 32), channel-major rows."""
    return z.permute(0, 2, 1).reshape(-1, z.shape[1])


def unpack_audio(rows: torch.Tensor) -> torch.Tensor:
    """(2 * T_a, 32) -> (2, 32, T_a)."""
    return rows.reshape(2, -1, rows.shape[1]).permute(0, 2, 1)
