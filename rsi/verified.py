"""Verified kernels: ``verified_kernels/<op>/<name>-<h[:12]>/{kernel.py, record.json}`` and ``LOCK.json``.

Write side (promotion, used by the search loop) and read side (resolution, used by the runtime and
``rsi verify``). The lock pins op -> kernel per GPU target; proxy records are written but never locked.
On load, a *hard* mismatch between a record's environment and this machine (compute capability, Triton major
version, kernel source hash) refuses the kernel; a *soft* one (driver, torch patch) is reported and allowed.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rsi.contract import Candidate, sha256_text

LOCK_NAME = "LOCK.json"
SCHEMA = 1


def kernels_root(root: str | os.PathLike = ".") -> Path:
    return Path(root) / "verified_kernels"


def installed_root() -> Path:
    """The folder holding the installed package's ``verified_kernels/`` (the repo, for an editable install)."""
    return Path(__file__).resolve().parent.parent


def find_root(explicit: str | os.PathLike | None = None) -> tuple[Path, str]:
    """Where the lock is read from, and why: ``--root`` when given, else ``$RSI_ROOT``, else the current
    directory when it holds ``verified_kernels/LOCK.json``, else the installed package's kernels."""
    if explicit is not None:
        return Path(explicit), "--root"
    env = os.environ.get("RSI_ROOT")
    if env:
        return Path(env), "$RSI_ROOT"
    if (kernels_root(".") / LOCK_NAME).exists():
        return Path("."), "the current directory"
    return installed_root(), "the installed rsi package"


def read_lock(root: str | os.PathLike = ".") -> dict[str, Any]:
    path = kernels_root(root) / LOCK_NAME
    if not path.exists():
        return {"schema": SCHEMA, "targets": {}}
    return json.loads(path.read_text())


