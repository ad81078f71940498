"""Probe 90 (thirty-second session; outside the judge, not a verdict): the judge's full-bucket gap. Run 89 h timed
modulate_fp8_cute (128 x 8) at 360 us at full in the judge and 236 us in probe 88's in-process loop, while the
locked Triton kernel took 268 us in both. One interleaved loop per bucket (rsi.harness.timing.interleave: shuffled
order, GPU spin and L2 flush before every call, the judge's own timed_call everywhere) over:
- local_cute / local_tri: in this process, outputs from the caching allocator (probe 88's setting);
- arena_cute / arena_tri: in this process, outputs carved from two alternating local buffers refilled with random
  bytes before every call and synchronized (the judge's arenas without CUDA IPC);
- remote_cute / remote_tri: a producer process (rsi.harness.producer, no sandbox) on inputs and arenas shared by
  CUDA IPC, exactly as the judge's RemoteEntry drives it (outputs not checked here);
- jail_cute: the same in the sandbox (bwrap), where RSI_BWRAP names one.
Two loops a bucket: quiet (the entries above) and judge_like (with the judge's eager reference and same-bytes copy
beside them: run 89 h's judge ran the eager reference, 13.4 ms a call at full, in its loop; probe 88 did not); each
call's time is kept with the entry that ran before it (after_eager_us).
Also each local kernel's host time per call (launch returns, GPU kept busy by a long spin: nothing waits).
--ncu: two buckets, 4 repetitions (run it under ncu --target-processes all for kernel durations per process).
Usage: python reports/h200/probe90.py OUT.json [REPS] [--ncu]"""
import json
import os
import random
import statistics
import sys
import time

import torch

from rsi import kernel as K
from rsi.contract import Candidate
from rsi.harness import jail
from rsi.harness import protocol as P
from rsi.harness import timing as T
from rsi.harness.client import Arenas, ProducerClient, RemoteEntry, arena_bytes, scratch_bytes
from rsi.harness.producer import Arena
from rsi.harness.wire import SharedMemory
from rsi.refs import get_op_group
from rsi.search.stats import paired_ratio_ci
from rsi.spaces import template_source
from rsi.templates import modulate_fp8_cute
from rsi.verified import locked_kernel

OP = "modulate_fp8"
CUTE = {"THREADS": 128, "CHUNKS": 8}


class ArenaEntry:
    """A local kernel whose outputs come from two alternating local arenas refilled with random bytes before each
    call (the judge's arenas, minus CUDA IPC)."""

    def __init__(self, name, fn, sets, flush, nbytes, scratch):
        self.name, self.fn, self.sets, self.flush = name, fn, sets, flush
        self.arenas = [Arena(torch.empty(nbytes + scratch, dtype=torch.uint8, device="cuda"), scratch)
                       for _ in range(2)]
        self.turn = 0
        self.gen = torch.Generator(device="cuda").manual_seed(5)

    def _next(self):
        a = self.arenas[self.turn]
        self.turn ^= 1
        a.buf.random_(0, 256, generator=self.gen)
        torch.cuda.synchronize()
        a.reset()
        K.set_allocator(lambda s, d, dev: a.alloc(s, d, dev), lambda s, d, dev: a.alloc(s, d, dev, scratch=True))

    def warm(self, i):
        self._next()
        self.fn(*self.sets[i])
        K.set_allocator(None, None)

    def timed(self, i):
        self._next()
        us, _, late = T.timed_call(self.fn, self.sets[i], self.flush)
        K.set_allocator(None, None)
        return us, late

    def synced(self, i):
        self._next()
        r = T.synced_call(self.fn, self.sets[i], self.flush)
        K.set_allocator(None, None)
        return r


class Logged:
    """An entry whose timed calls are appended to ``log`` as (name, us) in the order they ran."""

    def __init__(self, ent, log):
        self.ent, self.log, self.name = ent, log, ent.name

    def warm(self, i):
        self.ent.warm(i)

    def timed(self, i):
        us, late = self.ent.timed(i)
        self.log.append((self.name, us))
        return us, late

    def synced(self, i):
        return self.ent.synced(i)


def host_us(fn, args, n=50):
    """Median host time of one call that returns without waiting (the GPU is held by a long spin meanwhile)."""
    fn(*args)
    torch.cuda.synchronize()
    torch.cuda._sleep(400_000_000)   # ~0.2 s of GPU spin: every launch below queues behind it
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn(*args)
        ts.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    return statistics.median(ts)


def spawn(cand, sandbox, scratch_root):
    c = ProducerClient(cand, "cuda", sandbox, 600, scratch_root)
    c.request(P.LOAD, {"nonce": c.nonce, "candidate": cand.hash, "op": cand.op, "source": cand.source,
                       "config": dict(cand.config), "backend": "cuda"})
    return c


