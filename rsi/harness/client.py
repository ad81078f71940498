"""The judge's side of a producer: its process and strict channel, the output arenas, and its timing entry.

``ProducerClient`` starts one producer (``rsi.harness.producer``) inside the sandbox and exchanges one strictly
parsed reply per request (``rsi.harness.protocol``). ``Arenas`` are the judge-owned output buffers, refilled with
random bytes before every call; ``outputs_from`` and ``guard_violation`` read a call's outputs and check the bytes
around them. An arena ends in a scratch zone (``scratch_bytes``: the size of the call's inputs plus 1 MiB) that the
candidate may write through ``K.scratch`` (a kernel that first copies an input into a layout it can read); outputs
may not lie in it, its bytes are not checked, and the fresh random fill of every call leaves nothing in it from the
last (but the refill trial's first call: ``Arenas.again``). ``RemoteEntry`` is a producer as one entry of the timing loop
(``rsi.harness.timing.interleave``).
"""

from __future__ import annotations

import os
import random
import secrets
import select
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Any

import torch

from rsi.contract import Candidate, OpGroup, ToleranceClass
from rsi.harness import check, jail
from rsi.harness import protocol as P
from rsi.harness.producer import ALIGN, GUARD
from rsi.harness.wire import SharedMemory, dtype_of, make_view

ARENA_SLACK = 1 << 20
# workspace that does not grow with the inputs (per-document padding, partial reductions: attention_fp8_cute's
# transposed V at one row is 64 columns a head), on top of the scratch zone's one copy of each input
SCRATCH_SLACK = 1 << 20


class StageError(Exception):
    def __init__(self, stage: str, reason: str, details: dict | None = None):
        super().__init__(reason)
        self.stage, self.reason, self.details = stage, reason, details or {}


