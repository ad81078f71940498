"""LoRA adapter files for the H3 DiT (H3_SPEC.md section 7), read into per-module updates of the native model.

Keys: ``<module>.lora_A|lora_B[.default].weight``, ``.diff`` (full weight delta), ``.diff_b`` (bias delta),
``.set_weight`` (assigned), after an optional ``base_model.model.`` (PEFT ``save_pretrained``), ``diffusion_model.``
(ai-toolkit) or ``transformer.`` (diffusers) prefix. ``<module>`` is a diffusers or a native name; the row layouts
follow the base checkpoint mapping (runtime.checkpoint), so a delta merged here equals the same delta merged into
the checkpoint file and loaded:
- diffusers ``attn.to_q/k/v`` are row thirds of the contiguous ``qkv_proj``; ``ff.net.0.proj`` rows are [up; gate]
  and are swapped to fc1's [gate; up] (lora_B, diff, diff_b, set_weight; lora_A is untouched).
- native ``attn.qkv_proj`` rows are per-head interleaved like the raw checkpoint and are reordered to [Q; K; V]
  (``qkv_layout="contiguous"`` for files already in that order); native ``mlp.fc1`` is [gate; up]: kept.
Scale = alpha / rank (alpha / sqrt(rank) with ``use_rslora``). alpha: the file's ``alpha`` metadata (LightX2V),
diffusers' ``lora_adapter_metadata``, or PEFT's ``adapter_config.json`` beside the file (``lora_alpha``, ``r``);
without one alpha = rank (scale 1), as diffusers and PEFT load such files. FastVideo v2: scale 1.
``check_adapter`` maps and shape-checks every key from the file header alone, before any tensor is read.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from runtime.checkpoint import CheckpointError, diffusers_to_native, open_safetensors, qkv_from_interleaved, swap_halves

log = logging.getLogger("runtime.lora")
PREFIXES = ("base_model.model.", "diffusion_model.", "transformer.")
_SUFFIX = re.compile(r"\.(lora_A|lora_B)(\.default)?\.weight$|\.(diff|diff_b|set_weight)$")
SKIPPABLE = ("to_gate_compress",)      # FastH3-VSA only; this runtime has no VSA attention
QKV_LAYOUTS = ("interleaved", "contiguous")


class AdapterError(ValueError):
    pass


@dataclass
class Update:
    """Everything an adapter does to one native linear (or norm) ``module``, rows ``rows`` of its weight."""

    module: str
    rows: tuple[int, int] | None = None          # None: all rows
    A: torch.Tensor | None = None                # [r, in]
    B: torch.Tensor | None = None                # [out_rows, r]
    scale: float = 1.0
    diff: torch.Tensor | None = None
    diff_b: torch.Tensor | None = None
    set_weight: torch.Tensor | None = None


@dataclass
class Adapter:
    format: str
    updates: dict[tuple[str, tuple[int, int] | None], Update]
    metadata: dict[str, Any] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)


@dataclass
class _Key:
    key: str
    kind: str                                    # A, B, diff, diff_b, set_weight
    module: str
    rows: tuple[int, int] | None
    reorder: str | None                          # "qkv" (per-head de-interleave), "swap" ([up; gate]), None
    shape: tuple[int, ...] = ()


def _files(path: Path) -> tuple[Path, dict[str, Any], Path | None]:
    """(safetensors file, FastVideo manifest, PEFT adapter_config.json or None)."""
    f = path / "adapter_model.safetensors" if path.is_dir() else path
    if not f.exists():
        raise AdapterError(f"{path} has no adapter_model.safetensors" if path.is_dir() else
                           f"LoRA file {path} does not exist")
    manifest, config = f.parent / "adapter_manifest.json", f.parent / "adapter_config.json"
    return f, _json(manifest) if manifest.exists() else {}, config if config.exists() else None


def _json(p: Path) -> dict[str, Any]:
    try:
        d = json.loads(p.read_text())
    except (OSError, ValueError) as e:
        raise AdapterError(f"{p}: not readable JSON ({e})") from None
    return d if isinstance(d, dict) else {}


def _map(f: Path, key: str, names: dict[str, nn.Module], inner: int, qkv_layout: str) -> _Key | None:
    k = key
    for p in PREFIXES:
        k = k.removeprefix(p)
    m = _SUFFIX.search(k)
    if m is None:
        raise AdapterError(f"{f}: key {key!r} is not a LoRA/diff/set_weight tensor")
    kind, mod = {"lora_A": "A", "lora_B": "B"}.get(m.group(1)) or m.group(3), k[: m.start()]
    if any(s in mod for s in SKIPPABLE):
        return None
    if mod in names:                                               # native name: the raw checkpoint's row layout
        qkv = mod.endswith(".attn.qkv_proj") and kind != "A" and qkv_layout == "interleaved"
        return _Key(key, kind, mod, None, "qkv" if qkv else None)
    rows, qkv = None, re.search(r"\.attn\.to_([qkv])$", mod)
    if qkv:                                                        # a row third of the contiguous qkv_proj
        j = "qkv".index(qkv.group(1))
        module = diffusers_to_native(mod[: qkv.start()] + ".").rstrip(".") + ".attn.qkv_proj"
        rows = (j * inner, (j + 1) * inner)
    else:
        module = diffusers_to_native(mod + ".").rstrip(".")
    if module not in names:
        raise AdapterError(f"{f}: key {key!r} targets {module!r}, which this model does not have")
    return _Key(key, kind, module, rows, "swap" if module.endswith(".mlp.fc1") and kind != "A" else None)


def _alpha(f: Path, meta: dict[str, str], config: Path | None) -> tuple[float | None, int | None, bool, str]:
    """(alpha, declared rank, use_rslora, where alpha came from)."""
    if "alpha" in meta:
        try:
            return float(meta["alpha"]), None, False, f"{f} metadata"
        except ValueError:
            raise AdapterError(f"{f}: metadata alpha = {meta['alpha']!r} is not a number") from None
    if "lora_adapter_metadata" in meta:                            # diffusers save_lora_weights
        try:
            d = {k.rpartition(".")[2]: v for k, v in json.loads(meta["lora_adapter_metadata"]).items()}
        except (ValueError, AttributeError) as e:
            raise AdapterError(f"{f}: unreadable lora_adapter_metadata ({e})") from None
        if "lora_alpha" in d:
            return float(d["lora_alpha"]), d.get("r"), bool(d.get("use_rslora")), f"{f} lora_adapter_metadata"
    if config is not None:
        c = _json(config)
        if c.get("alpha_pattern") or c.get("rank_pattern"):
            raise AdapterError(f"{config}: per-module alpha_pattern / rank_pattern are not supported")
        alpha = c.get("lora_alpha")
        return (None if alpha is None else float(alpha)), c.get("r"), bool(c.get("use_rslora")), str(config)
    return None, None, False, "none (alpha = rank)"


def _check(f: Path, keys: list[_Key], names: dict[str, nn.Module], declared_r: int | None,
           config: Path | None) -> None:
    """Every tensor's shape against its target, and lora_A / lora_B ranks against each other (header shapes)."""
    seen: dict[tuple, _Key] = {}
    for e in keys:
        if (e.module, e.rows, e.kind) in seen:
            raise AdapterError(f"{f}: {e.key!r} and {seen[e.module, e.rows, e.kind].key!r} both set {e.kind} of "
                               f"{e.module} rows {e.rows}")
        seen[e.module, e.rows, e.kind] = e
        mod = names[e.module]
        w, b = getattr(mod, "weight", None), getattr(mod, "bias", None)
        if not isinstance(w, torch.Tensor):
            raise AdapterError(f"{f}: key {e.key!r} targets {e.module}, which has no weight")
        r0, r1 = e.rows or (0, w.shape[0])
        if e.kind in ("A", "B") and w.dim() != 2:
            raise AdapterError(f"{f}: key {e.key!r}: {e.module} is not a linear layer; LoRA needs one")
        rank = e.shape[0 if e.kind == "A" else -1] if e.shape else -1
        want = {"A": (rank, *w.shape[1:]), "B": (r1 - r0, rank), "diff_b": (r1 - r0,)}.get(e.kind,
                                                                                          (r1 - r0, *w.shape[1:]))
        if e.kind == "diff_b" and not isinstance(b, torch.Tensor):
            raise AdapterError(f"{f}: key {e.key!r}: {e.module} has no bias")
        if e.shape != want:
            raise AdapterError(f"{f}: key {e.key!r} has shape {e.shape}, but {e.module} rows {r0}:{r1} need "
                               f"shape {want}")
    for (module, rows, kind), a in seen.items():
        if kind != "A":
            continue
        b = seen.get((module, rows, "B"))
        if b is None:
            raise AdapterError(f"{f}: {module} rows {rows} has only one of lora_A / lora_B ({a.key!r})")
        if a.shape[0] != b.shape[1]:
            raise AdapterError(f"{f}: rank mismatch: {a.key!r} has rank {a.shape[0]}, {b.key!r} has rank "
                               f"{b.shape[1]}")
        if declared_r is not None and int(declared_r) != a.shape[0]:
            raise AdapterError(f"{f}: {config or 'metadata'} declares r = {declared_r} but {a.key!r} has rank "
                               f"{a.shape[0]}")
    for (module, rows, kind), b in seen.items():
        if kind == "B" and (module, rows, "A") not in seen:
            raise AdapterError(f"{f}: {module} rows {rows} has only one of lora_A / lora_B ({b.key!r})")


