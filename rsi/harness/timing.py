"""The only timing code in rsi: CUDA events, L2 flushed before every repetition, interleaved A/B, medians.

Method (recorded with every timing as ``method``): each implementation is warmed up (absorbing JIT and autotune),
then for every repetition the implementations run in a shuffled order; before each call the GPU is given a short
spin (so host launch overhead cannot enter the timed region) and a buffer larger than L2 is overwritten, inputs
rotate among pre-made sets (fresh random data made outside the timed region), and CUDA events bracket the call on
the current stream. A second, shorter pass brackets each call with ``torch.cuda.synchronize``
so that work hidden on other streams shows up as a gap between the two (the side-stream check).
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

METHOD = "cuda_event+l2_flush+shuffled_interleave+gpu_queued"
QUEUE_CYCLES = 500_000  # ~0.25 ms GPU spin before each flush (H200 SM clock ~1.98 GHz): the host stays ahead
FLUSH_BYTES = 256 * 1024 * 1024  # H200 L2 is 60 MB; B200 126 MB


@dataclass
class Samples:
    name: str
    times_us: list[float] = field(default_factory=list)
    sync_times_us: list[float] = field(default_factory=list)

    def pct(self, q: float) -> float:
        xs = sorted(self.times_us)
        if not xs:
            return float("nan")
        k = min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))
        return xs[k]

    def summary(self) -> dict[str, float]:
        return {"p20_us": self.pct(0.2), "p50_us": self.pct(0.5), "p80_us": self.pct(0.8), "n": len(self.times_us),
                "sync_p50_us": statistics.median(self.sync_times_us) if self.sync_times_us else float("nan")}


def ratio_ci(base: Sequence[float], cand: Sequence[float], n_boot: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """Median of the paired per-repetition ratios base/cand (>1: candidate faster) and its bootstrap 95% CI."""
    import random

    ratios = [b / c for b, c in zip(base, cand) if c > 0]
    if not ratios:
        return float("nan"), float("nan"), float("nan")
    rng = random.Random(seed)
    meds = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(n_boot))
    return statistics.median(ratios), meds[int(0.025 * n_boot)], meds[int(0.975 * n_boot) - 1]


class Flusher:
    def __init__(self, device: torch.device | str = "cuda", nbytes: int = FLUSH_BYTES):
        self.buf = torch.empty(nbytes // 4, dtype=torch.int32, device=device)

    def __call__(self) -> None:
        self.buf.zero_()


def measure_copy_bandwidth(device="cuda", nbytes: int = 2 * 1024**3, reps: int = 30,
                           warmup: int = 50) -> dict[str, float]:
    """Device-to-device copy, counting bytes read plus bytes written: the practical bandwidth ceiling.

    The worker measures this first thing, when the GPU may still idle at low clocks (345 MHz SM seen on the H200):
    ~50 copies (~50 ms) warm it up first. Across processes the H200 runs gave 4141-4277 GB/s."""
    src = torch.empty(nbytes // 2, dtype=torch.bfloat16, device=device).normal_()
    dst = torch.empty_like(src)
    flush = Flusher(device)
    for _ in range(warmup):
        dst.copy_(src)
    times = []
    for _ in range(reps):
        flush()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        dst.copy_(src)
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) * 1e3)
    p50 = statistics.median(times)
    del src, dst
    return {"bytes": 2 * nbytes, "p50_us": p50, "gbps": 2 * nbytes / (p50 * 1e-6) / 1e9}


def same_bytes_copy(nbytes: int, device="cuda") -> Callable[..., Any]:
    """A ``copy_`` moving ``nbytes`` (half read, half written), timed like any implementation: the copy ceiling at
    the op's own size, which small ops cannot reach from the large-buffer figure (launch ramp and tail)."""
    src = torch.empty(max(nbytes // 4, 1), dtype=torch.bfloat16, device=device).normal_()
    dst = torch.empty_like(src)
    return lambda *args: dst.copy_(src)


def time_interleaved(impls: dict[str, Callable[..., Any]], input_sets: Sequence[tuple], warmup: int = 5,
                     reps: int = 40, sync_reps: int = 10, device="cuda",
                     queue_cycles: int = QUEUE_CYCLES) -> dict[str, Samples]:
    """Time every implementation on the same inputs, interleaved, with L2 flushed before every call.

    Each repetition runs the implementations in a freshly shuffled order (fixed seed). With the plain rotation used
    before, every implementation always followed the same neighbour, and H200 run 6 timed a kernel 2.5% apart from
    an identical copy of itself (the locked kernel re-proposed); the shuffle removes that fixed pairing, and
    ``rsi bench`` times the verified kernel twice to show the remaining A/A difference. ``queue_cycles`` > 0
    enqueues a GPU spin of that many cycles before each flush, so the host is ahead of the GPU when the start event
    is reached and host-side launch overhead cannot fall inside the timed region."""
    flush = Flusher(device)
    names = list(impls)
    for name in names:
        for w in range(warmup):
            impls[name](*input_sets[w % len(input_sets)])
    torch.cuda.synchronize()
    out = {n: Samples(n) for n in names}
    events = []
    rng = random.Random(0)
    for r in range(reps):
        order = list(names)
        rng.shuffle(order)
        args = input_sets[r % len(input_sets)]
        for name in order:
            if queue_cycles:
                torch.cuda._sleep(queue_cycles)
            flush()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            impls[name](*args)
            e.record()
            events.append((name, s, e))
    torch.cuda.synchronize()
    for name, s, e in events:
        out[name].times_us.append(s.elapsed_time(e) * 1e3)
    # side-stream check: the same calls bracketed by device-wide synchronization
    for r in range(sync_reps):
        args = input_sets[r % len(input_sets)]
        for name in names:
            flush()
            torch.cuda.synchronize()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            impls[name](*args)
            torch.cuda.synchronize()
            e.record()
            e.synchronize()
            out[name].sync_times_us.append(s.elapsed_time(e) * 1e3)
    return out


def hidden_work_gap(cand: Samples, baselines: Sequence[Samples]) -> float:
    """Time only a device-wide sync sees for the candidate, beyond the largest sync overhead of any baseline.

    Honest implementations differ here only by host launch overhead (on the H200, 10-40 us between a Triton
    launch and torch ops, measured in run 20261130-095012); work hidden on a side stream shows up as most of the
    kernel's own time."""
    c = cand.summary()
    own = c["sync_p50_us"] - c["p50_us"]
    base = max(b.summary()["sync_p50_us"] - b.summary()["p50_us"] for b in baselines)
    return own - base
