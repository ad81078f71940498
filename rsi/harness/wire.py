"""Memory the judge shares with a producer: input storages and output arenas, never anything else.

The judge owns every byte a candidate touches. On the CPU (Triton interpreter) a shared storage is a file in the
job's scratch directory mapped ``MAP_SHARED`` by both processes (``torch.from_file``); on CUDA it is a device
allocation exported with CUDA IPC (``UntypedStorage._share_cuda_``) from a dedicated memory pool, so the
producer's mapping of an allocator segment can never contain the judge's references or expected outputs.
Descriptors are plain JSON; a tensor is (storage id, dtype, shape, stride, element offset).
"""

from __future__ import annotations

import base64
import contextlib
import os
import secrets
from typing import Any

import torch

from rsi.harness.protocol import DTYPES

DTYPE_NAMES = {getattr(torch, n): n for n in DTYPES}  # the protocol's dtype list, one place


def dtype_of(name: str) -> torch.dtype:
    if name not in DTYPE_NAMES.values():
        raise ValueError(f"dtype {name!r} is not allowed")
    return getattr(torch, name)


def make_view(storage: torch.UntypedStorage, dtype: torch.dtype, shape, stride, offset: int) -> torch.Tensor:
    """A tensor of ``dtype`` over ``storage`` (offset in elements), bounds-checked against the storage."""
    t = torch.empty(0, dtype=dtype, device=storage.device)
    esize = t.element_size()
    span = 0 if 0 in shape else sum((n - 1) * abs(s) for n, s in zip(shape, stride)) + 1
    if offset < 0 or any(s < 0 for s in stride) or (offset + span) * esize > storage.nbytes():
        raise ValueError("view outside its storage")
    return t.set_(storage, offset, tuple(shape), tuple(stride))


def _b64(b: bytes | None) -> str | None:
    return None if b is None else base64.b64encode(b).decode()


def _unb64(s: str | None) -> bytes | None:
    return None if s is None else base64.b64decode(s)


class SharedMemory:
    """Judge side: allocates shareable storages and describes them for a producer."""

    def __init__(self, device: torch.device):
        self.device = device
        self.pool = torch.cuda.MemPool() if device.type == "cuda" else None
        self._n = 0

    def _pool(self):
        return torch.cuda.use_mem_pool(self.pool) if self.pool is not None else contextlib.nullcontext()

    def alloc(self, nbytes: int, where: str) -> tuple[torch.Tensor, dict[str, Any]]:
        """A shareable uint8 buffer of ``nbytes`` and its descriptor; on the CPU its file is in ``where`` (the
        producer's scratch directory, the only place its sandbox can map read-write)."""
        nbytes = max(int(nbytes), 1)
        self._n += 1
        if self.device.type == "cuda":
            with self._pool():
                buf = torch.empty(nbytes, dtype=torch.uint8, device=self.device)
            return buf, self.describe(buf.untyped_storage())
        name = f"s{self._n}-{secrets.token_hex(8)}.bin"
        # the scratch directory is the producer's: create the file exclusively and never through a link it planted,
        # then map it through the descriptor the judge opened
        fd = os.open(os.path.join(where, name), os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.ftruncate(fd, nbytes)
            buf = torch.from_file(f"/proc/self/fd/{fd}", shared=True, size=nbytes, dtype=torch.uint8)
        finally:
            os.close(fd)
        return buf, {"kind": "file", "name": name, "nbytes": nbytes}

    def describe(self, storage: torch.UntypedStorage) -> dict[str, Any]:
        dev, handle, size, off, rc, rc_off, ev, ev_sync = storage._share_cuda_()
        return {"kind": "cuda", "device": int(dev), "handle": _b64(handle), "nbytes": int(size), "offset": int(off),
                "rc": _b64(rc), "rc_offset": int(rc_off), "event": _b64(ev), "event_sync": bool(ev_sync)}

    def share_inputs(self, inputs: tuple, where: str) -> tuple[tuple, list[dict[str, Any]], list[dict[str, Any]]]:
        """Copy each distinct storage of ``inputs`` into shared memory and rebuild the same views over it.

        Returns (the shared inputs, storage descriptors, per-input descriptors). Views of one storage stay views
        of one shared storage (e.g. the AdaLN table's gate/shift/scale), with their offsets and strides."""
        storages: dict[int, tuple[int, torch.UntypedStorage]] = {}
        sdescs: list[dict[str, Any]] = []
        shared, idescs = [], []
        for x in inputs:
            if not torch.is_tensor(x):
                if type(x) not in (int, float, bool):
                    raise TypeError(f"input of type {type(x).__name__} cannot be shared")
                shared.append(x)
                idescs.append({"scalar": x})
                continue
            src = x.untyped_storage()
            key = src.data_ptr()
            if key not in storages:
                buf, desc = self.alloc(src.nbytes(), where)
                buf.copy_(torch.empty(0, dtype=torch.uint8, device=x.device).set_(src, 0, (src.nbytes(),), (1,)))
                storages[key] = (len(sdescs), buf.untyped_storage())
                sdescs.append(desc)
            sid, st = storages[key]
            shared.append(make_view(st, x.dtype, tuple(x.shape), tuple(x.stride()), x.storage_offset()))
            idescs.append({"storage": sid, "dtype": DTYPE_NAMES[x.dtype], "shape": list(x.shape),
                           "stride": list(x.stride()), "offset": x.storage_offset()})
        return tuple(shared), sdescs, idescs


def open_storage(desc: dict[str, Any], scratch: str) -> torch.UntypedStorage:
    """Producer side: map a storage the judge shared."""
    if desc["kind"] == "file":
        name = os.path.basename(desc["name"])
        t = torch.from_file(os.path.join(scratch, name), shared=True, size=int(desc["nbytes"]), dtype=torch.uint8)
        return t.untyped_storage()
    if desc["kind"] == "cuda":
        torch.cuda._lazy_init()
        return torch.UntypedStorage._new_shared_cuda(
            desc["device"], _unb64(desc["handle"]), desc["nbytes"], desc["offset"], _unb64(desc["rc"]),
            desc["rc_offset"], _unb64(desc["event"]), desc["event_sync"])
    raise ValueError(f"unknown storage kind {desc['kind']!r}")


def open_inputs(sdescs: list[dict[str, Any]], idescs: list[dict[str, Any]], scratch: str) -> tuple:
    storages = [open_storage(d, scratch) for d in sdescs]
    out = []
    for d in idescs:
        if "scalar" in d:
            out.append(d["scalar"])
        else:
            out.append(make_view(storages[d["storage"]], dtype_of(d["dtype"]), d["shape"], d["stride"],
                                 d["offset"]))
    return tuple(out)
