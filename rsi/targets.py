"""GPU targets: architecture and limits. Timings are only ever claimed for the GPU they were measured on.

Bandwidths and peaks are datasheet figures (leads, not measurements); the physics gate
(``rsi.harness.gates``) uses the copy bandwidth measured in the same run, and ``peak_tflops`` as an upper bound on
FLOP/s: the dense bf16 tensor-core peak for ops whose FLOPs are matmul (``flops_kind == "tensor"``), the dense fp8
one where the operands may be e4m3 (``"tensor_fp8"``), else the fp32
CUDA-core (non-tensor) peak. Spec values, not measured ones, so that the bound is never below what the chip can do
(the H200 measured ~790 of its 989 dense bf16 TFLOP/s).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    name: str
    arch: str                  # sm90, sm100, ...
    compute_capability: tuple[int, int]
    memory_gb: float
    hbm_tbps: float            # datasheet memory bandwidth
    bf16_tflops: float         # dense bf16 tensor-core peak (spec)
    fp8_tflops: float
    features: frozenset[str]
    name_patterns: tuple[str, ...]  # substrings of torch.cuda.get_device_name() that identify it
    fp32_tflops: float = 0.0   # fp32 CUDA-core (non-tensor) peak (spec); 0: unknown

    def has(self, feature: str) -> bool:
        return feature in self.features

    def peak_tflops(self, kind: str) -> float:
        """The FLOP/s ceiling for work of ``kind``: "tensor" (matmul on tensor cores, dense bf16), "tensor_fp8"
        (matmul with e4m3/e5m2 operands: the dense fp8 tensor-core peak, 2x bf16 on sm90) or "cuda" (everything
        else: CUDA-core fp32)."""
        if kind == "tensor":
            return self.bf16_tflops
        if kind == "tensor_fp8":
            return self.fp8_tflops
        if kind == "cuda":
            return self.fp32_tflops
        raise ValueError(f"unknown FLOP kind {kind!r} (expected 'tensor', 'tensor_fp8' or 'cuda')")


TARGETS: dict[str, Target] = {t.name: t for t in (
    Target("gb200", "sm100", (10, 0), 186, 8.0, 2500, 5000, frozenset({"fp8", "mxfp8", "nvfp4", "tma", "wgmma"}),
           ("GB200",), fp32_tflops=80),
    Target("b200", "sm100", (10, 0), 180, 8.0, 2250, 4500, frozenset({"fp8", "mxfp8", "nvfp4", "tma"}), ("B200",),
           fp32_tflops=75),
    Target("h200", "sm90", (9, 0), 141, 4.8, 989, 1979, frozenset({"fp8", "tma", "wgmma"}), ("H200",),
           fp32_tflops=67),
    Target("h100", "sm90", (9, 0), 80, 3.35, 989, 1979, frozenset({"fp8", "tma", "wgmma"}), ("H100",),
           fp32_tflops=67),
    Target("gb10", "sm121", (12, 1), 119.68, 0.273, 250, 500, frozenset({"fp8", "mxfp8", "nvfp4"}), ("GB10",),
           fp32_tflops=31),
    Target("rtx5090", "sm120", (12, 0), 32, 1.79, 210, 420, frozenset({"fp8", "mxfp8", "nvfp4"}),
           ("RTX 5090",), fp32_tflops=105),
)}


class TargetError(ValueError):
    """A --gpu that cannot be honoured; the message says what to do."""


def get_target(name: str) -> Target:
    if name not in TARGETS:
        raise TargetError(f"unknown GPU target {name!r}; known targets: {', '.join(TARGETS)}")
    return TARGETS[name]


def peak_tflops(target: Target | str, kind: str) -> float:
    """Spec FLOP/s ceiling of ``target`` (a Target or its registry name) for ``kind`` ("tensor" or "cuda")."""
    t = get_target(target) if isinstance(target, str) else target
    return t.peak_tflops(kind)


def detect_local() -> Target | None:
    """The registry entry matching the local CUDA device, or None without a (known) GPU."""
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        dev = torch.cuda.get_device_name(0)
    except Exception:  # noqa: BLE001 - no usable CUDA means no local target
        return None
    # longest pattern first so that "GB200" is not taken for "B200"
    for t in sorted(TARGETS.values(), key=lambda t: -max(len(p) for p in t.name_patterns)):
        if any(p in dev for p in t.name_patterns):
            return t
    return None


def resolve_target(requested: str | None, allow_proxy: bool) -> tuple[Target | None, Target | None, bool]:
    """Return (requested target, local target, is_proxy). Raises TargetError on a mismatch without --allow-proxy."""
    local = detect_local()
    if requested is None:
        return local, local, False
    want = get_target(requested)
    if local is not None and local.name == want.name:
        return want, local, False
    here = local.name if local else "no supported CUDA GPU"
    if not allow_proxy:
        raise TargetError(
            f"--gpu {requested} does not match this machine ({here}). Run on a {requested}, pass "
            f"--gpu {local.name if local else '<local target>'} for this machine, add --allow-proxy to measure here "
            f"as a labelled proxy that is never promoted into {requested}'s lock, or use --backend interpret "
            f"for correctness only.")
    return want, local, True
