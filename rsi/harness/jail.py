"""The producer's sandbox: bubblewrap (``bwrap``) with no network, its own PID, IPC and UTS namespaces (it sees
no other process, and everything it starts dies with it), no capabilities, a read-only file system except the
job's private scratch directory, private ``/tmp``, ``/var/tmp`` and ``/run``, a minimal ``/dev`` (on CUDA plus the NVIDIA device
nodes and the host's ``/dev/shm``, which CUDA IPC's reference counts live in), a cleared environment and resource
limits (set by the producer before it imports the candidate).

CuTe DSL candidates need nothing more: the package is read where Python finds it (a copy under /tmp, such as the
H200 runs' ``pip install --target /tmp/site`` on PYTHONPATH, is bound in read-only like any sys.path entry there), and
its cache directory is the job's scratch (``CUTE_DSL_CACHE_DIR``; it compiles in memory, ``K.cute_launch``).

``RSI_BWRAP`` names the bwrap binary when it is not on PATH (the H200 runs carry one). Where bwrap is missing or
cannot create namespaces here, :func:`available` says why; the judge then refuses LLM-proposed candidates unless
the user passed the unsafe flag, and every verdict and record states how the producer ran.
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
import subprocess
import sys

# variables a producer may see; everything else (API keys, tokens, the user's settings) stays out
PASS_ENV = ("PATH", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "LANG", "LC_ALL", "TRITON_PTXAS_PATH",
            "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS")


MASKED = ("/tmp", "/var/tmp", "/run", "/var/run")  # private in the sandbox (an empty tmpfs each)


def level() -> str:
    """``strict`` (default) or ``compat`` (``RSI_JAIL=compat``: the host's /dev and no PID/IPC namespaces, for a
    machine where CUDA IPC fails across namespaces; verdicts say which level ran)."""
    return "compat" if os.environ.get("RSI_JAIL") == "compat" else "strict"


def _flags(backend: str) -> list[str]:
    common = ["--ro-bind", "/", "/", "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/run", "--unshare-net",
              "--unshare-uts", "--cap-drop", "ALL", "--die-with-parent", "--new-session"]
    # the other places unix sockets and scratch files live on a host: hidden (a read-only bind does not stop a
    # connect() to a socket file)
    common += [a for d in ("/var/tmp", "/var/run") if os.path.isdir(d) and not os.path.islink(d)
               for a in ("--tmpfs", d)]
    if level() == "compat":
        return common + ["--dev-bind", "/dev", "/dev"]
    flags = common + ["--unshare-pid", "--unshare-ipc", "--dev", "/dev"]
    if backend == "cuda":
        for node in sorted(glob.glob("/dev/nvidia*")) + sorted(glob.glob("/dev/dri/*")):
            flags += ["--dev-bind", node, node]
        flags += ["--bind", "/dev/shm", "/dev/shm"]
    return flags


def bwrap_binary() -> str | None:
    return os.environ.get("RSI_BWRAP") or shutil.which("bwrap")


@functools.lru_cache(maxsize=1)
def available() -> tuple[bool, str]:
    """(True, "") when bwrap can build the producer's sandbox on this machine, else (False, why)."""
    exe = bwrap_binary()
    if exe is None:
        return False, "bubblewrap (bwrap) is not installed (apt-get install bubblewrap, or set RSI_BWRAP)"
    try:
        r = subprocess.run([exe, *_flags("interpret"), "true"], capture_output=True, timeout=20, text=True,
                           check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, f"bwrap failed to start: {e}"
    if r.returncode != 0:
        return False, f"bwrap cannot create its namespaces here: {r.stderr.strip()[:200]}"
    return True, ""


def environment(backend: str, scratch: str) -> dict[str, str]:
    env = {k: os.environ[k] for k in PASS_ENV if k in os.environ}
    env.update({"HOME": scratch, "TMPDIR": os.path.join(scratch, "tmp"),
                "TRITON_CACHE_DIR": os.path.join(scratch, "triton"),
                "CUTE_DSL_CACHE_DIR": os.path.join(scratch, "cute"), "PYTHONDONTWRITEBYTECODE": "1",
                "PYTHONUNBUFFERED": "1",
                "PYTHONPATH": os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))})
    if backend == "interpret":
        env["TRITON_INTERPRET"] = "1"
    return env


def _needed_paths() -> list[str]:
    """Read-only paths the producer needs that a masked directory would hide (a checkout or a virtual environment
    under /tmp, as a CI clone may be): the interpreter, its prefixes, sys.path and the rsi package's folder."""
    import rsi

    paths = {sys.executable, sys.prefix, sys.base_prefix, os.path.dirname(os.path.dirname(rsi.__file__)),
             *[p for p in sys.path if p]}
    out = []
    for p in sorted(paths):
        real = os.path.realpath(p)
        for cand in {p, real}:
            if os.path.exists(cand) and any(cand == m or cand.startswith(m + "/") for m in MASKED):
                out.append(cand)
    # a parent bound after its child would hide the child: bind parents first, skip paths already inside one
    keep: list[str] = []
    for p in sorted(set(out), key=len):
        if not any(p == k or p.startswith(k + "/") for k in keep):
            keep.append(p)
    return keep


def command(backend: str, scratch: str, cpu_s: int, sandbox: bool) -> tuple[list[str], dict[str, str]]:
    """argv and environment of one producer process."""
    os.makedirs(os.path.join(scratch, "tmp"), exist_ok=True)
    env = environment(backend, scratch)
    inner = [sys.executable, "-m", "rsi.harness.producer", scratch, str(cpu_s)]
    if not sandbox:
        return inner, env
    argv = [bwrap_binary(), *_flags(backend)]
    for p in _needed_paths():
        argv += ["--ro-bind", p, p]
    argv += ["--bind", scratch, scratch, "--clearenv", "--chdir", scratch]
    for k, v in env.items():
        argv += ["--setenv", k, v]
    return argv + ["--"] + inner, env
