"""The environment a measurement was taken in (recorded in every record.json and run)."""

from __future__ import annotations

import functools
import os
import platform
import subprocess
from pathlib import Path
from typing import Any


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], capture_output=True, text=True, timeout=10, check=False,
                              cwd=Path(__file__).resolve().parent).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


@functools.cache
def rsi_commit() -> tuple[str, bool]:
    """(commit, dirty). RSI_COMMIT / RSI_DIRTY override for checkouts without .git (e.g. a copied tree)."""
    if os.environ.get("RSI_COMMIT"):
        return os.environ["RSI_COMMIT"], os.environ.get("RSI_DIRTY", "0") == "1"
    head = _git("rev-parse", "HEAD")
    if not head:
        return "unknown", True
    return head, bool(_git("status", "--porcelain", "--untracked-files=no"))


def _driver() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=False).stdout.strip()
        return out.splitlines()[0] if out else ""
    except (OSError, subprocess.TimeoutExpired):
        return ""


def capture() -> dict[str, Any]:
    import torch
    import triton

    commit, dirty = rsi_commit()
    env: dict[str, Any] = {"torch": torch.__version__, "triton": triton.__version__, "python": platform.python_version(),
                           "rsi_commit": commit, "rsi_dirty": dirty, "host": platform.node()}
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        env.update(gpu_name=p.name, compute_capability=f"{p.major}.{p.minor}", sm_count=p.multi_processor_count,
                   memory_gib=round(p.total_memory / 2**30, 1), cuda=torch.version.cuda, driver=_driver())
    else:
        env.update(gpu_name=None, compute_capability=None, cuda=torch.version.cuda, driver="")
    return env
