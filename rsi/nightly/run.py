"""Running a nightly: the machine lock, the output folder (resumable), the phases, the store, the report.

* **Machine lock.** ``fcntl.flock`` on ``$RSI_NIGHTLY_LOCK`` (default ``/tmp/rsi-nightly.lock``), held for the whole
  run, the holder's pid, host, start time and output folder written into the file and cleared on exit. The kernel
  drops a flock when its holder dies, so a killed nightly never blocks the next one; a file still holding a pid
  when the lock is free is the trace of one that was killed, and is reported (stale lock). A second nightly while
  one runs exits 3 and names the holder.
* **Resume.** ``DIR/state.json`` keeps the run id; each phase writes ``DIR/phases/<phase>.json`` (atomic rename)
  when it completes, whatever its outcome. Run again with the same DIR and the same options, a nightly skips every
  phase whose file holds the same command and runs the rest (a killed phase leaves no file: it runs again).
* Phase commands run in their own process group, killed with the nightly (``PR_SET_PDEATHSIG``) and at the phase
  timeout; their output goes to ``DIR/logs/<phase>.log``.
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rsi.nightly.plan import Options, Phase

LOCK_ENV = "RSI_NIGHTLY_LOCK"


class Busy(RuntimeError):
    """Another nightly holds the machine lock."""


def write_json(path: Path, obj: Any) -> None:
    """Atomically: a reader sees the old file or the whole new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(obj, indent=1, sort_keys=True, default=str) + "\n")
    os.replace(tmp, path)


@contextmanager
def machine_lock(out: Path, path: str | None = None) -> Iterator[str]:
    """Hold the machine lock; yields "" or a note about a stale holder (a nightly that was killed)."""
    path = path or os.environ.get(LOCK_ENV) or "/tmp/rsi-nightly.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    held = False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0).decode(errors="replace").strip() or "unknown holder"
            raise Busy(f"another nightly holds {path}: {holder}") from None
        held = True
        prev = os.pread(fd, 4096, 0).decode(errors="replace").strip()
        stale = f"stale machine lock {path} (its holder died without releasing it): {prev}" if prev else ""
        info = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "out": str(out),
                           "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
        os.ftruncate(fd, 0)
        os.pwrite(fd, info.encode(), 0)
        os.fsync(fd)
        yield stale
    finally:
        if held:
            os.ftruncate(fd, 0)         # a clean exit (an exception included) leaves no holder behind
        os.close(fd)                    # closing the descriptor releases the flock


def _libc():
    try:
        return ctypes.CDLL("libc.so.6", use_errno=True)
    except OSError:
        return None


def _die_with_parent(libc) -> None:
    """In the child before exec: its own session (one process group to kill) and SIGKILL when the nightly dies.
    ``libc`` is loaded in the parent, so the child makes two system calls and loads nothing."""
    os.setsid()
    if libc is not None:
        libc.prctl(1, signal.SIGKILL)                               # PR_SET_PDEATHSIG


def _tail(path: Path, n: int = 12) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""


def run_phase(ph: Phase, out: Path, timeout_s: float) -> dict[str, Any]:
    """Run one phase's command; its record (written to DIR/phases/) has the parsed output or the error."""
    rec: dict[str, Any] = {"name": ph.name, "kind": ph.kind, "command": list(ph.argv), "started":
                           time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "log": f"logs/{ph.file.stem}.log"}
    if ph.skip:
        return rec | {"status": "skipped", "rc": None, "error": ph.skip, "wall_s": 0.0}
    ph.raw.parent.mkdir(parents=True, exist_ok=True)
    ph.raw.unlink(missing_ok=True)
    log = out / rec["log"]
    log.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with open(log, "w") as fh:
        libc = _libc()
        proc = subprocess.Popen(ph.argv, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                preexec_fn=lambda: _die_with_parent(libc))   # noqa: PLW1509 (no lock taken in it)
        try:
            rc = proc.wait(timeout=timeout_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            rc, timed_out = proc.wait(), True
    rec |= {"rc": rc, "wall_s": time.perf_counter() - t0}
    try:
        rec["output"] = json.loads(ph.raw.read_text())
        rec |= {"status": "ok", "error": ""}
    except (OSError, ValueError) as e:
        why = f"timed out after {timeout_s:.0f} s" if timed_out else f"no output ({type(e).__name__})"
        rec |= {"status": "failed", "error": f"{why}; log tail: {_tail(log)}"}
    return rec


def done(ph: Phase, out: Path) -> dict[str, Any] | None:
    """The phase's record when it completed earlier with the same command, else None."""
    try:
        rec = json.loads((out / ph.file).read_text())
    except (OSError, ValueError):
        return None
    return rec if rec.get("command") == list(ph.argv) else None


def lock_info(root: str | None) -> dict[str, Any]:
    from rsi.verified import LOCK_NAME, find_root, kernels_root, read_lock

    r, how = find_root(root)
    path = kernels_root(r) / LOCK_NAME
    sha = hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None
    kernels = {t: {op: e["kernel"] for op, e in ops.items()} for t, ops in read_lock(r).get("targets", {}).items()}
    return {"path": str(path), "from": how, "sha256": sha, "kernels": kernels}


def repro_env() -> dict[str, str]:
    """The variables that change what the phases do (never credentials)."""
    keep = ("TRITON_INTERPRET", "CUDA_VISIBLE_DEVICES", "PYTHONPATH", "OMP_NUM_THREADS", "RSI_ROOT", "RSI_COMMIT",
            "RSI_DIRTY", "RSI_BWRAP", "RSI_JAIL", LOCK_ENV)
    secret = ("KEY", "TOKEN", "SECRET", "PASSWORD")
    return {k: v for k, v in sorted(os.environ.items())
            if (k in keep or k.startswith("RSI_")) and not any(s in k for s in secret)}


def state(o: Options, store, env: dict[str, Any], lock: dict[str, Any]) -> dict[str, Any]:
    """DIR/state.json: created on the first start (its environment and lock are the run's), its run marked running
    again on a resume (a resume's environment and lock, where they differ, are kept under ``resumes``)."""
    path = o.out / "state.json"
    st = json.loads(path.read_text()) if path.exists() else None
    if st and store.get_run(st["run_id"]) is not None:
        store.mark_running(st["run_id"])
        st["resumed"] = st.get("resumed", 0) + 1
        if (env, lock) != (st["env"], st["lock"]):     # the first start's stay the run's; a resume's are kept beside
            st.setdefault("resumes", []).append({"env": env, "lock": lock})
    else:
        rid = store.create_run("nightly", o.gpu, "cuda" if o.cuda else "interpret", "nightly",
                               {"argv": o.argv, "out": str(o.out)}, env)
        st = {"run_id": rid, "started_at": time.time(), "argv": o.argv, "resumed": 0, "env": env, "lock": lock}
    st["repro_env"] = repro_env()
    write_json(path, st)
    return st