def bucket(g, shape, reps, clients, mem, flush, ids):
    private = [g.make_inputs(shape, 100 + i, "cuda") for i in range(2)]
    refs = [g.reference(*s) for s in private]
    lock_fn = locked_kernel(".", "h200", OP).load()
    cute_fn = lambda *a: modulate_fp8_cute.launch(*a, **CUTE)
    nb, sb = arena_bytes(tuple(refs[0])), scratch_bytes(private[0])
    entries = [T.LocalEntry("local_cute", cute_fn, private, flush), T.LocalEntry("local_tri", lock_fn, private, flush),
               ArenaEntry("arena_cute", cute_fn, private, flush, nb, sb),
               ArenaEntry("arena_tri", lock_fn, private, flush, nb, sb)]
    gen = torch.Generator(device="cuda").manual_seed(7)
    remote, keep = [], []   # keep: the shared copies live while a producer maps them
    for name, c in clients.items():
        cids = []
        for s in private:
            sh, sdescs, idescs = mem.share_inputs(s, c.scratch)
            keep.append(sh)
            k = next(ids)
            c.request(P.INPUTS, {"id": k, "storages": sdescs, "tensors": idescs})
            cids.append(k)
        base_id = next(ids)
        next(ids)   # Arenas takes base_id and base_id + 1
        ent = RemoteEntry(name, c, cids, Arenas(mem, c, nb, gen, base_id, sb), None, g, random.Random(0), 0.0)
        entries.append(ent)
        remote.append(ent)
    for e in entries[:2]:
        e.fn(*private[0])
    torch.cuda.synchronize()
    row = {"bucket": shape.name, "dims": shape.dims}
    # quiet: the entries above only (probe 88's setting); judge_like: with the judge's eager reference and same-bytes
    # copy in the loop (run 89 h's judge at full: eager 13.4 ms a call), each call's time kept with its predecessor
    extra = [T.LocalEntry("eager", g.reference, private, flush),
             T.LocalEntry("copy", T.same_bytes_copy(g.bytes_moved(shape), "cuda"), private, flush)]
    for loop, ents in (("quiet", entries), ("judge_like", entries + extra)):
        log = []
        samples = T.interleave([Logged(e, log) for e in ents], len(private), warmup=3, reps=reps, sync_reps=3,
                               seed=1)
        base = samples["local_tri"].times_us
        after = {e.name: [us for k, (n, us) in enumerate(log) if k and n == e.name and log[k - 1][0] == "eager"]
                 for e in ents}
        row[loop] = {"p50_us": {n: x.summary()["p50_us"] for n, x in samples.items()},
                     "p20_us": {n: x.summary()["p20_us"] for n, x in samples.items()},
                     "p80_us": {n: x.summary()["p80_us"] for n, x in samples.items()},
                     "sync_p50_us": {n: x.summary()["sync_p50_us"] for n, x in samples.items()},
                     "local_tri_over": {n: paired_ratio_ci(base, x.times_us) for n, x in samples.items()},
                     "after_eager_us": after, "calls": log}
        print(shape.name, loop, {n: round(p, 1) for n, p in row[loop]["p50_us"].items()}, flush=True)
        if loop == "judge_like":
            print("  after eager:", {n: [round(u) for u in v] for n, v in after.items() if v}, flush=True)
    for ent in remote:
        ent.release()
    row["wall_p50_us"] = {e.name: statistics.median(e.wall_us) for e in remote}
    row["host_us"] = {"local_cute": host_us(cute_fn, private[0]), "local_tri": host_us(lock_fn, private[0])}
    print(shape.name, "host", row["host_us"], "wall", row["wall_p50_us"], flush=True)
    return row


def main():
    out_path = sys.argv[1]
    ncu = "--ncu" in sys.argv
    reps = 4 if ncu else (int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2].isdigit() else 20)
    g = get_op_group(OP)
    scratch_root = os.path.join(os.path.dirname(os.path.abspath(out_path)), "producers")
    os.makedirs(scratch_root, exist_ok=True)
    lock = locked_kernel(".", "h200", OP)
    cute = Candidate(op=OP, source=template_source("modulate_fp8_cute"), config=CUTE)
    clients = {"remote_cute": spawn(cute, False, scratch_root), "remote_tri": spawn(lock.candidate, False,
                                                                                      scratch_root)}
    if os.environ.get("RSI_BWRAP") and not ncu:
        try:
            clients["jail_cute"] = spawn(cute, True, scratch_root)
        except Exception as e:   # noqa: BLE001 - a probe: go on without the sandboxed entry
            print("no sandboxed producer:", e, flush=True)
    mem, flush = SharedMemory(torch.device("cuda")), T.Flusher("cuda")
    ids = iter(range(1, 10_000))
    res = {"note": __doc__, "torch": torch.__version__, "device": torch.cuda.get_device_name(), "reps": reps,
           "cute": CUTE, "lock": lock.path.name, "jail": jail.level(), "rows": []}
    try:
        for shape in g.shapes:
            if shape.name not in ("stage1", "full"):
                continue
            res["rows"].append(bucket(g, shape, reps, clients, mem, flush, ids))
            with open(out_path, "w") as f:
                json.dump(res, f, indent=1, default=str)
    finally:
        for c in clients.values():
            c.release_all()
            c.kill()
            c.close()


if __name__ == "__main__":
    main()