def _trim(s: str, n: int = 600) -> str:
    s = s.strip()
    return s if len(s) <= n else s[: n // 2] + " ... " + s[-n // 2:]


# ------------------------------------------------------------------------------------------------ producer client
class ProducerClient:
    """One producer process for one candidate; every request gets exactly one strictly parsed reply."""

    def __init__(self, cand: Candidate, backend: str, sandbox: bool, timeout_s: float, scratch_root: str):
        self.cand, self.backend, self.timeout_s = cand, backend, timeout_s
        self.nonce = secrets.token_hex(16)
        self.scratch = tempfile.mkdtemp(prefix="rsi-producer-", dir=scratch_root)
        argv, env = jail.command(backend, self.scratch, int(timeout_s) * 4, sandbox)
        self.err_path = os.path.join(scratch_root, os.path.basename(self.scratch) + ".log")
        with open(self.err_path, "w") as err:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=env,
                                         start_new_session=True, bufsize=0)
        self._buf = b""
        self.live_inputs: set[int] = set()   # shared storages the producer maps now (released before a kill)
        self.live_arenas: set[int] = set()

    def release_all(self) -> None:
        """Best effort, a few seconds at most: ask a live producer to let go of every shared storage, so that CUDA
        IPC can free the judge's buffers (a producer killed while mapping them leaves them allocated for good)."""
        if self.proc.poll() is not None or not (self.live_inputs or self.live_arenas):
            return
        timeout, self.timeout_s = self.timeout_s, 5.0
        try:
            self.request(P.DROP, {"inputs": sorted(self.live_inputs), "arenas": sorted(self.live_arenas)})
        except Exception:  # noqa: BLE001, S110 - a producer that cannot answer is killed next anyway
            pass
        finally:
            self.timeout_s = timeout

    def _stderr_tail(self, n: int = 1200) -> str:
        try:
            with open(self.err_path, "rb") as f:
                f.seek(max(0, os.path.getsize(self.err_path) - n))
                return f.read().decode(errors="replace").strip()
        except OSError:
            return ""

    def request(self, kind: str, args: dict[str, Any], expect: str = P.OK) -> P.Reply:
        if kind == P.INPUTS:
            self.live_inputs.add(args["id"])
        elif kind == P.ARENA:
            self.live_arenas.add(args["id"])
        elif kind == P.DROP:
            self.live_inputs.difference_update(args.get("inputs", []))
            self.live_arenas.difference_update(args.get("arenas", []))
        line = P.Request(kind, args).encode().encode()
        try:
            self.proc.stdin.write(line)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass
        raw = self._read_line()
        reply = P.parse_reply(raw, self.nonce, self.cand.hash, expect)
        if self._buf or self._pending():
            raise P.ProtocolError("the producer sent more than one message for one request")
        if reply.kind == P.ERROR:
            msg, _, tb = reply.message.partition("\nTraceback")
            raise StageError("compile" if reply.stage == "compile" else "correctness", _trim(msg, 1500),
                             {"producer_stage": reply.stage, "traceback": ("Traceback" + tb)[-6000:] if tb else ""})
        return reply

    def _pending(self) -> bool:
        r, _, _ = select.select([self.proc.stdout], [], [], 0)
        if r:
            chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
            self._buf += chunk
            return bool(chunk)
        return False

    def _read_line(self) -> str:
        deadline = time.monotonic() + self.timeout_s
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise StageError("timeout", f"no reply within {self.timeout_s:.0f} s (hang or runaway kernel); "
                                            f"producer killed")
            r, _, _ = select.select([self.proc.stdout], [], [], min(left, 1.0))
            if r:
                chunk = os.read(self.proc.stdout.fileno(), 1 << 20)
                if not chunk:
                    code = self.proc.wait()
                    how = f"signal {-code}" if code < 0 else f"exit code {code}"
                    raise StageError("crash", f"producer died ({how}) while running the candidate: "
                                              f"{_trim(self._stderr_tail(), 600) or 'no output'}")
                self._buf += chunk
                if len(self._buf) > 1 << 22:
                    raise P.ProtocolError("reply larger than 4 MiB")
        line, _, self._buf = self._buf.partition(b"\n")
        return line.decode("utf-8", errors="replace")

    def close(self) -> str:
        """Ask the producer to exit; returns "" on a clean exit, else what went wrong."""
        why = ""
        if self.proc.poll() is None:
            try:
                self.request(P.EXIT, {})
                self.proc.stdin.close()
                rest = self.proc.stdout.read()
                if rest.strip():
                    why = "the producer wrote after its last reply"
                self.proc.wait(timeout=30)
            except (StageError, P.ProtocolError, subprocess.TimeoutExpired, OSError) as e:
                why = f"the producer did not exit cleanly ({e})"
        self.kill()
        shutil.rmtree(self.scratch, ignore_errors=True)
        try:
            os.remove(self.err_path)
        except OSError:
            pass
        return why

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()


