"""A diffusers ``from_pretrained`` model folder (``config.json`` + ``diffusion_pytorch_model.safetensors`` or a
sharded index), checked against a model before any tensor is read, then loaded. Every problem is one
CheckpointError line naming the file and the key. Used for the VAEs (runtime/vae.py) and the LTX-2 refiner
(runtime/refiner.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from torch import nn

from runtime.checkpoint import CheckpointError, checkpoint_tensors, open_safetensors

WEIGHTS_NAME = "diffusion_pytorch_model.safetensors"
INDEX_NAME = "diffusion_pytorch_model.safetensors.index.json"


def read_config(folder: str | os.PathLike, class_name: str, what: str) -> dict[str, Any]:
    """``folder/config.json`` as a dict, checked to name ``class_name`` (a missing ``_class_name`` is accepted)."""
    path = Path(folder) / "config.json"
    if not Path(folder).is_dir():
        raise CheckpointError(f"{folder}: {what} folder does not exist (want config.json + {WEIGHTS_NAME})")
    if not path.exists():
        raise CheckpointError(f"{path}: missing (a diffusers {what} folder has config.json + {WEIGHTS_NAME})")
    try:
        cfg = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{path}: not readable JSON ({e})") from None
    if not isinstance(cfg, dict) or cfg.get("_class_name", class_name) != class_name:
        got = cfg.get("_class_name") if isinstance(cfg, dict) else type(cfg).__name__
        raise CheckpointError(f"{path}: _class_name is {got!r}, expected {class_name!r}")
    return cfg


def weight_files(folder: str | os.PathLike) -> Path:
    """The weights to read: the sharded index when present, else the single ``diffusion_pytorch_model.safetensors``."""
    p = Path(folder)
    if (p / INDEX_NAME).exists():
        return p
    if (p / WEIGHTS_NAME).exists():
        return p / WEIGHTS_NAME
    raise CheckpointError(f"{p}: no {WEIGHTS_NAME} (or {INDEX_NAME})")


def check_tensors(model: nn.Module, folder: str | os.PathLike, skip: tuple[str, ...] = (), what: str = ""
                  ) -> dict[str, tuple[Path, tuple]]:
    """Header-only check of ``folder``'s tensors against ``model`` (works on the meta device): key -> (file,
    shape) of the tensors to load. Keys under ``skip`` prefixes are ignored; anything else unexpected, missing or
    mis-shaped is a CheckpointError naming the key and the file."""
    files = weight_files(folder)
    found = checkpoint_tensors(files)
    want = model.state_dict()
    name = what or type(model).__name__
    out = {}
    for key, (f, shape) in found.items():
        if key.startswith(skip):
            continue
        if key not in want:
            raise CheckpointError(f"{f}: unexpected tensor {key!r} (not in {name})")
        if shape != tuple(want[key].shape):
            raise CheckpointError(f"{f}: tensor {key!r} has shape {list(shape)}, the model needs "
                                  f"{list(want[key].shape)}")
        out[key] = (f, shape)
    missing = sorted(set(want) - set(out))
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise CheckpointError(f"{files}: missing tensor {missing[0]!r}{more}")
    return out


def load_tensors(model: nn.Module, folder: str | os.PathLike, plan: dict[str, tuple[Path, tuple]]) -> dict[str, Any]:
    """Copy the checked tensors into the (materialized) model, casting to each parameter's dtype and device."""
    targets = model.state_dict(keep_vars=True)
    by_file: dict[Path, list[str]] = {}
    for key, (f, _) in plan.items():
        by_file.setdefault(f, []).append(key)
    for f, keys in by_file.items():
        with open_safetensors(f) as h:
            for key in keys:
                try:
                    t = h.get_tensor(key)
                except Exception as e:  # noqa: BLE001 (safetensors raises its own error types)
                    raise CheckpointError(f"{f}: tensor {key!r} is not readable ({e})") from None
                targets[key].copy_(t)
    return {"folder": str(folder), "tensors": len(plan), "files": len(by_file)}
