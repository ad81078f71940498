"""The only timing code in rsi: one timed call (:func:`timed_call`) and one interleaving loop (:func:`interleave`).

Method (recorded with every timing as ``method``): each implementation is warmed up (absorbing JIT and autotune);
then for every repetition the implementations run in a freshly shuffled order. Before each call the GPU is given a
spin of about 2 ms (so host launch overhead cannot enter the timed region) and a buffer larger than L2 is overwritten;
CUDA events bracket the call on the current stream, and the call is synchronized before the next implementation
runs. Inputs rotate among pre-made sets (fresh random data made outside the timed region). A second, shorter pass
follows each call with a device-wide synchronization and one more event, so that work hidden on other streams
shows up as a gap between the two event intervals (the side-stream check, measured the same way in every
process).

An implementation is an :class:`Entry`: a local callable (:class:`LocalEntry`: baselines in the judge, everything
in ``rsi bench``) or a candidate running in its own producer process (``rsi.harness.client.RemoteEntry``), which
runs this same :func:`timed_call` there. Calls of different processes never overlap: the loop hands the GPU from
one to the next (lockstep), so a candidate and its baselines are timed interleaved although CUDA events cannot
time another process's stream.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

METHOD = "cuda_event+l2_flush+shuffled_interleave+gpu_queued+lockstep"
# GPU spin before each flush: ~2 ms at the H200's ~1.98 GHz SM clock, so that the host stays ahead. 500k cycles
# (~0.25 ms, to the thirty-second session) did not cover a CuTe DSL launch (~120 us of host time, spikes above
# 0.35 ms): host time entered its event intervals (H100 runs 90 h and 90 c; docs/cute.md).
QUEUE_CYCLES = 4_000_000
FLUSH_BYTES = 256 * 1024 * 1024  # H200 L2 is 60 MB; B200 126 MB


@dataclass
class Samples:
    name: str
    times_us: list[float] = field(default_factory=list)      # CUDA-event time of each timed call
    late: int = 0  # timed calls the GPU caught up on (host time may be inside their interval; see timed_call)
    wall_us: list[float] = field(default_factory=list)       # host clock around each timed call, as the loop saw it
    sync_times_us: list[float] = field(default_factory=list)  # start -> after device-wide sync (synced pass)

    def pct(self, q: float) -> float:
        xs = sorted(self.times_us)
        if not xs:
            return float("nan")
        k = min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))
        return xs[k]

    def summary(self) -> dict[str, float]:
        return {"p20_us": self.pct(0.2), "p50_us": self.pct(0.5), "p80_us": self.pct(0.8), "n": len(self.times_us),
                "late": self.late,
                "sync_p50_us": statistics.median(self.sync_times_us) if self.sync_times_us else float("nan")}


class Flusher:
    def __init__(self, device: torch.device | str = "cuda", nbytes: int = FLUSH_BYTES):
        self.buf = torch.empty(nbytes // 4, dtype=torch.int32, device=device)

    def __call__(self) -> None:
        self.buf.zero_()


def timed_call(fn: Callable[..., Any], args: Sequence[Any], flush: Callable[[], None],
               queue_cycles: int = QUEUE_CYCLES) -> tuple[float, Any, bool]:
    """One timed call: GPU spin, L2 flush, events around ``fn(*args)``, synchronized. Returns (event µs, result,
    late). ``late``: an event recorded after the flush had completed by the time ``fn`` returned, so the GPU may have
    waited on the host inside the interval (the spin was too short for this launch): the time is an upper bound."""
    if queue_cycles:
        torch.cuda._sleep(queue_cycles)
    flush()
    lead = torch.cuda.Event()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    lead.record()
    s.record()
    out = fn(*args)
    late = lead.query()
    e.record()
    e.synchronize()
    return s.elapsed_time(e) * 1e3, out, late


def synced_call(fn: Callable[..., Any], args: Sequence[Any], flush: Callable[[], None],
                queue_cycles: int = QUEUE_CYCLES) -> tuple[float, float]:
    """One call followed by a device-wide synchronization: (event µs, through µs). ``through`` runs from the start
    event to an event recorded after the synchronization returned, so it includes work this process left on any
    other stream; the GPU spin before the start keeps host launch overhead out of both figures."""
    if queue_cycles:
        torch.cuda._sleep(queue_cycles)
    flush()
    s, e, after = (torch.cuda.Event(enable_timing=True) for _ in range(3))
    s.record()
    fn(*args)
    e.record()
    torch.cuda.synchronize()
    after.record()
    after.synchronize()
    return s.elapsed_time(e) * 1e3, s.elapsed_time(after) * 1e3


class Entry(Protocol):
    name: str

    def warm(self, set_index: int) -> None: ...

    def timed(self, set_index: int) -> tuple[float, bool]: ...  # (event µs, late) of one timed call

    def synced(self, set_index: int) -> tuple[float, float]: ...


class LocalEntry:
    """An implementation run in this process on pre-made input sets."""

    def __init__(self, name: str, fn: Callable[..., Any], input_sets: Sequence[tuple], flush: Callable[[], None]):
        self.name, self.fn, self.sets, self.flush = name, fn, input_sets, flush

    def warm(self, set_index: int) -> None:
        self.fn(*self.sets[set_index])

    def timed(self, set_index: int) -> tuple[float, bool]:
        us, _, late = timed_call(self.fn, self.sets[set_index], self.flush)
        return us, late

    def synced(self, set_index: int) -> tuple[float, float]:
        return synced_call(self.fn, self.sets[set_index], self.flush)


def interleave(entries: Sequence[Entry], n_sets: int, warmup: int = 5, reps: int = 40, sync_reps: int = 10,
               seed: int = 0) -> dict[str, Samples]:
    """Time every entry on the same input sets, interleaved in a shuffled order per repetition.

    Each repetition runs the entries in a freshly shuffled order (the plain rotation used before made every
    implementation follow the same neighbour, and H200 run 6 timed a kernel 2.5% apart from an identical copy of
    itself). ``wall_us`` is the host clock around each entry's timed call as this loop saw it: for a remote entry it
    includes the round trip to its process, and the judge checks that no event time exceeds it."""
    for ent in entries:
        for w in range(warmup):
            ent.warm(w % n_sets)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    out = {ent.name: Samples(ent.name) for ent in entries}
    rng = random.Random(seed)
    for r in range(reps):
        order = list(entries)
        rng.shuffle(order)
        for ent in order:
            t0 = time.perf_counter()
            us, late = ent.timed(r % n_sets)
            out[ent.name].wall_us.append((time.perf_counter() - t0) * 1e6)
            out[ent.name].times_us.append(us)
            out[ent.name].late += bool(late)
    for r in range(sync_reps):
        for ent in entries:
            _, through = ent.synced(r % n_sets)
            out[ent.name].sync_times_us.append(through)
    return out


def measure_copy_bandwidth(device="cuda", nbytes: int = 2 * 1024**3, reps: int = 30,
                           warmup: int = 50) -> dict[str, float]:
    """Device-to-device copy, counting bytes read plus bytes written: the practical bandwidth ceiling.

    Measured first thing, when the GPU may still idle at low clocks (345 MHz SM seen on the H200): ~50 copies
    (~50 ms) warm it up first. Across processes the H200 runs gave 4141-4277 GB/s."""
    src = torch.empty(nbytes // 2, dtype=torch.bfloat16, device=device).normal_()
    dst = torch.empty_like(src)
    flush = Flusher(device)
    for _ in range(warmup):
        dst.copy_(src)
    times = [timed_call(dst.copy_, (src,), flush, queue_cycles=0)[0] for _ in range(reps)]
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
                     reps: int = 40, sync_reps: int = 10, device="cuda", seed: int = 0) -> dict[str, Samples]:
    """Local implementations only (``rsi bench``): :func:`interleave` over :class:`LocalEntry` objects."""
    flush = Flusher(device)
    entries = [LocalEntry(name, fn, input_sets, flush) for name, fn in impls.items()]
    return interleave(entries, len(input_sets), warmup=warmup, reps=reps, sync_reps=sync_reps, seed=seed)


def hidden_work_gap(cand: Samples, baselines: Sequence[Samples]) -> float:
    """Time only a device-wide sync sees for the candidate, beyond the largest such gap of any baseline.

    The gap is measured from events on both sides of the synchronization (``synced_call``), so host launch
    overhead, which differs between a Triton launch and torch ops and between processes, stays out of it (H200 run
    13: host-clock gaps measured in the producer exceeded the judge's baselines by 50-86 us for honest kernels);
    work hidden on a side stream shows up as most of the kernel's own time."""
    c = cand.summary()
    own = c["sync_p50_us"] - c["p50_us"]
    base = max(b.summary()["sync_p50_us"] - b.summary()["p50_us"] for b in baselines)
    return own - base
