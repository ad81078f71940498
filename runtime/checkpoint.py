"""safetensors checkpoints of the H3 DiT in the official native layout and in the diffusers layout (H3_SPEC.md
section 7), single files or sharded with a ``*.safetensors.index.json``.

Native keys are this model's module names, with two layout traps handled here: the raw ``attn.qkv_proj.weight`` is
per-head interleaved ``[h0: q,k,v | h1: ...]`` (384 rows per head) and is reordered to [Q; K; V]; fc1 is [gate; up]
as the model uses it. The diffusers layout renames modules, splits Q/K/V into to_q/to_k/to_v, stores fc1 as
[up; gate] and drops ``rope.inv_freq``. Every missing, unexpected or mis-shaped tensor is an error naming the key.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
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


def checkpoint_files(path: str | os.PathLike) -> dict[str, Path]:
    """key -> file holding it, from an index (checked against the shards) or from every *.safetensors."""
    p = transformer_dir(path)
    if not p.exists():
        raise CheckpointError(f"weights path {p} does not exist")
    if p.is_file():
        files = [p]
    else:
        index = sorted(p.glob("*.safetensors.index.json"))
        if index:
            wm = json.loads(index[0].read_text())["weight_map"]
            for key, shard in wm.items():
                if not (p / shard).exists():
                    raise CheckpointError(f"{index[0]} maps {key!r} to shard {shard}, which is missing in {p}")
            return {k: p / v for k, v in wm.items()}
        files = sorted(p.glob("*.safetensors"))
    if not files:
        raise CheckpointError(f"no *.safetensors files in {p}")
    out: dict[str, Path] = {}
    for f in files:
        with safe_open(str(f), framework="pt") as h:
            for k in h.keys():  # noqa: SIM118 (safe_open handles are not dicts)
                out[k] = f
    return out


def detect_layout(keys) -> str:
    return "diffusers" if any(k.startswith(("transformer_blocks.", "proj_in.", "context_embedder.")) for k in keys) \
        else "native"


# ------------------------------------------------------------------------------------------------ load
@torch.no_grad()
def load_dit(model: torch.nn.Module, path: str | os.PathLike, qkv_layout: str = "interleaved") -> dict[str, Any]:
    """Load a native or diffusers checkpoint into ``model`` in place (tensors go straight to each parameter's
    device). ``qkv_layout``: "interleaved" (official native files) or "contiguous" (Comfy single files)."""
    where = checkpoint_files(path)
    layout = detect_layout(where)
    head_dim = model.cfg.head_dim
    used: set[str] = set()
    with contextlib.ExitStack() as stack:
        handles: dict[Path, Any] = {}

        def get(key: str, target: str, device: torch.device) -> torch.Tensor:
            if key not in where:
                raise CheckpointError(f"missing key {key!r} (for model tensor {target!r}) in {layout} checkpoint "
                                      f"{transformer_dir(path)}")
            f = where[key]
            if f not in handles:
                handles[f] = stack.enter_context(safe_open(str(f), framework="pt", device=str(device)))
            used.add(key)
            return handles[f].get_tensor(key)

        for name, dst in list(model.state_dict(keep_vars=True).items()):
            if layout == "native":
                if name == "rope.inv_freq" and name not in where:
                    continue
                t = get(name, name, dst.device)
                if name.endswith(QKV) and qkv_layout == "interleaved":
                    t = qkv_from_interleaved(t, head_dim)
            else:
                if name == "rope.inv_freq":
                    continue                                   # dropped in the diffusers layout
                if name.endswith(QKV):
                    base = native_to_diffusers(name[: -len(QKV)]) + ".attn."
                    t = torch.cat([get(base + f"to_{x}.weight", name, dst.device) for x in "qkv"])
                else:
                    t = get(native_to_diffusers(name), name, dst.device)
                    if name.endswith(FC1):
                        t = swap_halves(t)
            if t.shape != dst.shape:
                raise CheckpointError(f"key for {name!r} has shape {tuple(t.shape)}, the model expects "
                                      f"{tuple(dst.shape)} (wrong config?)")
            dst.copy_(t.to(dst.dtype))
    unexpected = sorted(set(where) - used)
    if unexpected:
        raise CheckpointError(f"{len(unexpected)} unexpected key(s) in {transformer_dir(path)}, e.g. "
                              f"{', '.join(repr(k) for k in unexpected[:5])} (another model or config?)")
    return {"layout": layout, "tensors": len(used), "files": len(set(where.values()))}


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