def _write_json_atomic(path: Path, obj: Any) -> None:
    tmp = path.with_suffix(path.suffix + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def kernel_dir_name(cand: Candidate, template: str) -> str:
    return f"{template}-{cand.hash[:12]}"


def write_record(root: str | os.PathLike, cand: Candidate, template: str, record: dict[str, Any],
                 target: str | None = None) -> Path:
    """Write cand's kernel.py and record.json into its directory and return it. A record the lock pins for another
    target is never overwritten (run 73 did, before this rule: modulate_fp8_warp promoted for h200 after h100 broke
    the h100 entry): the same candidate verified for a second target gets ``<template>-<hash>-<target>``. A proxy
    record (never locked) takes no pinned directory, its own target's included: ``-<target>``, else
    ``-<target>-proxy``."""
    d = kernels_root(root) / cand.op / kernel_dir_name(cand, template)
    if target is not None:
        proxy = bool(record.get("proxy"))
        if _pinned(root, cand.op, d, None if proxy else target):
            d = d.with_name(f"{d.name}-{target}")
        if proxy and _pinned(root, cand.op, d, None):
            d = d.with_name(f"{d.name}-proxy")
    d.mkdir(parents=True, exist_ok=True)
    (d / "kernel.py").write_text(cand.source)
    _write_json_atomic(d / "record.json", record)
    return d


def _pinned(root: str | os.PathLike, op: str, d: Path, but: str | None) -> bool:
    """Whether a lock entry of a target other than ``but`` (None: any target) pins op to directory d."""
    rel = d.relative_to(kernels_root(root)).as_posix()
    return any(t != but and ops.get(op, {}).get("kernel") == rel
               for t, ops in read_lock(root).get("targets", {}).items())


def lock_kernel(root: str | os.PathLike, target: str, op: str, kernel_dir: Path) -> None:
    lock = read_lock(root)
    rec_text = (kernel_dir / "record.json").read_text()
    rel = kernel_dir.relative_to(kernels_root(root)).as_posix()
    lock.setdefault("targets", {}).setdefault(target, {})[op] = {
        "kernel": rel, "record_sha256": hashlib.sha256(rec_text.encode()).hexdigest()}
    lock["schema"] = SCHEMA
    _write_json_atomic(kernels_root(root) / LOCK_NAME, lock)


@dataclass(frozen=True)
class VerifiedKernel:
    op: str
    path: Path
    record: dict[str, Any]
    source: str

    @property
    def candidate(self) -> Candidate:
        return Candidate(op=self.op, source=self.source, config=self.record["config"],
                         parent=self.record["search"].get("parent"), origin="verified")

    def buckets(self) -> list[dict[str, Any]]:
        return self.record["shapes"]

    def load(self) -> Callable[..., Any]:
        """Import kernel.py under the module name the judge's producer uses (``rsi.kernel.module_name``), so a
        kernel cannot tell the runtime from its trials by its name, and bind the recorded config."""
        from rsi.kernel import module_name

        name = module_name(self.op)
        mod = sys.modules.get(name)
        if mod is None or getattr(mod, "__file__", None) != str(self.path / "kernel.py"):
            spec = importlib.util.spec_from_file_location(name, self.path / "kernel.py")
            mod = importlib.util.module_from_spec(spec)
            sys.modules[name] = mod
            spec.loader.exec_module(mod)
        launch = sys.modules[name].launch
        config = dict(self.record["config"])
        return lambda *inputs: launch(*inputs, **config)


def locked_kernel(root: str | os.PathLike, target: str, op: str) -> VerifiedKernel | None:
    entry = read_lock(root).get("targets", {}).get(target, {}).get(op)
    if not entry:
        return None
    d = kernels_root(root) / entry["kernel"]
    rec_path = d / "record.json"
    if not rec_path.exists():
        raise FileNotFoundError(f"LOCK.json pins {op} -> {entry['kernel']} for {target}, but {rec_path} is missing")
    rec_text = rec_path.read_text()
    if hashlib.sha256(rec_text.encode()).hexdigest() != entry["record_sha256"]:
        raise ValueError(f"{rec_path} does not match the hash pinned in LOCK.json (edited after promotion?)")
    return VerifiedKernel(op=op, path=d, record=json.loads(rec_text), source=(d / "kernel.py").read_text())


def env_mismatch(record: dict[str, Any], env: dict[str, Any], source: str) -> tuple[list[str], list[str]]:
    """(hard, soft) differences between the record's environment and this machine."""
    hard, soft = [], []
    r = record.get("env", {})
    if r.get("compute_capability") != env.get("compute_capability"):
        hard.append(f"compute capability {r.get('compute_capability')} != {env.get('compute_capability')}")
    if str(r.get("triton", "")).split(".")[0] != str(env.get("triton", "")).split(".")[0]:
        hard.append(f"Triton major {r.get('triton')} != {env.get('triton')}")
    if sha256_text(source) != record.get("source_sha256"):
        hard.append("kernel.py does not match the record's source_sha256")
    for key in ("driver", "torch", "cuda"):
        if r.get(key) != env.get(key):
            soft.append(f"{key} {r.get(key)} != {env.get(key)}")
    if record.get("kernel_language") == "cute":   # a CuTe DSL kernel needs the [cute] extra where it runs
        from rsi.kernel import cute_unavailable, cutlass_dsl_version

        why = cute_unavailable("cuda")
        if why:
            hard.append(f"a CuTe DSL kernel: {why}")
        elif record.get("cutlass_dsl") and cutlass_dsl_version() != record["cutlass_dsl"]:
            soft.append(f"nvidia-cutlass-dsl {record['cutlass_dsl']} != {cutlass_dsl_version()}")
    return hard, soft


ROWS_SPAN = 2.0  # a bucket serves rows within [rows / 2, rows * 2] of the timed shape


def bucket_of(record: dict[str, Any], dims: dict[str, int]) -> str | None:
    """The recorded bucket that serves ``dims``: every non-row dim equal, rows within ROWS_SPAN of the timed rows
    (nearest in log space). Outside every bucket the runtime uses the reference: no timing evidence there."""
    import math

    best, best_d = None, math.inf
    for s in record["shapes"]:
        rd = s["shape"]["dims"]
        if {k: v for k, v in rd.items() if k != "rows"} != {k: v for k, v in dims.items() if k != "rows"}:
            continue
        r0, r = rd.get("rows", 1), dims.get("rows", 1)
        if r <= 0 or not (r0 / ROWS_SPAN <= r <= r0 * ROWS_SPAN):
            continue
        d = abs(math.log(r / r0))
        if d < best_d:
            best, best_d = s["bucket"], d
    return best


def resolve(root: str | os.PathLike, target: str | None, op: str, dims: dict[str, int],
            env: dict[str, Any]) -> tuple[VerifiedKernel | None, str]:
    """(kernel, why) for op at dims on this machine; kernel is None with the reason when the reference must run."""
    if target is None:
        return None, "no GPU target (CPU or unknown GPU)"
    try:
        vk = locked_kernel(root, target, op)
    except (FileNotFoundError, ValueError) as e:
        return None, f"lock entry unusable: {e}"
    if vk is None:
        return None, f"no verified kernel locked for {op} on {target}"
    hard, soft = env_mismatch(vk.record, env, vk.source)
    if hard:
        return None, "refused (hard environment mismatch: " + "; ".join(hard) + ")"
    bucket = bucket_of(vk.record, dims)
    if bucket is None:
        return None, f"shape {dims} outside the buckets {vk.path.name} was verified and timed on"
    return vk, f"{vk.path.name} bucket {bucket}" + (f" (soft mismatch: {'; '.join(soft)})" if soft else "")


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