# ------------------------------------------------------------------------------------------------ one call, checked
class Arenas:
    """Two output arenas per producer and shape, used alternately; each is filled with random bytes per call."""

    def __init__(self, mem: SharedMemory, client: ProducerClient, nbytes: int, gen: torch.Generator, base_id: int,
                 scratch: int = 0):
        """nbytes: the outputs' zone (``arena_bytes``); scratch: the scratch zone after it (``scratch_bytes``)."""
        self.bufs, self.gen, self.nbytes, self.scratch = [], gen, nbytes, scratch
        self.ids = [base_id, base_id + 1]
        for k in self.ids:
            buf, desc = mem.alloc(nbytes + scratch, client.scratch)
            client.request(P.ARENA, {"id": k, "storage": desc, "scratch": scratch})
            self.bufs.append(buf)
        self.client, self.turn, self.last = client, 0, None

    def again(self, keep_fill: bool) -> tuple[int, torch.Tensor, torch.Tensor | None]:
        """The arena of the last call as that call left it, not refilled: what the runtime's caching allocator may
        hand a kernel's next call (its previous outputs and workspace, so a kernel that finds its own marker there
        and answers from it shows here). Before any call, ``next``."""
        if self.last is None:
            return self.next(keep_fill)
        i = self.last
        self.turn = i ^ 1
        buf = self.bufs[i]
        return self.ids[i], buf, buf.clone() if keep_fill else None

    def next(self, keep_fill: bool, zeros: bool = False) -> tuple[int, torch.Tensor, torch.Tensor | None]:
        """The other arena, refilled with random bytes (``zeros``: with zeros, as fresh device memory often is)."""
        i = self.turn
        self.turn ^= 1
        self.last = i
        buf = self.bufs[i]
        if zeros:
            buf.zero_()
        else:
            buf.random_(0, 256, generator=self.gen)
        fill = buf.clone() if keep_fill else None
        if buf.is_cuda:
            torch.cuda.synchronize()
        return self.ids[i], buf, fill

    def release(self) -> None:
        self.client.request(P.DROP, {"arenas": self.ids})
        self.bufs = []


