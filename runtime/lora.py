"""LoRA adapters on the H3 DiT (H3_SPEC.md section 7), in three modes. Files, names, layouts and scales:
runtime.lora_format (PEFT, FastVideo v2 and plain LoRA files, diffusers or native names).

Modes:
- ``merged``: ``W = bf16(W + s * B @ A + diff)`` in fp32, once, at load.
- ``native``: separate branches, ``y = bf16(x W^T) + bf16(s * (x A^T) B^T)``; ``diff``/``set_weight`` have no
  low-rank form and are merged.
- ``consumer``: as native, but fc1 hands (base, lora) to the ``lora_consumer`` op, ``swiglu(bf16(base + lora))``
  (bitwise equal to native by contract); without that op in rsi.refs, the swiglu op on ``base + lora``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from runtime.lora_format import Adapter, AdapterError, Update, check_adapter, load_adapter  # noqa: F401 (API)

MODES = ("merged", "native", "consumer")


class LoRALinear(nn.Module):
    """A linear with separate low-rank branches; keeps the base ``weight``/``bias`` names (state_dict unchanged)."""

    def __init__(self, base: nn.Linear, consumer: bool = False):
        super().__init__()
        self.weight, self.bias = base.weight, base.bias
        self.out_features = base.out_features
        self.consumer = consumer
        self.entries: list[tuple[int, int, torch.Tensor, torch.Tensor, float]] = []

    def delta(self, x: torch.Tensor) -> torch.Tensor:
        """[R, in] -> [R, out] in x's dtype: s * (x A^T) B^T on each entry's rows, zero elsewhere."""
        out = x.new_zeros(x.shape[0], self.out_features)
        for r0, r1, A, B, s in self.entries:
            out[:, r0:r1] += F.linear(F.linear(x, A), B) * s
        return out

    def parts(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return F.linear(x, self.weight, self.bias), self.delta(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        base, lora = self.parts(x)
        return base + lora


def _set_module(model: nn.Module, path: str, new: nn.Module) -> None:
    parent, _, leaf = path.rpartition(".")
    setattr(model.get_submodule(parent) if parent else model, leaf, new)


@torch.no_grad()
def apply_adapter(model: nn.Module, adapter: Adapter, mode: str = "merged", strength: float = 1.0) -> dict[str, Any]:
    """Apply in place; returns counts. LoRA that touches adaln_proj must be applied before the AdaLN precompute."""
    if mode not in MODES:
        raise AdapterError(f"LoRA mode must be one of {', '.join(MODES)}, not {mode!r}")
    if not math.isfinite(strength):
        raise AdapterError(f"LoRA strength must be a finite number, not {strength}")
    n_branch = n_merge = 0
    for u in adapter.updates.values():
        mod = model.get_submodule(u.module)
        w = mod.weight
        r0, r1 = u.rows or (0, w.shape[0])
        if u.A is not None and mode == "merged":
            merged = w[r0:r1].float() + strength * u.scale * (u.B.float().to(w.device) @ u.A.float().to(w.device))
            w[r0:r1] = merged.to(w.dtype)
            n_merge += 1
        elif u.A is not None:
            if not isinstance(mod, LoRALinear):
                mod = LoRALinear(mod, consumer=(mode == "consumer" and u.module.endswith(".mlp.fc1")))
                _set_module(model, u.module, mod)
            mod.entries.append((r0, r1, u.A.to(w.device, w.dtype), u.B.to(w.device, w.dtype), strength * u.scale))
            n_branch += 1
        if u.diff is not None:
            w[r0:r1] = (w[r0:r1].float() + strength * u.diff.float().to(w.device)).to(w.dtype)
            n_merge += 1
        if u.diff_b is not None:
            mod.bias[r0:r1] = (mod.bias[r0:r1].float() + strength * u.diff_b.float().to(w.device)).to(w.dtype)
        if u.set_weight is not None:
            w[r0:r1] = u.set_weight.to(w.device, w.dtype)
    return {"format": adapter.format, "mode": mode, "branches": n_branch, "merged": n_merge,
            "skipped": len(adapter.skipped)}


def difference(a: torch.Tensor, b: torch.Tensor) -> dict[str, float]:
    """How a differs from b: max |a-b|, ||a-b|| / ||b||, cosine, and the fraction of elements that differ."""
    a, b = a.double().flatten(), b.double().flatten()
    d = a - b
    return {"max_abs": float(d.abs().max()), "rel_l2": float(d.norm() / b.norm().clamp_min(1e-300)),
            "cosine": float(F.cosine_similarity(a, b, dim=0)), "frac_differ": float((d != 0).double().mean())}


@torch.no_grad()
def merge_rounding(model: nn.Module, adapter: Adapter, strength: float = 1.0) -> dict[str, float]:
    """How much of the low-rank update survives a bf16 merge: ||(bf16(W + D) - W) - D|| / ||D|| over all targets
    (D = s * B @ A in fp32), without modifying ``model``."""
    err = ref = 0.0
    for u in adapter.updates.values():
        if u.A is None:
            continue
        w = model.get_submodule(u.module).weight
        r0, r1 = u.rows or (0, w.shape[0])
        d = strength * u.scale * (u.B.float() @ u.A.float())
        kept = (w[r0:r1].float() + d).to(w.dtype).float() - w[r0:r1].float()
        err += float((kept - d).pow(2).sum())
        ref += float(d.pow(2).sum())
    return {"update_rel_l2_lost": (err / ref) ** 0.5 if ref else 0.0}


def compare_modes(make_model: Callable[[], nn.Module], adapter: Adapter, forward: Callable[[nn.Module], Any],
                  strength: float = 1.0) -> dict[str, Any]:
    """Run ``forward`` on a fresh model per mode; report merged vs native and whether consumer == native bitwise."""
    outs = {}
    for mode in MODES:
        m = make_model()
        apply_adapter(m, adapter, mode, strength)
        outs[mode] = forward(m)
    flat = {k: torch.cat([t.flatten().double() for t in v]) if isinstance(v, (tuple, list)) else v
            for k, v in outs.items()}
    bitwise = all(torch.equal(x, y) for x, y in zip(outs["consumer"], outs["native"])) \
        if isinstance(outs["native"], (tuple, list)) else torch.equal(outs["consumer"], outs["native"])
    return {"merged_vs_native": difference(flat["merged"], flat["native"]), "consumer_equals_native": bitwise,
            "merge_rounding": merge_rounding(make_model(), adapter, strength)}
