"""``--precision fp8``: the transformer blocks' linear layers of both stages as the ``fp8_linear`` op group.

At load (once, after the weights and any merged LoRA are in place) every ``nn.Linear`` of the H3 blocks (qkv_proj,
out_proj, fc1, fc2) and of the LTX-2 refiner's blocks (every attention's to_q/to_k/to_v/to_out, the feed-forwards)
is replaced by an :class:`Fp8Linear`: its weight quantised per output channel to e4m3 with an fp32 scale
(``rsi.refs.fp8_common.quantize_weight``), the bf16 weight freed. Each call quantises the activation per row and
multiplies in e4m3 (``fp8_linear``: its verified kernel where LOCK.json has one for the shape, else
``torch._scaled_mm`` with row-wise scales on CUDA, the op group's incumbent, else the op group's reference on the
CPU). Embeddings, norms, AdaLN, the final layers and the VAEs stay as they are.

Lossy: the weight's quantisation error is measured per layer at conversion (``weight_error``: rel-L2, max-abs,
cosine against the bf16 weight) and summarised in the run's JSON; the end-to-end effect is what ``rsi
attention-quality``-style comparisons measure (a bf16 and an fp8 run from one seed). Linears whose sizes
``_scaled_mm`` cannot take (K or N not a multiple of 16) are left in bf16 and counted.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

PRECISIONS = ("bf16", "fp8")
BF16 = torch.bfloat16


class Fp8Linear(nn.Module):
    """``y = x W^T + b`` with W in e4m3 per output channel; x quantised per row inside the op (fp8_linear)."""

    def __init__(self, lin: nn.Linear, kernels, quantized: tuple[torch.Tensor, torch.Tensor] | None = None):
        """``quantized``: (w8 [N, K] e4m3, scale [N] fp32) as an FP8 checkpoint stored them (runtime/checkpoint.py),
        used as they are; else the bf16 weight is quantised per output channel here."""
        super().__init__()
        from rsi.refs.fp8_common import quantize_weight

        self.in_features, self.out_features, self.kernels = lin.in_features, lin.out_features, kernels
        if quantized is not None:
            w8, scale = quantized
            if w8.shape != lin.weight.shape or scale.shape != (lin.out_features,):
                raise ValueError(f"FP8 weight {tuple(w8.shape)} / scale {tuple(scale.shape)} do not fit the linear "
                                 f"{lin.out_features}x{lin.in_features}")
            w8, scale = w8.to(lin.weight.device), scale.to(lin.weight.device, torch.float32)
        else:
            w8, scale = quantize_weight(lin.weight.detach())
        self.register_buffer("w8", w8)
        self.register_buffer("w_scale", scale)
        self.bias = None if lin.bias is None else nn.Parameter(lin.bias.detach(), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lead = x.shape[:-1]
        x2 = x.reshape(-1, self.in_features).to(BF16)
        y = self.kernels.call_or("fp8_linear", scaled_mm_or_reference, x2, self.w8, self.w_scale)
        if self.bias is not None:
            y = y + self.bias.to(y.dtype)
        return y.to(x.dtype).reshape(*lead, self.out_features)

    takes_quantized = True

    def quantized(self, x8: torch.Tensor, x_scale: torch.Tensor) -> torch.Tensor:
        """The layer on an activation a fused producer already quantised (e.g. ``swiglu_fp8``: x8 [R, K] e4m3,
        x_scale [R] fp32, the same per-row quantiser as ``forward``'s): the ``fp8_gemm`` op group, its verified
        kernel where the lock has one for the shape, else ``torch._scaled_mm`` on CUDA and its reference elsewhere."""
        y = self.kernels.call_or("fp8_gemm", scaled_mm_or_gemm, x8, x_scale, self.w8, self.w_scale)
        return y if self.bias is None else y + self.bias.to(y.dtype)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, e4m3 per output channel"


def scaled_mm_or_gemm(x8, x_scale, w8, w_scale):
    """fp8_gemm without a verified kernel: its incumbent ``torch._scaled_mm`` on CUDA, its reference elsewhere."""
    from rsi.refs import fp8_linear

    if x8.device.type == "cuda":
        return fp8_linear.scaled_mm(x8, x_scale, w8, w_scale)
    return fp8_linear.gemm(x8, x_scale, w8, w_scale)


def scaled_mm_or_reference(x, w8, w_scale):
    """fp8_linear without a verified kernel: the op group's faster incumbent on CUDA (the per-row quantiser through
    torch.compile, then ``torch._scaled_mm``; H200 run 23 timed the eager quantiser's version at 0.68x the bf16
    linears, run 24 the compiled one at 2.6-3.7x the eager one), its reference elsewhere."""
    from rsi.refs import fp8_linear
    from rsi.refs.fp8_common import quantize_rows_compiled

    if x.device.type == "cuda":
        return fp8_linear.scaled_mm(*quantize_rows_compiled(dynamic=None)(x), w8, w_scale)
    return fp8_linear.reference(x, w8, w_scale)



def _linears(root: nn.Module, skip: tuple[str, ...]) -> list[tuple[nn.Module, str, nn.Linear, str]]:
    out = []
    for name, mod in root.named_modules():
        for child_name, child in mod.named_children():
            full = f"{name}.{child_name}" if name else child_name
            if isinstance(child, nn.Linear) and not any(s in full for s in skip):
                out.append((mod, child_name, child, full))
    return out


def to_fp8_(blocks: nn.Module, kernels, skip: tuple[str, ...] = ("adaln",),
            quantized: dict[str, tuple[torch.Tensor, torch.Tensor]] | None = None, prefix: str = "blocks.") -> dict[str, Any]:
    """Replace every nn.Linear under ``blocks`` (names containing a ``skip`` part excepted) by an Fp8Linear, in
    place; returns the conversion summary (layers converted, left in bf16 and why, weight error worst and mean).
    ``quantized``: the e4m3 weights an FP8 checkpoint held (runtime.checkpoint.FP8_ATTR), keyed by the module's
    name under the model (``prefix`` + its name under ``blocks``): those are used as stored, not re-quantised."""
    from rsi.refs.fp8_common import weight_error

    done, kept, errs, stored = 0, [], [], 0
    quantized = quantized or {}
    for parent, attr, lin, full in _linears(blocks, skip):
        if lin.in_features % 16 or lin.out_features % 16:
            kept.append(f"{full} ({lin.in_features}->{lin.out_features}: not multiples of 16)")
            continue
        q = quantized.get(prefix + full)
        if q is None:
            errs.append(weight_error(lin.weight.detach()))
        else:
            stored += 1
        setattr(parent, attr, Fp8Linear(lin, kernels, q))
        done += 1
    summary: dict[str, Any] = {"converted": done, "kept_bf16": kept, "from_checkpoint": stored}
    if errs:
        summary["weight_error"] = {"rel_l2_max": max(e["rel_l2"] for e in errs),
                                   "rel_l2_mean": sum(e["rel_l2"] for e in errs) / len(errs),
                                   "cosine_min": min(e["cosine"] for e in errs),
                                   "max_abs_frac_max": max(e["max_abs_frac"] for e in errs)}
    return summary


def describe(summary: dict[str, dict[str, Any]]) -> str:
    """One line per converted model for the run's notes."""
    parts = []
    for name, s in summary.items():
        w = s.get("weight_error", {})
        parts.append(f"{name}: {s['converted']} linears in e4m3"
                     + (f" ({s['from_checkpoint']} as the FP8 checkpoint stored them)" if s.get("from_checkpoint")
                        else "")
                     + (f" (weight rel-L2 mean {w['rel_l2_mean']:.4f}, max {w['rel_l2_max']:.4f})" if w else "")
                     + (f", {len(s['kept_bf16'])} kept in bf16" if s["kept_bf16"] else ""))
    return "precision fp8 (lossy): " + "; ".join(parts)
