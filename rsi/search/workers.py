"""Judging candidates in parallel: one driver (proposer, Optuna study, SQLite store, promotions) and N judges.

* :class:`InProcessPool` (``--workers 1``, the default): the judge in the driver's process, as before.
* :class:`ProcessPool` (``--workers N`` without ``--ray-address``): N local processes, each with its own judge
  (and on CUDA its own GPU: ``CUDA_VISIBLE_DEVICES`` set before torch starts).
* :class:`RayPool` (``--ray-address auto|HOST:PORT|local``): N Ray actors (``num_gpus=1`` on CUDA), each with its
  own judge, on a Ray cluster (``local``: a cluster started here for this search).

Every judge is the same sandboxed judge (rsi.harness.judge): its candidate is timed against baselines and
incumbents timed in the same process on the same GPU, so a verdict's ratios are like with like; the verdict names
the worker (``details.worker``: id, host, GPU, pid) and so does a promotion record. A worker whose GPU is not the
search's target is refused at start. A worker that dies (its process or node gone) has its candidate re-queued to
another worker: nothing is lost, and since only the driver records a verdict, when it arrives, nothing is counted
twice. A killed driver resumes with ``--resume``: candidates in flight were never recorded, and the Optuna study
re-queues their trials (rsi.search.propose).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import socket
import time
from collections import deque
from dataclasses import asdict
from typing import Any

from rsi.contract import Candidate


class WorkerError(RuntimeError):
    """No worker can judge (all refused or dead); the message says why."""


def worker_info(index: int, backend: str, target: str | None) -> dict[str, Any]:
    """This process's identity as a verdict records it; ``refused`` when its GPU is not the search's target."""
    info: dict[str, Any] = {"id": index, "host": socket.gethostname(), "pid": os.getpid(), "backend": backend}
    if backend == "cuda":
        from rsi.targets import detect_local

        local = detect_local()
        info["gpu"] = local.name if local else None
        if target and info["gpu"] != target:
            info["refused"] = f"worker {index} on {info['host']} has GPU {info['gpu']}, the search targets {target}"
    return info


class _Judging:
    """One judge and its identity, in whatever process hosts it (the pools' workers)."""

    def __init__(self, index: int, judge_opts: dict[str, Any]):
        from rsi.harness.judge import Judge, JudgeOptions

        self.info = worker_info(index, judge_opts["backend"], judge_opts.get("target"))
        self.judge = None if "refused" in self.info else Judge(JudgeOptions(**judge_opts))

    def evaluate(self, cand: Candidate, best: Candidate | None) -> dict[str, Any]:
        kill_after = os.environ.get("RSI_TEST_KILL_WORKER")          # tests: "<worker id>:<n>" dies on call n
        if kill_after:
            wid, n = (int(x) for x in kill_after.split(":"))
            self.calls = getattr(self, "calls", 0) + 1
            if wid == self.info["id"] and self.calls == n:
                os._exit(17)
        verdict = self.judge.evaluate(cand, best)
        verdict.setdefault("details", {})["worker"] = self.info
        return verdict

    def close(self) -> None:
        if self.judge is not None:
            self.judge.close()


# ------------------------------------------------------------------------------------------------ in process
class InProcessPool:
    """The judge in the driver's process: one candidate at a time (``--workers 1``)."""

    kind = "in-process"

    def __init__(self, judge_opts: dict[str, Any]):
        self._j = _Judging(0, judge_opts)
        if self._j.judge is None:
            raise WorkerError(self._j.info["refused"])
        self.size, self._todo = 1, deque()
        self.workers = [self._j.info]

    def describe(self) -> dict[str, Any]:
        return self._j.judge.describe()

    def submit(self, key: int, cand: Candidate, best: Candidate | None) -> None:
        self._todo.append((key, cand, best))

    def results(self, timeout: float | None = None) -> list[tuple[int, dict[str, Any]]]:
        if not self._todo:
            return []
        key, cand, best = self._todo.popleft()
        return [(key, self._j.evaluate(cand, best))]

    def notes(self) -> list[str]:
        return []

    def close(self) -> None:
        self._j.close()


# ------------------------------------------------------------------------------------------------ local processes
def _process_main(index: int, judge_opts: dict[str, Any], device: str | None, tasks, results) -> None:
    if device is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = device
    j = _Judging(index, judge_opts)
    results.put(("ready", index, j.info))
    if j.judge is None:
        return
    try:
        while True:
            task = tasks.get()
            if task is None:
                break
            key, cand, best = task
            try:
                results.put(("verdict", index, (key, j.evaluate(cand, best))))
            except Exception as e:     # noqa: BLE001 - a judge that breaks reports it; the driver requeues
                results.put(("error", index, (key, f"{type(e).__name__}: {e}")))
    finally:
        j.close()


class _Pool:
    """Shared bookkeeping of the multi-worker pools: which worker holds which task, re-queues on death."""

    def __init__(self):
        self._pending: deque = deque()            # (key, cand, best) not yet on a worker
        self._busy: dict[int, tuple] = {}         # worker id -> its task
        self._alive: set[int] = set()
        self._notes: list[str] = []
        self.workers: list[dict[str, Any]] = []

    def submit(self, key: int, cand: Candidate, best: Candidate | None) -> None:
        self._pending.append((key, cand, best))
        self._dispatch()

    def _dispatch(self) -> None:
        for w in sorted(self._alive - set(self._busy)):
            if not self._pending:
                return
            task = self._pending.popleft()
            self._busy[w] = task
            self._send(w, task)

    def _lost(self, w: int, why: str) -> None:
        """Worker w is gone: its task (if any) goes back to the front of the queue."""
        self._alive.discard(w)
        task = self._busy.pop(w, None)
        if task is not None:
            self._pending.appendleft(task)
            self._notes.append(f"worker {w} lost ({why}); candidate {task[1].hash[:10]} re-queued")
        else:
            self._notes.append(f"worker {w} lost ({why})")
        if not self._alive:
            raise WorkerError(f"every worker is gone (last: worker {w}, {why}); {len(self._pending)} candidate(s) "
                              "not judged: --resume judges them")
        self._dispatch()

    def notes(self) -> list[str]:
        out, self._notes = self._notes, []
        return out

    def describe(self) -> dict[str, Any]:
        return {"sandbox": "per worker", "workers": self.workers}


class ProcessPool(_Pool):
    kind = "local processes"

    def __init__(self, n: int, judge_opts: dict[str, Any], start_timeout: float = 300.0):
        super().__init__()
        ctx = mp.get_context("spawn")
        self._results = ctx.Queue()
        self._tasks, self._procs = {}, {}
        cuda = judge_opts["backend"] == "cuda"
        for i in range(n):
            self._tasks[i] = ctx.Queue()
            p = ctx.Process(target=_process_main, args=(i, judge_opts, str(i) if cuda else None, self._tasks[i],
                                                        self._results), daemon=True)
            p.start()
            self._procs[i] = p
        deadline = time.monotonic() + start_timeout
        refused = []
        while len(self.workers) + len(refused) < n:
            try:
                _kind, i, info = self._results.get(timeout=max(1.0, deadline - time.monotonic()))
            except queue.Empty:
                raise WorkerError(f"{n - len(self.workers) - len(refused)} worker(s) did not start within "
                                  f"{start_timeout:.0f} s") from None
            (refused if "refused" in info else self.workers).append(info)
            if "refused" not in info:
                self._alive.add(i)
        for info in refused:
            self._notes.append(f"refused: {info['refused']}")
        if not self._alive:
            raise WorkerError("no worker can judge: " + "; ".join(r["refused"] for r in refused))
        self.size = len(self._alive)

    def _send(self, w: int, task: tuple) -> None:
        self._tasks[w].put(task)

    def results(self, timeout: float | None = 1.0) -> list[tuple[int, dict[str, Any]]]:
        out = []
        try:
            kind, w, payload = self._results.get(timeout=timeout)
        except queue.Empty:
            for w in list(self._alive):                     # a worker that died without a word
                if not self._procs[w].is_alive():
                    self._lost(w, f"process exited with code {self._procs[w].exitcode}")
            return out
        if kind == "verdict":
            self._busy.pop(w, None)
            out.append(payload)
        elif kind == "error":
            self._lost(w, payload[1])
            self._procs[w].kill()
        self._dispatch()
        return out

    def close(self) -> None:
        for w, q in self._tasks.items():
            if self._procs[w].is_alive():
                q.put(None)
        for p in self._procs.values():
            p.join(timeout=30)
            if p.is_alive():
                p.kill()


# ------------------------------------------------------------------------------------------------ Ray
class RayPool(_Pool):
    kind = "Ray"

    def __init__(self, n: int, judge_opts: dict[str, Any], address: str):
        super().__init__()
        try:
            import ray
        except ImportError:
            raise WorkerError("--ray-address needs Ray: pip install -e '.[ray]' (or run --workers N without "
                              "--ray-address for local processes)") from None
        self.ray, self._started = ray, not ray.is_initialized()
        if self._started:
            kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
            if address != "local":
                kw["address"] = address
            ray.init(**kw)
        gpus = 1 if judge_opts["backend"] == "cuda" else 0

        @ray.remote(num_gpus=gpus, max_restarts=0)
        class JudgeActor:
            def __init__(self, index, opts):
                self.j = _Judging(index, opts)

            def info(self):
                return self.j.info

            def evaluate(self, cand, best):
                return self.j.evaluate(cand, best)

            def close(self):
                self.j.close()

        self._actors = {i: JudgeActor.remote(i, judge_opts) for i in range(n)}
        infos = ray.get([a.info.remote() for a in self._actors.values()])
        for i, info in enumerate(infos):
            if "refused" in info:
                self._notes.append(f"refused: {info['refused']}")
                ray.kill(self._actors.pop(i))
            else:
                self.workers.append(info)
                self._alive.add(i)
        if not self._alive:
            raise WorkerError("no Ray worker can judge: " + "; ".join(self._notes))
        self.size = len(self._alive)
        self._refs: dict[Any, int] = {}

    def _send(self, w: int, task: tuple) -> None:
        key, cand, best = task
        self._refs[self._actors[w].evaluate.remote(cand, best)] = (w, key)

    def results(self, timeout: float | None = 1.0) -> list[tuple[int, dict[str, Any]]]:
        if not self._refs:
            return []
        done, _ = self.ray.wait(list(self._refs), num_returns=1, timeout=timeout)
        out = []
        for ref in done:
            w, key = self._refs.pop(ref)
            try:
                verdict = self.ray.get(ref)
            except (self.ray.exceptions.RayActorError, self.ray.exceptions.WorkerCrashedError) as e:
                self._actors.pop(w, None)
                self._lost(w, f"Ray actor died: {type(e).__name__}")
                continue
            self._busy.pop(w, None)
            out.append((key, verdict))
        self._dispatch()
        return out

    def close(self) -> None:
        for a in self._actors.values():
            try:
                self.ray.get(a.close.remote(), timeout=30)
            except Exception:          # noqa: BLE001, S110 - a dead actor has nothing to close
                pass
        if self._started:
            self.ray.shutdown()


def make_pool(workers: int, ray_address: str | None, judge_opts) -> InProcessPool | ProcessPool | RayPool:
    """The pool ``rsi search --workers N [--ray-address A]`` asks for; ``judge_opts`` a JudgeOptions."""
    opts = asdict(judge_opts)
    if workers < 1:
        raise WorkerError(f"--workers {workers}: at least 1")
    if ray_address:
        return RayPool(workers, opts, ray_address)
    if workers == 1:
        return InProcessPool(opts)
    return ProcessPool(workers, opts)