def _scan(path: str | os.PathLike, model: nn.Module, qkv_layout: str) -> dict[str, Any]:
    if qkv_layout not in QKV_LAYOUTS:
        raise AdapterError(f"qkv_layout must be one of {', '.join(QKV_LAYOUTS)}, not {qkv_layout!r}")
    f, manifest, config = _files(Path(path))
    try:
        with open_safetensors(f) as h:
            meta = dict(h.metadata() or {})
            shapes = {k: tuple(h.get_slice(k).get_shape()) for k in h.keys()}  # noqa: SIM118
    except CheckpointError as e:
        raise AdapterError(str(e)) from None
    names = dict(model.named_modules())
    keys, skipped = [], []
    for k, shape in shapes.items():
        e = _map(f, k, names, model.cfg.inner, qkv_layout)
        if e is None:
            skipped.append(k)
        else:
            e.shape = shape
            keys.append(e)
    alpha, declared_r, rslora, alpha_from = _alpha(f, meta, config)
    _check(f, keys, names, declared_r, config)
    fv = "fastvideo" in f"{meta.get('format', '')} {manifest.get('format', '')}".lower()
    peft = config is not None or any(".lora_A.default." in k or k.startswith("base_model.model.") for k in shapes)
    fmt = "peft" if peft and not fv else "fastvideo-v2" if fv or any(e.kind != "A" and e.kind != "B" for e in keys) \
        else "lora"
    meta.update({k: v for k, v in manifest.items() if isinstance(v, (str, int, float))})
    return {"file": f, "format": fmt, "metadata": meta, "keys": keys, "skipped": skipped, "alpha": alpha,
            "rslora": rslora, "alpha_from": alpha_from}