def arena_bytes(refs: tuple) -> int:
    total = GUARD
    for r in refs:
        total = -(-total // ALIGN) * ALIGN + r.numel() * r.element_size() + GUARD
    return total + ARENA_SLACK


def scratch_bytes(inputs: tuple) -> int:
    """The scratch zone of an arena: room for one contiguous copy of every tensor input (with its guard band), plus
    the alignment of the zone's first allocation (the outputs' zone ends anywhere) and SCRATCH_SLACK."""
    total = 0
    for x in inputs:
        if torch.is_tensor(x):
            total += -(-(x.numel() * x.element_size()) // ALIGN) * ALIGN + 2 * GUARD
    return total + ALIGN + SCRATCH_SLACK if total else 0


def outputs_from(reply: P.Reply, buf: torch.Tensor, limit: int | None = None) -> tuple[torch.Tensor, ...]:
    """The candidate's outputs as views of the judge's own arena (never memory the producer names freely), all
    within its first ``limit`` bytes (the outputs' zone: not in the scratch zone after it)."""
    outs = []
    for i, o in enumerate(reply.outputs):
        if o.foreign:
            raise StageError("correctness", f"output {i} {o.foreign}")
        dt = dtype_of(o.dtype)
        esize = torch.empty(0, dtype=dt).element_size()
        if o.offset % esize:
            raise StageError("correctness", f"output {i} is misaligned in its arena")
        try:
            outs.append(make_view(buf.untyped_storage(), dt, o.shape, o.stride, o.offset // esize))
        except ValueError as e:
            raise StageError("correctness", f"output {i}: {e}") from None
        if limit is not None and check._storage_span(outs[-1])[1] - buf.data_ptr() > limit:
            raise StageError("correctness", f"output {i} lies in the scratch zone (K.scratch is for workspace, "
                                            "outputs come from K.empty)")
    return tuple(outs)


def guard_violation(buf: torch.Tensor, fill: torch.Tensor, outs: tuple, limit: int | None = None) -> str:
    """Bytes outside every output's span, up to ``limit`` (the scratch zone after it is not checked), must still
    hold the random fill (out-of-bounds writes show here)."""
    mask = torch.ones(buf.numel(), dtype=torch.bool, device=buf.device)
    if limit is not None:
        mask[limit:] = False
    base = buf.data_ptr()
    for o in outs:
        a, b = check._storage_span(o)
        mask[a - base: b - base] = False
    bad = (buf != fill) & mask
    n = int(bad.sum())
    if n:
        first = int(bad.nonzero()[0])
        return f"{n} bytes written outside the outputs (first at arena byte {first}): an out-of-bounds write"
    return ""


class RemoteEntry:
    """A kernel in a producer, as one entry of the timing loop. After each timed call the judge decides, with a
    generator the producer never sees, whether to compare that call's outputs with the reference."""

    def __init__(self, name, client: ProducerClient, input_ids: list[int], arenas: Arenas, expected, op: OpGroup,
                 secret: random.Random, fraction: float, tol: ToleranceClass | None = None):
        """``expected``: (reference outputs per input set, the judge's private input sets), or None (not checked);
        ``tol``: the class the outputs are compared under (None: the op group's)."""
        self.name, self.client, self.ids, self.arenas, self.op = name, client, input_ids, arenas, op
        self.tol = op.tolerance if tol is None else tol
        self.refs, self.private = expected if expected is not None else (None, None)
        self._oracles: dict[int, tuple] = {}
        self.secret, self.fraction = secret, fraction
        self.wall_us: list[float] = []
        self.event_us: list[float] = []
        self.checked = 0

    def warm(self, set_index: int) -> None:
        aid, _, _ = self.arenas.next(keep_fill=False)
        self.client.request(P.WARM, {"inputs": self.ids[set_index], "arena": aid, "n": 1})

    def timed(self, set_index: int) -> tuple[float, bool]:
        aid, buf, fill = self.arenas.next(keep_fill=self.refs is not None)
        t0 = time.perf_counter()
        reply = self.client.request(P.TIME, {"inputs": self.ids[set_index], "arena": aid}, expect=P.TIMED)
        self.wall_us.append((time.perf_counter() - t0) * 1e6)
        self.event_us.append(reply.event_us)
        if self.refs is not None and (not self.checked or self.secret.random() < self.fraction):
            self.checked += 1
            outs = outputs_from(reply, buf, self.arenas.nbytes)
            refs = self.refs[set_index]
            ok, why = check.check_structure(outs, refs)
            if not ok:
                raise StageError("timing", f"a timed call's output: {why}")
            for i, o in enumerate(outs):
                if any(check.overlaps(o, o2) for o2 in outs[:i]):
                    raise StageError("timing", f"a timed call's outputs overlap (output {i})")
            bad = guard_violation(buf, fill, outs, self.arenas.nbytes)
            if bad:
                raise StageError("timing", f"a timed call: {bad}")
            oracles, scales = self._oracle(set_index)
            for i, (o, r, orc, sc) in enumerate(zip(outs, refs, oracles, scales)):
                ok, _, why = check.compare(o, r, orc, self.tol, term_scale=sc)
                if not ok:
                    raise StageError("timing", f"a timed call's output {i} is wrong ({why}): the kernel behaves "
                                               f"differently when timed")
        return reply.event_us, reply.late

    def _oracle(self, set_index: int) -> tuple[tuple, tuple]:
        """(fp64 oracles, term scales) of one input set, computed once."""
        if set_index not in self._oracles:
            n = len(self.refs[set_index])
            inputs = self.private[set_index]
            oracles = check.as_tuple(self.op.oracle(*inputs)) if check.needs_oracle(self.tol) else (None,) * n
            self._oracles[set_index] = (oracles, check.term_scales(self.op, inputs, n))
        return self._oracles[set_index]

    def synced(self, set_index: int) -> tuple[float, float]:
        aid, _, _ = self.arenas.next(keep_fill=False)
        r = self.client.request(P.SYNCED, {"inputs": self.ids[set_index], "arena": aid}, expect=P.SYNC)
        return r.event_us, r.through_us

    def release(self) -> None:
        self.arenas.release()
        self.client.request(P.DROP, {"inputs": self.ids})


class AliasEntry:
    """The same remote kernel timed a second time in the loop: the A/A measurement of the noise band."""

    def __init__(self, name: str, target: RemoteEntry):
        self.name, self.t = name, target

    def warm(self, set_index: int) -> None:
        pass

    def timed(self, set_index: int) -> tuple[float, bool]:
        return self.t.timed(set_index)

    def synced(self, set_index: int) -> tuple[float, float]:
        return self.t.synced(set_index)
