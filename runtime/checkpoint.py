"""safetensors checkpoints of the H3 DiT in the official native layout and in the diffusers layout (H3_SPEC.md
section 7), single files or sharded with a ``*.safetensors.index.json``.

Native keys are this model's module names, with two layout traps handled here: the raw ``attn.qkv_proj.weight`` is
per-head interleaved ``[h0: q,k,v | h1: ...]`` (384 rows per head) and is reordered to [Q; K; V]; fc1 is [gate; up]
as the model uses it. The diffusers layout renames modules, splits Q/K/V into to_q/to_k/to_v, stores fc1 as
[up; gate] and drops ``rope.inv_freq``. Every missing, unexpected or mis-shaped tensor is an error naming the key,
a corrupt or truncated file one naming the file; ``check_dit`` finds all of them from the headers, before any tensor
is read.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

NATIVE_INDEX = "model.safetensors.index.json"
DIFFUSERS_INDEX = "diffusion_pytorch_model.safetensors.index.json"

# diffusers -> native renames (anchored); Q/K/V and the fc1 half swap are handled separately
_D2N = [
    (r"^proj_in\.", "video_patch_proj."), (r"^audio_proj_in\.", "audio_patch_proj."),
    (r"^context_embedder\.", "condition_proj."),
    (r"^time_embedder\.linear_1\.", "time_embedder.proj_in."), (r"^time_embedder\.linear_2\.", "time_embedder.proj_out."),
    (r"^transformer_blocks\.", "blocks."), (r"^token_refiner\.refiner_blocks\.", "token_refiner.blocks."),
    (r"\.attn\.norm_q\.", ".attn.q_norm."), (r"\.attn\.norm_k\.", ".attn.k_norm."),
    (r"\.attn\.to_out\.0\.", ".attn.out_proj."), (r"\.ff\.net\.0\.proj\.", ".mlp.fc1."), (r"\.ff\.net\.2\.", ".mlp.fc2."),
    (r"^norm_out\.norm\.", "final_layer.norm."), (r"^norm_out\.linear\.", "final_layer.adaln_proj.linear."),
    (r"^proj_out\.", "final_layer.video_out."), (r"^audio_proj_out\.", "final_layer.audio_out."),
]
_N2D = [
    (r"^video_patch_proj\.", "proj_in."), (r"^audio_patch_proj\.", "audio_proj_in."),
    (r"^condition_proj\.", "context_embedder."),
    (r"^time_embedder\.proj_in\.", "time_embedder.linear_1."), (r"^time_embedder\.proj_out\.", "time_embedder.linear_2."),
    (r"^blocks\.", "transformer_blocks."), (r"^token_refiner\.blocks\.", "token_refiner.refiner_blocks."),
    (r"\.attn\.q_norm\.", ".attn.norm_q."), (r"\.attn\.k_norm\.", ".attn.norm_k."),
    (r"\.attn\.out_proj\.", ".attn.to_out.0."), (r"\.mlp\.fc1\.", ".ff.net.0.proj."), (r"\.mlp\.fc2\.", ".ff.net.2."),
    (r"^final_layer\.norm\.", "norm_out.norm."), (r"^final_layer\.adaln_proj\.linear\.", "norm_out.linear."),
    (r"^final_layer\.video_out\.", "proj_out."), (r"^final_layer\.audio_out\.", "audio_proj_out."),
]
QKV = ".attn.qkv_proj.weight"
FC1 = ".mlp.fc1.weight"


class CheckpointError(ValueError):
    """A checkpoint that does not fit the model; the message names the file and the key."""


def _rename(key: str, table: list[tuple[str, str]]) -> str:
    for pat, rep in table:
        key = re.sub(pat, rep, key)
    return key


def diffusers_to_native(key: str) -> str:
    return _rename(key, _D2N)


def native_to_diffusers(key: str) -> str:
    return _rename(key, _N2D)


def swap_halves(w: torch.Tensor) -> torch.Tensor:
    """[a; b] -> [b; a] along rows (fc1 [up; gate] <-> [gate; up])."""
    a, b = w.chunk(2, dim=0)
    return torch.cat([b, a])


def qkv_from_interleaved(w: torch.Tensor, head_dim: int = 128) -> torch.Tensor:
    """[NH * (q, k, v) * D, H] per-head interleaved -> [3 * NH * D, H] contiguous [Q; K; V]."""
    H = w.shape[1]
    return w.view(-1, 3, head_dim, H).transpose(0, 1).reshape(-1, H)


def qkv_to_interleaved(w: torch.Tensor, head_dim: int = 128) -> torch.Tensor:
    H = w.shape[1]
    return w.view(3, -1, head_dim, H).transpose(0, 1).reshape(-1, H)


# ------------------------------------------------------------------------------------------------ files
def transformer_dir(path: str | os.PathLike) -> Path:
    """DIR, or DIR/transformer when DIR is a model partition (FL2VA/, Ref2VA/)."""
    p = Path(path)
    if p.is_dir() and (p / "transformer").is_dir():
        return p / "transformer"
    return p


def open_safetensors(f: str | os.PathLike, device: str = "cpu"):
    """safe_open, with a corrupt or truncated file (the header is checked against the file size) reported as a
    CheckpointError naming the file instead of a raw SafetensorError."""
    try:
        return safe_open(str(f), framework="pt", device=device)
    except (SafetensorError, OSError) as e:
        raise CheckpointError(f"{f}: not a readable safetensors file ({e})") from None


def checkpoint_tensors(path: str | os.PathLike) -> dict[str, tuple[Path, tuple[int, ...]]]:
    """key -> (file, shape) from the headers of every file (an index's shards are all opened and checked); no
    tensor data is read."""
    p = transformer_dir(path)
    if not p.exists():
        raise CheckpointError(f"weights path {p} does not exist")
    indexes = sorted(p.glob("*.safetensors.index.json")) if p.is_dir() else []
    index, wm = (indexes[0] if indexes else None), None
    if index is not None:
        try:
            wm = json.loads(index.read_text())["weight_map"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise CheckpointError(f"{index}: not a readable safetensors index ({e!r})") from None
        for key, shard in wm.items():
            if not (p / shard).exists():
                raise CheckpointError(f"{index} maps {key!r} to shard {shard}, which is missing in {p}")
        files = sorted({p / s for s in wm.values()})
    else:
        files = [p] if p.is_file() else sorted(p.glob("*.safetensors"))
    if not files:
        raise CheckpointError(f"no *.safetensors files in {p}")
    out: dict[str, tuple[Path, tuple[int, ...]]] = {}
    for f in files:
        with open_safetensors(f) as h:
            for k in h.keys():  # noqa: SIM118 (safe_open handles are not dicts)
                out[k] = (f, tuple(h.get_slice(k).get_shape()))
    if wm is None:
        return out
    for key, shard in wm.items():
        if out.get(key, (None,))[0] != p / shard:
            raise CheckpointError(f"{index} maps {key!r} to shard {shard}, which does not hold it")
    return {k: out[k] for k in wm}


def checkpoint_files(path: str | os.PathLike) -> dict[str, Path]:
    """key -> file holding it, from an index (checked against the shards) or from every *.safetensors."""
    return {k: f for k, (f, _) in checkpoint_tensors(path).items()}


def detect_layout(keys) -> str:
    return "diffusers" if any(k.startswith(("transformer_blocks.", "proj_in.", "context_embedder.")) for k in keys) \
        else "native"


# ------------------------------------------------------------------------------------------------ load
def _sources(name: str, layout: str) -> list[str]:
    """The checkpoint keys whose tensors, concatenated along rows, make model tensor ``name``."""
    if layout == "native":
        return [name]
    if name.endswith(QKV):
        base = native_to_diffusers(name[: -len(QKV)]) + ".attn."
        return [base + f"to_{x}.weight" for x in "qkv"]
    return [native_to_diffusers(name)]


def _skipped(name: str, layout: str, keys) -> bool:
    return name == "rope.inv_freq" and (layout == "diffusers" or name not in keys)   # dropped / optional


def check_dit(model: torch.nn.Module, path: str | os.PathLike) -> tuple[dict[str, tuple[Path, tuple]], str]:
    """Headers only: every model tensor's keys present with the model's shapes and no unexpected key, else a
    CheckpointError naming the key (and file). ``model`` may be on the meta device. Returns (tensors, layout)."""
    tensors = checkpoint_tensors(path)
    layout, root, used = detect_layout(tensors), transformer_dir(path), set()
    for name, dst in model.state_dict(keep_vars=True).items():
        if _skipped(name, layout, tensors):
            continue
        keys = _sources(name, layout)
        want = (dst.shape[0] // len(keys), *dst.shape[1:])
        for k in keys:
            if k not in tensors:
                raise CheckpointError(f"missing key {k!r} (for model tensor {name!r}) in {layout} checkpoint {root}")
            f, shape = tensors[k]
            if shape != want:
                raise CheckpointError(f"key {k!r} in {f} for {name!r} has shape {shape}, the model expects {want} "
                                      "(wrong config?)")
            used.add(k)
    unexpected = sorted(set(tensors) - used)
    if unexpected:
        raise CheckpointError(f"{len(unexpected)} unexpected key(s) in {root}, e.g. "
                              f"{', '.join(repr(k) for k in unexpected[:5])} (another model or config?)")
    return tensors, layout


@torch.no_grad()
def load_dit(model: torch.nn.Module, path: str | os.PathLike, qkv_layout: str = "interleaved") -> dict[str, Any]:
    """Load a native or diffusers checkpoint into ``model`` in place (tensors go straight to each parameter's
    device), after ``check_dit``. ``qkv_layout``: "interleaved" (official native files) or "contiguous" (Comfy)."""
    tensors, layout = check_dit(model, path)
    head_dim = model.cfg.head_dim
    with contextlib.ExitStack() as stack:
        handles: dict[tuple[Path, str], Any] = {}

        def get(key: str, device: torch.device) -> torch.Tensor:
            f = tensors[key][0]
            if (f, str(device)) not in handles:
                handles[f, str(device)] = stack.enter_context(open_safetensors(f, str(device)))
            return handles[f, str(device)].get_tensor(key)

        for name, dst in list(model.state_dict(keep_vars=True).items()):
            if _skipped(name, layout, tensors):
                continue
            parts = [get(k, dst.device) for k in _sources(name, layout)]
            t = parts[0] if len(parts) == 1 else torch.cat(parts)
            if layout == "native" and name.endswith(QKV) and qkv_layout == "interleaved":
                t = qkv_from_interleaved(t, head_dim)
            elif layout == "diffusers" and name.endswith(FC1):
                t = swap_halves(t)
            dst.copy_(t.to(dst.dtype))
    return {"layout": layout, "tensors": len(tensors), "files": len({f for f, _ in tensors.values()})}


# ------------------------------------------------------------------------------------------------ save
def dit_tensors(model: torch.nn.Module, layout: str = "native") -> dict[str, torch.Tensor]:
    """The model's tensors under the checkpoint's names and layouts."""
    head_dim = model.cfg.head_dim
    out: dict[str, torch.Tensor] = {}
    for name, t in model.state_dict().items():
        t = t.detach().cpu()
        if layout == "native":
            out[name] = qkv_to_interleaved(t, head_dim) if name.endswith(QKV) else t
        elif layout == "diffusers":
            if name == "rope.inv_freq":
                continue
            if name.endswith(QKV):
                base = native_to_diffusers(name[: -len(QKV)]) + ".attn."
                for x, part in zip("qkv", t.chunk(3)):
                    out[base + f"to_{x}.weight"] = part
            else:
                out[native_to_diffusers(name)] = swap_halves(t) if name.endswith(FC1) else t
        else:
            raise ValueError(f"unknown layout {layout!r}; use native or diffusers")
    return {k: v.contiguous().clone() for k, v in out.items()}


def save_dit(model: torch.nn.Module, out_dir: str | os.PathLike, layout: str = "native",
             max_shard_bytes: int | None = None) -> list[Path]:
    """Write the model as safetensors; with ``max_shard_bytes`` as shards plus an index file."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tensors = dit_tensors(model, layout)
    stem = "model" if layout == "native" else "diffusion_pytorch_model"
    if max_shard_bytes is None:
        f = out / f"{stem}.safetensors"
        save_file(tensors, str(f))
        return [f]
    shards: list[dict[str, torch.Tensor]] = [{}]
    size = 0
    for k, v in tensors.items():
        n = v.numel() * v.element_size()
        if shards[-1] and size + n > max_shard_bytes:
            shards.append({})
            size = 0
        shards[-1][k] = v
        size += n
    files, weight_map = [], {}
    for i, shard in enumerate(shards):
        f = out / f"{stem}-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file(shard, str(f))
        files.append(f)
        weight_map.update({k: f.name for k in shard})
    total = sum(v.numel() * v.element_size() for v in tensors.values())
    index = NATIVE_INDEX if layout == "native" else DIFFUSERS_INDEX
    (out / index).write_text(json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2))
    return files
