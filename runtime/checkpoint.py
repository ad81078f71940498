"""safetensors checkpoints of the H3 DiT in the official native layout and in the diffusers layout (H3_SPEC.md
section 7), single files or sharded with a ``*.safetensors.index.json``.

Native keys are this model's module names, with two layout traps handled here: the raw ``attn.qkv_proj.weight`` is
per-head interleaved ``[h0: q,k,v | h1: ...]`` (384 rows per head) and is reordered to [Q; K; V]; fc1 is [gate; up]
as the model uses it. The diffusers layout renames modules, splits Q/K/V into to_q/to_k/to_v, stores fc1 as
[up; gate] and drops ``rope.inv_freq``. Every missing, unexpected or mis-shaped tensor is an error naming the key,
a corrupt or truncated file one naming the file; ``check_dit`` finds all of them from the headers, before any tensor
is read.

FP8 checkpoints (H3_SPEC.md section 7, native names): the blocks' four linears stored in e4m3 with fp32 scales.
* ModelOpt: ``attn.qkv_proj.to_{q,k,v}.{weight, weight_scale, input_scale}`` (Q, K, V as three matrices, so the
  [Q; K; V] order needs no reordering), the other linears ``.{weight, weight_scale, input_scale}``.
* Comfy: ``.weight`` (F8_E4M3, qkv already contiguous) + scalar ``weight_scale`` + ``input_scale`` (none on fc2) +
  ``comfy_quant`` (uint8 JSON).
A ``weight_scale`` may be a scalar or one per output channel. The e4m3 values and their scales are kept as read
(``FP8_ATTR`` on the model: module name -> (w8, per-channel fp32 scale)): ``--precision fp8`` then uses them as they
are (runtime/precision.py), not a re-quantisation; the bf16 parameters get ``bf16(w8 * scale)`` (exact unless the
product needs more than bf16's 8 significant bits: the run notes it). ``input_scale`` (a static activation scale) is
read and not used: the runtime quantises activations per row at run time. The diffusers layout has no FP8 variant
here (an error says so).
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
FP8_LINEARS = (".attn.qkv_proj.weight", ".attn.out_proj.weight", ".mlp.fc1.weight", ".mlp.fc2.weight")
FP8_EXTRA = ("weight_scale", "input_scale", "comfy_quant")
FP8_ATTR = "fp8_checkpoint"        # model attribute: {module name: (w8 e4m3 [N, K], scale fp32 [N])}


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


def fp8_format(keys) -> str | None:
    """"modelopt", "comfy" or None (no e4m3 linears) from the key names."""
    if any(k.endswith(".qkv_proj.to_q.weight_scale") for k in keys):
        return "modelopt"
    if any(k.endswith((".weight_scale", ".comfy_quant")) for k in keys):
        return "comfy"
    return None


def _fp8_linear(name: str, layout: str, fmt: str | None) -> bool:
    return fmt is not None and layout == "native" and name.startswith("blocks.") and name.endswith(FP8_LINEARS)


def _fp8_sources(name: str, fmt: str) -> list[str]:
    """The weight keys of one e4m3 linear (``name`` its model weight): ModelOpt splits qkv in three."""
    if fmt == "modelopt" and name.endswith(QKV):
        base = name[: -len("weight")]
        return [base + f"to_{x}.weight" for x in "qkv"]
    return [name]


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
    fmt = fp8_format(tensors)
    if fmt and layout != "native":
        raise CheckpointError(f"{root}: an FP8 ({fmt}) checkpoint in the diffusers layout is not supported; use the "
                              "native names (H3_SPEC.md section 7)")
    for name, dst in model.state_dict(keep_vars=True).items():
        if _skipped(name, layout, tensors):
            continue
        fp8 = _fp8_linear(name, layout, fmt)
        keys = _fp8_sources(name, fmt) if fp8 else _sources(name, layout)
        if fp8:
            for k in keys:
                base = k[: -len("weight")]
                if base + "weight_scale" not in tensors:
                    raise CheckpointError(f"FP8 ({fmt}) checkpoint {root}: {k!r} has no {base + 'weight_scale'!r}")
                used.update(base + x for x in FP8_EXTRA if base + x in tensors)
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

        fmt, fp8_store, inexact = fp8_format(tensors), {}, 0
        for name, dst in list(model.state_dict(keep_vars=True).items()):
            if _skipped(name, layout, tensors):
                continue
            if _fp8_linear(name, layout, fmt):
                w8, scale = _read_fp8(name, fmt, lambda k, d=dst.device: get(k, d))
                w = (w8.float() * scale[:, None]).to(dst.dtype)
                inexact += int((w.float() != w8.float() * scale[:, None]).sum())
                dst.copy_(w)
                fp8_store[name[: -len(".weight")]] = (w8, scale)
                continue
            parts = [get(k, dst.device) for k in _sources(name, layout)]
            t = parts[0] if len(parts) == 1 else torch.cat(parts)
            if layout == "native" and name.endswith(QKV) and qkv_layout == "interleaved":
                t = qkv_from_interleaved(t, head_dim)
            elif layout == "diffusers" and name.endswith(FC1):
                t = swap_halves(t)
            dst.copy_(t.to(dst.dtype))
    info = {"layout": layout, "tensors": len(tensors), "files": len({f for f, _ in tensors.values()})}
    if fp8_store:
        setattr(model, FP8_ATTR, fp8_store)
        info["fp8"] = {"format": fmt, "linears": len(fp8_store), "input_scale": "read, not used (per-row dynamic)",
                       "bf16_inexact_elements": inexact}
    return info


def _read_fp8(name: str, fmt: str, get) -> tuple[torch.Tensor, torch.Tensor]:
    """(w8 float8_e4m3fn [N, K], scale fp32 [N]) of one e4m3 linear; scalar scales expanded per output row."""
    w8s, scales = [], []
    for k in _fp8_sources(name, fmt):
        w8 = get(k)
        if w8.dtype != torch.float8_e4m3fn:
            raise CheckpointError(f"{k!r} is {w8.dtype}, an FP8 ({fmt}) checkpoint stores float8_e4m3fn weights")
        s = get(k[: -len("weight")] + "weight_scale").float().reshape(-1)
        if s.numel() not in (1, w8.shape[0]):
            raise CheckpointError(f"{k[: -len('weight')] + 'weight_scale'!r} has {s.numel()} values: one, or one per "
                                  f"output row ({w8.shape[0]})")
        w8s.append(w8)
        scales.append(s.expand(w8.shape[0]).clone())
    return torch.cat(w8s), torch.cat(scales)


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


def save_fp8_dit(model: torch.nn.Module, out_dir: str | os.PathLike, fmt: str = "comfy") -> Path:
    """Write the model as an FP8 checkpoint of format ``fmt`` ("comfy" or "modelopt", native names, one file): the
    blocks' four linears in e4m3 with one fp32 scale per tensor (``amax / 448``, as both formats store it) and an
    ``input_scale`` of 1 (a placeholder: this writer has no calibration data; the runtime does not use it); every
    other tensor as ``save_dit`` writes it. For tests and for converting a bf16 checkpoint."""
    from rsi.refs.fp8_common import E4M3_MAX, e4m3

    if fmt not in ("comfy", "modelopt"):
        raise ValueError(f"FP8 checkpoint format {fmt!r}: use comfy or modelopt")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tensors = dit_tensors(model, "native")
    one = torch.ones((), dtype=torch.float32)
    for name in [k for k in tensors if _fp8_linear(k, "native", fmt)]:
        w = model.state_dict()[name].detach().float().cpu()         # [Q; K; V] for qkv (no interleave in FP8 files)
        del tensors[name]
        parts = dict(zip((f"to_{x}." for x in "qkv"), w.chunk(3))) if fmt == "modelopt" and name.endswith(QKV) \
            else {"": w}
        base = name[: -len("weight")]
        for sub, part in parts.items():
            s = (part.abs().amax() / E4M3_MAX).clamp_min(2.0 ** -126).reshape(())
            tensors[base + sub + "weight"] = e4m3(part / s).contiguous()
            tensors[base + sub + "weight_scale"] = s
            if not (fmt == "comfy" and name.endswith(".mlp.fc2.weight")):     # Comfy: no input_scale on fc2
                tensors[base + sub + "input_scale"] = one.clone()
            if fmt == "comfy":
                tensors[base + sub + "comfy_quant"] = torch.tensor(list(b'{"format": "float8_e4m3fn"}'),
                                                                   dtype=torch.uint8)
    f = out / "model.safetensors"
    save_file(tensors, str(f))
    return f
