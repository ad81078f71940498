"""The runtime's attention: every attention call of both stages goes through the run's ``Attention`` object
(``kernels.attention``), which picks the kernel of the class the user chose (``--attention``) and times it.

Modes (``AttentionConfig.mode``):

* ``dense`` (default): exact attention. Self-attention over packed documents (H3's ``[text | video | audio | pad]``
  rows, the refiner's video and audio rows) runs the verified kernel of the ``attention`` op group where
  verified_kernels/LOCK.json has one for this GPU and shape bucket, else FlashAttention-4's varlen kernel where the
  flash-attn-4 package is installed on a Hopper or Blackwell GPU (a peer library, not installed by rsi: 1.21x /
  1.16x / 1.08x SDPA cuDNN at h3_full / h3_stage1 / ltx_video on the H200, run 38; ``RSI_FA4=0`` turns it off,
  read once per process),
  else SDPA per document with the backend order
  measured fastest on the H200 (../shared/docs/ANCHORS.md section f: cuDNN 73.9 ms vs flash 116.7 ms at H3's
  38,248 rows, 6.24 vs 12.18 ms at LTX-2's 16,128 rows): cuDNN, flash, memory-efficient, math (SDPA falls through
  the list when a backend does not support the inputs). On the CPU plain SDPA runs.
* ``fp8`` (lossy): the transformer blocks' self-attention of both stages runs the ``attention_fp8`` op group (Q, K,
  V in e4m3 with per-head scales): its verified kernel, else cuDNN's fused FP8 attention on CUDA from Hopper on
  (runtime/attention_fp8_cudnn.py, with nvidia-cudnn-frontend installed), else the op group's reference (fp32 math
  on the quantised values: right, but slow at full size).
* ``sol`` (lossy): the refiner's video self-attention from layer ``dense_layers`` on runs the ``sol_attn`` op
  group (Sol-Attn block selection, then block-sparse attention) with threshold ``tau = taus[step]`` (the report's
  schedule 1.0, 1.25, 1.5 over the three refiner updates); stage 1 and the first ``dense_layers`` refiner layers
  stay dense (``dense_layers`` = 2 is this runtime's default, not a figure of the report). With the op group's
  128-row blocks its verified kernel runs where locked, else FlexAttention with a block mask built from the
  selection (CUDA), else the reference. The density of every sparse call is recorded.

Cross-attention is always dense and goes through the ``attention`` op with one document on each side
(``Attention.cross``): the refiner's video text cross-attention (its video rows against the prompt's 1,024 cached K/V
rows) is the op's ``ltx_text`` bucket; the audio text and audio<->video cross-attention have head dim 64, which
matches no bucket (head_dim is one of the op's dims), so they run the fallback (FA4, else SDPA). Attention outside
the denoising loops (H3's text token refiner) is always dense. Time: CUDA events around every call (summed per stage
once the request is done) or the host clock on the CPU; ``report()`` gives seconds per stage, calls per path and the
sparse densities.
"""

from __future__ import annotations

import functools
import importlib.util
import math
import os
import time
import warnings
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

try:   # torch >= 2.3
    from torch.nn.attention import SDPBackend, sdpa_kernel

    BACKENDS = [SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
                SDPBackend.MATH]
except ImportError:        # pragma: no cover - older torch
    SDPBackend = sdpa_kernel = None
    BACKENDS = []