def check_adapter(path: str | os.PathLike, model: nn.Module, qkv_layout: str = "interleaved") -> dict[str, Any]:
    """Map and shape-check an adapter from its header alone (``model`` may be on the meta device)."""
    s = _scan(path, model, qkv_layout)
    return {"file": str(s["file"]), "format": s["format"], "tensors": len(s["keys"]), "skipped": len(s["skipped"]),
            "alpha": s["alpha_from"]}


def load_adapter(path: str | os.PathLike, model: nn.Module, qkv_layout: str = "interleaved") -> Adapter:
    """Read a PEFT, FastVideo-v2 or plain LoRA adapter and map every key onto ``model``'s native modules."""
    s = _scan(path, model, qkv_layout)
    adapter = Adapter(s["format"], {}, s["metadata"], s["skipped"])
    head_dim = model.cfg.head_dim
    with open_safetensors(s["file"]) as h:
        for e in s["keys"]:
            t = h.get_tensor(e.key)
            if e.reorder == "qkv":
                t = qkv_from_interleaved(t.reshape(t.shape[0], -1), head_dim).reshape(t.shape)
            elif e.reorder == "swap":
                t = swap_halves(t)
            u = adapter.updates.setdefault((e.module, e.rows), Update(e.module, e.rows))
            setattr(u, e.kind, t)
    for u in adapter.updates.values():
        if u.A is not None and adapter.format != "fastvideo-v2":
            rank = u.A.shape[0]
            alpha = s["alpha"] if s["alpha"] is not None else rank
            u.scale = alpha / (math.sqrt(rank) if s["rslora"] else rank)
    if adapter.skipped:
        log.warning("LoRA %s: skipped %d tensors this runtime has no module for (e.g. %s)", s["file"],
                    len(adapter.skipped), adapter.skipped[0])
    return adapter
