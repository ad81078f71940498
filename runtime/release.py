"""Release metadata beside a checkpoint (H3_SPEC.md sections 3, 4 and 7): the sampling schedule and the video
latent statistics.

A partition's ``model_index.json`` carries ``_minimax_h3`` with ``sigma_shift_scales: {video, audio}`` and, for a
distilled release, ``base_schedule``: the exact unshifted sigma positions it was trained on (vllm-omni PR #5991; a
missing key means the uniform path, an empty or malformed list is an error). The diffusers layout keeps the shifts
in ``scheduler/scheduler_config.json`` and ``audio_scheduler/scheduler_config.json`` (``shift``); they are read when
``model_index.json`` has no ``sigma_shift_scales``. ``base_schedule`` must hold >= 2 finite, strictly decreasing
positions in (0, 1] ending at 0.0 (vllm-omni also requires a first 1.0; we accept FastH3's 0.999 start).
"""

from __future__ import annotations

import itertools
import json
import math
import os
from pathlib import Path
from typing import Any

from runtime.checkpoint import CheckpointError


def partition_dir(weights: str | os.PathLike) -> Path:
    """The folder holding model_index.json: DIR for DIR/transformer, the parent of a transformer folder or file."""
    p = Path(weights)
    if p.is_file():
        p = p.parent
    if p.name == "transformer" and not (p / "transformer").is_dir():
        p = p.parent
    return p


def _json(path: Path) -> dict[str, Any]:
    try:
        d = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{path}: not readable JSON ({e})") from None
    if not isinstance(d, dict):
        raise CheckpointError(f"{path}: expected a JSON object")
    return d


def _shift(value: Any, where: str) -> float:
    try:
        s = float(value)
    except (TypeError, ValueError):
        s = math.nan
    if not (math.isfinite(s) and s > 0):
        raise CheckpointError(f"{where} = {value!r}: a shift must be a positive number")
    return s


def check_base_schedule(value: Any, where: str) -> list[float]:
    bad = f"{where} = {value!r}: "
    if not isinstance(value, list) or len(value) < 2:
        raise CheckpointError(bad + "use a list of >= 2 sigma positions (omit the key for the uniform schedule)")
    try:
        b = [float(x) for x in value]
    except (TypeError, ValueError):
        raise CheckpointError(bad + "every position must be a number") from None
    if not all(math.isfinite(x) for x in b) or not 0 < b[0] <= 1 or b[-1] != 0.0:
        raise CheckpointError(bad + "positions must be finite, start in (0, 1] and end at 0.0")
    if any(y >= x for x, y in itertools.pairwise(b)):
        raise CheckpointError(bad + "positions must be strictly decreasing")
    return b


def release_metadata(weights: str | os.PathLike) -> dict[str, Any]:
    """{"video_shift", "audio_shift", "shift_source", "base_schedule", "schedule_source"}, each only when declared."""
    part, out = partition_dir(weights), {}
    index = part / "model_index.json"
    block = _json(index).get("_minimax_h3", {}) if index.exists() else {}
    if not isinstance(block, dict):
        raise CheckpointError(f"{index}: _minimax_h3 must be an object")
    shifts = block.get("sigma_shift_scales")
    if shifts is not None:
        if not isinstance(shifts, dict) or not {"video", "audio"} <= set(shifts):
            raise CheckpointError(f"{index} _minimax_h3.sigma_shift_scales = {shifts!r}: use {{video, audio}}")
        out.update(video_shift=_shift(shifts["video"], f"{index} sigma_shift_scales.video"),
                   audio_shift=_shift(shifts["audio"], f"{index} sigma_shift_scales.audio"), shift_source=str(index))
    else:
        for role, key in (("scheduler", "video_shift"), ("audio_scheduler", "audio_shift")):
            f = part / role / "scheduler_config.json"
            if f.exists() and "shift" in (cfg := _json(f)):
                out[key] = _shift(cfg["shift"], f"{f} shift")
                out["shift_source"] = str(f) if "shift_source" not in out else f"{out['shift_source']}, {f}"
    if "base_schedule" in block:
        out["base_schedule"] = check_base_schedule(block["base_schedule"], f"{index} _minimax_h3.base_schedule")
        out["schedule_source"] = str(index)
    return out


def video_vae_stats(weights: str | os.PathLike | None) -> tuple[Path, dict[str, Any]] | None:
    """(path, config) of the partition's ``video_vae/config.json`` when it holds latents_mean / latents_std."""
    path = partition_dir(weights) / "video_vae" / "config.json" if weights else None
    if path is None or not path.exists():
        return None
    vc = _json(path)
    return (path, vc) if "latents_mean" in vc and "latents_std" in vc else None