BACKEND_NAMES = ["cudnn", "flash", "efficient", "math"]
MODES = ("dense", "fp8", "sol")
TAUS = (1.0, 1.25, 1.5)          # the Sol-H3 report's schedule over the three refiner updates
DENSE_LAYERS = 2                 # refiner layers kept dense in sol mode (this runtime's default)
SOL_BLOCK = 128                  # the sol_attn op group's selection block
DENOISING = ("stage1", "stage2")


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Dense non-causal softmax attention (SDPA), [B, H, Sq, D] x [B, H, Sk, D] -> [B, H, Sq, D]."""
    if q.device.type != "cuda" or sdpa_kernel is None:
        return F.scaled_dot_product_attention(q, k, v)
    with sdpa_kernel(BACKENDS, set_priority=True):
        return F.scaled_dot_product_attention(q, k, v)


def sdpa_documents(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens: torch.Tensor,
                   cu_seqlens_k: torch.Tensor | None = None) -> torch.Tensor:
    """The ``attention`` op group's semantics through SDPA: q [S, H, D], k, v [S_k, H, D] (any strides), cu_seqlens
    (the query documents) and cu_seqlens_k (the key documents; default: cu_seqlens) int32 [n_docs + 1] -> contiguous
    [S, H, D]; one SDPA call per non-empty document, no cross-talk; a query document without keys gets zeros."""
    from rsi.refs.attention_baselines import per_document

    if cu_seqlens.numel() == 2 and (cu_seqlens_k is None or cu_seqlens_k.numel() == 2):
        bq, bk = [0, q.shape[0]], [0, k.shape[0]]   # one document: [0, S] and [0, S_k] by the contract, no read-back
    else:
        bq = [int(x) for x in cu_seqlens.tolist()]
        bk = bq if cu_seqlens_k is None else [int(x) for x in cu_seqlens_k.tolist()]
    return per_document(q, k, v, bq, bk, attend)


def parse_taus(text: str) -> tuple[float, ...]:
    """``"1.0,1.25,1.5"`` -> (1.0, 1.25, 1.5); the last value holds for later steps."""
    try:
        taus = tuple(float(t) for t in text.split(","))
    except ValueError:
        raise ValueError(f"--sol-tau {text!r}: comma-separated numbers, e.g. 1.0,1.25,1.5") from None
    if not taus or not all(math.isfinite(t) for t in taus):
        raise ValueError(f"--sol-tau {text!r}: finite numbers, e.g. 1.0,1.25,1.5")
    return taus


@dataclass(frozen=True)
class AttentionConfig:
    mode: str = "dense"
    taus: tuple[float, ...] = TAUS
    dense_layers: int = DENSE_LAYERS
    block: int = SOL_BLOCK

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"--attention must be one of {', '.join(MODES)}, not {self.mode!r}")
        if not self.taus:
            raise ValueError("--sol-tau needs at least one value")
        if self.dense_layers < 0:
            raise ValueError(f"--sol-dense-layers must be >= 0, not {self.dense_layers}")
        if self.block < 1:
            raise ValueError(f"--sol-block must be >= 1, not {self.block}")

    def tau(self, step: int) -> float:
        return self.taus[min(step, len(self.taus) - 1)]

    def to_json(self) -> dict[str, Any]:
        return {"mode": self.mode, "taus": list(self.taus), "dense_layers": self.dense_layers, "block": self.block}


@dataclass
class _Where:
    stage: str = "other"
    step: int = 0
    layer: int = 0


class Attention:
    """One per run (``kernels.attention``). ``at(stage, step, layer)`` is set by the denoising loops; ``self_attn``
    serves self-attention over documents, ``cross`` everything else."""

    def __init__(self, config: AttentionConfig | None = None, kernels=None):
        self.cfg, self.kernels = config or AttentionConfig(), kernels
        self.sp = None          # runtime.ulysses.Ulysses while a sequence-parallel forward runs (H3DiT.forward)
        self.where = _Where()
        self._cu: dict[tuple, torch.Tensor] = {}   # document bounds as int32 device tensors, made once (cu_tensor)
        self.reset()

    def reset(self) -> None:
        self.seconds: dict[str, float] = {}
        self.calls: Counter = Counter()
        self.density: list[dict[str, Any]] = []
        self._events: list[tuple[str, Any, Any]] = []

    def at(self, stage: str | None = None, step: int | None = None, layer: int | None = None) -> None:
        if stage is not None:
            self.where.stage = stage
        if step is not None:
            self.where.step = step
        if layer is not None:
            self.where.layer = layer

    # ------------------------------------------------------------------------------------------ timing
    @contextmanager
    def _timed(self, path: str):
        stage = self.where.stage
        self.calls[f"{stage}:{path}"] += 1
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            yield
            e.record()
            self._events.append((stage, s, e))
        else:
            t0 = time.perf_counter()
            yield
            self.seconds[stage] = self.seconds.get(stage, 0.0) + time.perf_counter() - t0

    def _flush(self) -> None:
        if self._events:
            torch.cuda.synchronize()
            for stage, s, e in self._events:
                self.seconds[stage] = self.seconds.get(stage, 0.0) + s.elapsed_time(e) / 1e3
            self._events = []

    def report(self) -> dict[str, Any]:
        self._flush()
        out: dict[str, Any] = {**self.cfg.to_json(), "seconds": dict(self.seconds), "calls": dict(self.calls)}
        if self.density:
            steps: dict[int, list[float]] = {}
            for d in self.density:
                steps.setdefault(d["step"], []).append(d["density"])
            out["density_per_step"] = {str(s): sum(v) / len(v) for s, v in sorted(steps.items())}
            out["density"] = self.density
        return out

    # ------------------------------------------------------------------------------------------ calls
    def self_attn(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bounds: list[int],
                  sparse: bool = False, quantize: bool = False) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """q, k, v: [S, H, D] (any strides), documents ``bounds`` (cu_seqlens as a list) -> [S, H * D].
        ``sparse``: the call may run Sol-Attn (the refiner's video self-attention). Under Ulysses (``self.sp``)
        q, k, v hold this rank's rows and every head, ``bounds`` the global documents: the exchange runs around
        the attention of the full sequence for this rank's heads (runtime/ulysses.py).
        ``quantize`` (the consumer is an fp8 out_proj): where a verified ``head_merge_fp8`` kernel serves, the
        output is its (h8 [S, H * D] e4m3, h_scale [S] fp32), the rows quantised as they are merged (under
        Ulysses: the received heads; on one GPU the merge is a view and the kernel is the quantiser)."""
        if self.sp is not None and self.sp.world > 1:
            return self.sp.attention(q, k, v, lambda a, b, c: self._self_attn(a, b, c, bounds, sparse),
                                     self.kernels, quantize=quantize)
        o = self._self_attn(q, k, v, bounds, sparse)
        return merge_rows(o.reshape(1, q.shape[0], q.shape[1], -1), self.kernels, quantize) if quantize else o

    def _self_attn(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bounds: list[int],
                   sparse: bool = False) -> torch.Tensor:
        cu = self.cu_tensor(bounds, q.device)
        w, cfg = self.where, self.cfg
        lossy = w.stage in DENOISING
        if cfg.mode == "fp8" and lossy:
            with self._timed("fp8"):
                o = self._dispatch("attention_fp8", fp8_fallback(q), q, k, v, cu)
        elif cfg.mode == "sol" and sparse and w.stage == "stage2" and w.layer >= cfg.dense_layers:
            tau = cfg.tau(w.step)
            with self._timed("sol"):
                o, mask = self._sol(q, k, v, cu, tau)
            self._record_density(mask, cu, tau)
        else:
            with self._timed("dense"):
                o = self._dense(q, k, v, cu, cu)
        return o.reshape(q.shape[0], -1)

    def cross(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Dense cross-attention of one sequence, q [S, H, D] x k, v [S_k, H, D] (any strides) -> [S, H * D]: the
        ``attention`` op with one document on each side (the refiner's text cross-attention: its verified kernel
        where the lock has one for these dims, e.g. the ``ltx_text`` bucket, else FA4 / SDPA as for
        self-attention)."""
        with self._timed("dense"):
            cu_q, cu_k = self.cu_tensor([0, q.shape[0]], q.device), self.cu_tensor([0, k.shape[0]], q.device)
            return self._dense(q, k, v, cu_q, cu_k).reshape(q.shape[0], -1)

    def cu_tensor(self, bounds: list[int], device: torch.device) -> torch.Tensor:
        """``bounds`` as an int32 tensor on ``device``, made once per run (a host-to-device copy per attention call
        would wait on the stream; four cross-attention calls a refiner block). The op never writes it."""
        key = (tuple(bounds), str(device))
        t = self._cu.get(key)
        if t is None:
            if len(self._cu) >= 256:            # a long-lived process serving many request sizes
                self._cu.clear()
            t = self._cu[key] = torch.tensor(bounds, dtype=torch.int32, device=device)
        return t

    def _dense(self, q, k, v, cu_q, cu_k) -> torch.Tensor:
        """The ``attention`` op: its verified kernel where one serves these dims (head dim 128 only: the op's dims
        carry it) and, where FA4 is installed here, was timed against it, else FA4, else SDPA per document."""
        return self._dispatch("attention", fa4_documents if fa4_available(q) else sdpa_documents, q, k, v, cu_q, cu_k)

    def _dispatch(self, op: str, fallback, *args):
        """op's verified kernel where one serves these args (and, where ``fallback`` is a declared incumbent, was
        timed against it: ``INCUMBENT_OF``, runtime.kernels.untimed_incumbent), else ``fallback``."""
        if self.kernels is None:
            return fallback(*args)
        return self.kernels.call_or(op, fallback, *args, incumbent=INCUMBENT_OF.get(fallback))

    def _sol(self, q, k, v, cu, tau: float) -> tuple[torch.Tensor, torch.Tensor]:
        """(out [S, H, D], selection mask): the sol_attn op's outputs (rsi/refs/sol_attn.py)."""
        from rsi.refs import sol_attn

        sink = 0          # the refiner's video self-attention has no text rows (its text is cross-attention)
        if self.cfg.block == SOL_BLOCK:
            return self._dispatch("sol_attn", sol_flex_or_reference, q, k, v, cu, tau, sink)
        return sol_attn.reference(q, k, v, cu, tau, sink, block=self.cfg.block)

    def _record_density(self, mask: torch.Tensor, cu: torch.Tensor, tau: float) -> None:
        from rsi.refs import sol_attn

        d = sol_attn.mask_density(mask, cu, self.cfg.block)
        self.density.append({"step": self.where.step, "layer": self.where.layer, "tau": tau, "density": d})


def merge_rows(x: torch.Tensor, kernels, quantize: bool = False) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """x [W, S, h, D] (the heads of my rows as received; W = 1 on one GPU) -> [S, W h D] for out_proj
    (``head_merge``; at W = 1 a view), or with ``quantize`` and a verified ``head_merge_fp8`` kernel for these dims
    its (h8, h_scale). Without that kernel the bf16 rows go to out_proj, which quantises them itself: the
    producer's reference is not faster than that."""
    if quantize and kernels is not None and kernels.verified("head_merge_fp8", x):
        return kernels.call("head_merge_fp8", x)
    if x.shape[0] == 1:
        return x.reshape(x.shape[1], -1)
    return kernels.call("head_merge", x)


@functools.cache
def _fa4_here(device_index: int) -> bool:
    """Read once per process and device: RSI_FA4, the compute capability, and whether flash_attn.cute imports (its
    files may be there without the CuTe DSL it needs: H200 run 41b)."""
    if os.environ.get("RSI_FA4", "1") == "0" or torch.cuda.get_device_capability(device_index)[0] not in (9, 10):
        return False
    try:
        if importlib.util.find_spec("flash_attn.cute") is None:
            return False
        importlib.import_module("flash_attn.cute")
    except Exception:  # noqa: BLE001 - a partial install: any import error means no FA4 here
        return False
    return True


def fa4_available(q: torch.Tensor) -> bool:
    """FlashAttention-4 can serve dense attention for q (module docstring): CUDA, bf16 or fp16, head dim a multiple
    of 8 up to 256 (what its forward asserts), and the package importable."""
    D = q.shape[-1]
    return (q.is_cuda and q.dtype in (torch.bfloat16, torch.float16) and D % 8 == 0 and D <= 256
            and _fa4_here(q.device.index if q.device.index is not None else torch.cuda.current_device()))


def fa4_documents(q, k, v, cu, cu_k=None):
    """Dense attention per document through FlashAttention-4's varlen kernel (rsi.refs.attention_baselines.fa4)."""
    from rsi.refs.attention_baselines import fa4_varlen

    return fa4_varlen(q, k, v, cu, cu_k)


def fp8_fallback(q: torch.Tensor):
    """attention_fp8's runtime path where no verified kernel serves: cuDNN's FP8 attention where it can run on q's
    device (``fp8_cudnn``), else the op group's reference (``fp8_reference``). Two names, so that the run's kernel
    table says which one ran."""
    from runtime import attention_fp8_cudnn

    return fp8_cudnn if q.is_cuda and attention_fp8_cudnn.available(q.device)[0] else fp8_reference


def fp8_cudnn(q, k, v, cu):
    """cuDNN's FP8 attention (runtime/attention_fp8_cudnn.py); a document it cannot take runs the reference, with a
    warning."""
    from runtime import attention_fp8_cudnn

    try:
        return attention_fp8_cudnn.attention_fp8(q, k, v, cu)
    except attention_fp8_cudnn.Unsupported as e:
        warnings.warn(f"--attention fp8: {e}; the op group's reference runs instead (slow)", stacklevel=2)
    return fp8_reference(q, k, v, cu)


# the runtime's fallbacks that are op groups' declared incumbents (rsi.refs.attention_baselines), by baseline name
INCUMBENT_OF = {fa4_documents: "fa4", fp8_cudnn: "cudnn_fp8"}


def fp8_reference(q, k, v, cu):
    """attention_fp8's reference (fp32 per document; slow on the GPU)."""
    from rsi.refs import attention_fp8

    return attention_fp8.reference(q, k, v, cu)


def sol_flex_or_reference(q, k, v, cu, tau: float, sink: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Sol-Attn without a verified kernel: the op's fp64 selection, then FlexAttention over the kept 128-row blocks
    on CUDA (one document, the refiner's case), else the op group's reference. Returns the op's (out, mask)."""
    from rsi.refs import sol_attn
    from rsi.refs.attention_baselines import sol_flex

    if q.device.type == "cuda" and cu.numel() == 2:
        return sol_flex(q, k, v, cu, tau, sink)
    return sol_attn.reference(q, k, v, cu, tau, sink)


def describe(cfg: AttentionConfig | None = None) -> str:
    """For run summaries: which function serves attention."""
    cfg = cfg or AttentionConfig()
    base = ("dense: the verified `attention` kernel where locked, else FlashAttention-4 where installed, else SDPA "
            "per document, backend priority " + " > ".join(BACKEND_NAMES))
    if cfg.mode == "fp8":
        return base + ("; fp8 (lossy): the denoising blocks' self-attention through `attention_fp8` (verified "
                       "kernel, else cuDNN's FP8 attention, else the reference)")
    if cfg.mode == "sol":
        return (base + f"; sol (lossy): refiner video self-attention from layer {cfg.dense_layers} through "
                       f"`sol_attn`, tau per step {', '.join(f'{t:g}' for t in cfg.taus)}, block {cfg.block}")
    return base
