"""Verified kernels as torch custom ops, so the runtime and ``torch.compile(fullgraph=True)`` call them without
graph breaks.

Every kernel that ``verified_kernels/LOCK.json`` pins for a GPU target becomes ``torch.ops.rsi_<h12>.<op>``, where
``h12`` is the first 12 hex digits of the sha256 of its ``record.json`` (the hash LOCK.json pins): the namespace
names the exact record (kernel source, config, reference, environment), never a version (HF kernels' rule,
STYLE.md). The op's implementation is the kernel's ``launch`` bound to the recorded config; its fake (meta)
implementation allocates outputs of the reference's shapes and dtypes, so tracing never runs a kernel.
Registration is explicit (``register_verified``); nothing happens at import time.

Which op runs for a given shape (bucket, hard environment mismatch) stays the runtime's decision
(``rsi.verified.resolve``); these ops are what it calls once it has chosen.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from rsi import env as envmod
from rsi.verified import VerifiedKernel, env_mismatch, locked_kernel, read_lock


class _ByOpGroup(Mapping):
    """op -> one field of the op group (rsi/refs/<op>.py), read when asked: importing this module imports no
    reference module (lora_consumer's imports Triton)."""

    def __init__(self, field: str):
        self._field = field

    def __getitem__(self, op: str) -> Any:
        from rsi.refs import OP_MODULES, get_op_group

        if op not in OP_MODULES:
            raise KeyError(op)
        value = getattr(get_op_group(op), self._field)
        if not value:
            raise KeyError(f"op group {op!r} declares no {self._field}")
        return value

    def __iter__(self) -> Iterator[str]:
        from rsi.refs import OP_MODULES

        return iter(OP_MODULES)

    def __len__(self) -> int:
        from rsi.refs import OP_MODULES

        return len(OP_MODULES)


# op -> torch schema of (inputs) -> outputs; argument names are the op group's input_names (OpGroup.schema)
SCHEMAS: Mapping[str, str] = _ByOpGroup("schema")
# op -> fake implementation: contiguous outputs with the reference's shapes and dtypes (OpGroup.fake)
FAKES: Mapping[str, Callable[..., Any]] = _ByOpGroup("fake")


@dataclass(frozen=True)
class RegisteredOp:
    op: str
    namespace: str           # rsi_<first 12 hex of sha256(record.json)>
    kernel: str              # verified_kernels/<op>/<dir> name
    record_sha256: str

    @property
    def qualname(self) -> str:
        return f"{self.namespace}::{self.op}"

    @property
    def fn(self) -> Callable[..., Any]:
        """The registered op (``torch.ops.<namespace>.<op>``)."""
        return getattr(getattr(torch.ops, self.namespace), self.op)

    def to_json(self) -> dict[str, str]:
        return {"op": self.op, "qualname": self.qualname, "kernel": self.kernel, "record_sha256": self.record_sha256}


# torch.library registrations are process-global: remember them so registering the same record twice is a no-op
_REGISTERED: dict[str, RegisteredOp] = {}
_LIBS: dict[str, Any] = {}


def record_sha256(vk: VerifiedKernel) -> str:
    return hashlib.sha256((vk.path / "record.json").read_text().encode()).hexdigest()


def namespace_for(vk: VerifiedKernel) -> str:
    return f"rsi_{record_sha256(vk)[:12]}"


def register_kernel(vk: VerifiedKernel) -> RegisteredOp:
    """Register one verified kernel as ``torch.ops.rsi_<h12>.<op>`` (idempotent)."""
    if vk.op not in SCHEMAS:
        raise KeyError(f"no custom-op schema for op group {vk.op!r}; known: {', '.join(SCHEMAS)}")
    sha = record_sha256(vk)
    reg = RegisteredOp(op=vk.op, namespace=f"rsi_{sha[:12]}", kernel=vk.path.name, record_sha256=sha)
    if reg.qualname in _REGISTERED:
        return _REGISTERED[reg.qualname]
    launch = vk.load()

    def impl(*args):
        return launch(*args)

    op = torch.library.custom_op(reg.qualname, impl, mutates_args=(), schema=SCHEMAS[vk.op])
    op.register_fake(FAKES[vk.op])
    _LIBS[reg.qualname] = op
    _REGISTERED[reg.qualname] = reg
    return reg


def register_verified(root: str | os.PathLike, target: str, ops: list[str] | None = None,
                      env: dict[str, Any] | None = None) -> tuple[dict[str, RegisteredOp], dict[str, str]]:
    """Register every kernel LOCK.json pins for ``target`` (or the ``ops`` given).

    Returns (registered op -> RegisteredOp, refused op -> reason). A hard environment mismatch between a record and
    this machine (compute capability, Triton major, kernel source hash; ``rsi.verified.env_mismatch``) refuses the
    kernel, as the runtime would; pass ``env`` to compare against another environment than this machine's.
    """
    env = envmod.capture() if env is None else env
    pinned = read_lock(root).get("targets", {}).get(target, {})
    registered: dict[str, RegisteredOp] = {}
    refused: dict[str, str] = {}
    for op in (ops if ops is not None else sorted(pinned)):
        if op not in pinned:
            refused[op] = f"no kernel locked for {op} on {target}"
            continue
        try:
            vk = locked_kernel(root, target, op)
        except (FileNotFoundError, ValueError) as e:
            refused[op] = f"lock entry unusable: {e}"
            continue
        hard, _soft = env_mismatch(vk.record, env, vk.source)
        if hard:
            refused[op] = "hard environment mismatch: " + "; ".join(hard)
            continue
        registered[op] = register_kernel(vk)
    return registered, refused
