"""Parent side of the isolated worker: a crash, hang or illegal memory access rejects only that candidate.

One long-lived worker process evaluates candidates one at a time (so baselines compile once); when a candidate
times out the worker's process group is killed, and when the worker dies its stderr tail becomes the reason.
Either way the next candidate gets a fresh worker and the search goes on.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any, Self


class Sandbox:
    def __init__(self, backend: str, timeout_s: float = 600.0, env: dict[str, str] | None = None):
        self.backend = backend
        self.timeout_s = timeout_s
        self.extra_env = dict(env or {})
        self.proc: subprocess.Popen | None = None
        self.stderr_path = ""

    def _start(self) -> None:
        # candidate code (LLM-written, too) runs in the worker: it gets no API keys or tokens
        env = {k: v for k, v in os.environ.items() if not any(w in k.upper() for w in ("API_KEY", "TOKEN", "SECRET"))}
        env.update(self.extra_env)
        if self.backend == "interpret":
            env["TRITON_INTERPRET"] = "1"
        env.setdefault("PYTHONUNBUFFERED", "1")
        fd, self.stderr_path = tempfile.mkstemp(prefix="rsi-worker-", suffix=".log")
        self.proc = subprocess.Popen([sys.executable, "-m", "rsi.harness.worker"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=fd, env=env, start_new_session=True,
                                     text=True, bufsize=1)
        os.close(fd)

    def _stderr_tail(self, n: int = 1500) -> str:
        try:
            with open(self.stderr_path, errors="replace") as f:
                return f.read()[-n:].strip()
        except OSError:
            return ""

    def _kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
        self.proc = None

    def evaluate(self, job: dict[str, Any], candidate_hash: str) -> dict[str, Any]:
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        assert self.proc and self.proc.stdin and self.proc.stdout
        try:
            self.proc.stdin.write(json.dumps(job) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass
        deadline = time.monotonic() + self.timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self._kill()
                return _reject(candidate_hash, "timeout", f"no verdict within {self.timeout_s:.0f} s (hang or "
                                                          f"runaway kernel); worker killed")
            ready, _, _ = select.select([self.proc.stdout], [], [], min(left, 1.0))
            if ready:
                line = self.proc.stdout.readline()
                if line:
                    result = json.loads(line)
                    if self.proc.poll() is None:
                        time.sleep(0)  # keep the worker for the next candidate
                    return result
                code = self.proc.wait()
                tail = self._stderr_tail()
                self.proc = None
                how = f"signal {-code}" if code < 0 else f"exit code {code}"
                return _reject(candidate_hash, "crash", f"worker died ({how}) while running the candidate: "
                                                        f"{tail[-600:] or 'no output'}")

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None and self.proc.stdin:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except (subprocess.TimeoutExpired, BrokenPipeError, OSError):
                pass
        self._kill()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _reject(candidate_hash: str, stage: str, reason: str) -> dict[str, Any]:
    return {"candidate": candidate_hash, "status": "rejected", "stage": stage, "reason": reason,
            "tolerance": {}, "timings": [], "details": {}}
