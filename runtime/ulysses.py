"""Ulysses sequence parallelism over ``torch.distributed`` (NCCL on GPUs, gloo on the CPU).

The packed sequence is split by rows: rank r holds rows ``[r S/W, (r+1) S/W)`` (S is a multiple of 64, so any W
dividing 64 splits it evenly) and runs every row-wise op (modulate, the linears, qk_norm_rope, SwiGLU, the fused
residual) on its rows only, with the weights replicated. Self-attention needs every row, so around it:

1. ``qkv_pack`` (the op group) lays q, k, v of the local rows out destination-major: ``[W, S/W, NH/W, 3*128]``;
2. one ``all_to_all_single`` sends block w to rank w: each rank now holds all S rows of its NH/W heads, in global
   row order (rank-major = row-major, since the rows were split in order);
3. attention runs over the full sequence with the global documents (``cu_seqlens``: text, video, audio and the
   pad document exactly as on one GPU) for those heads, through the run's attention class (runtime/attention.py);
4. a second ``all_to_all_single`` returns every rank's rows, ``[W, S/W, NH/W, 128]`` (source-rank major), and
   ``head_merge`` (the op group) makes ``[S/W, NH*128]`` for ``out_proj``.

The final layer's input is gathered (``all_gather_into_tensor``) so that every rank returns the full velocities.
Heads must divide by W (H3: 56 heads -> W in 1, 2, 4, 7, 8). Every op is per row (or per head, for attention), so
the output equals the one-process run up to the row-count dependence of the GEMMs: a linear over S/W rows need not
accumulate in the order it does over S rows (the BLAS blocks M differently), which moves an occasional bf16
rounding by one ulp. On the CPU (tests/unit/test_ulysses.py, two gloo processes, tiny model): one row of 64 in one
of 8 block calls of a 4-step request; the final latents 0.7% apart at most (max-abs 7e-3). The exchange itself is
bitwise.

The wire (``--wire``) is bf16 by default: the all-to-all moves the packed tensors as they are. ``int8`` sends
UE5M3 block-int8 records both ways (400 B QKV, 144 B output per token and head) and ``fp8`` the output as 128 B of
e4m3 (runtime/wire.py, H3_SPEC.md section 5): lossy, labelled so in the run's notes.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import torch
import torch.distributed as dist

from runtime.attention import merge_rows


class Ulysses:
    """The sequence-parallel group of one run: its world size and rank, and the two exchanges."""

    def __init__(self, group: Any = None, wire: str = "bf16"):
        from runtime.wire import WIRES

        if wire not in WIRES:
            raise ValueError(f"--wire {wire!r}: use one of {', '.join(WIRES)}")
        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError("Ulysses needs an initialised torch.distributed process group (torchrun, or "
                               "runtime.ulysses.init_from_env())")
        self.group, self.wire = group, wire
        self.world = dist.get_world_size(group)
        self.rank = dist.get_rank(group)
        self.bytes_sent = 0            # all-to-all payload this rank sent (both directions), for reports

    def rows(self, total: int) -> slice:
        if total % self.world:
            raise ValueError(f"{total} packed rows do not split over {self.world} ranks (pad to a multiple of 64)")
        n = total // self.world
        return slice(self.rank * n, (self.rank + 1) * n)

    def check_heads(self, heads: int) -> None:
        if heads % self.world:
            raise ValueError(f"Ulysses needs the head count ({heads}) to divide by the world size ({self.world})")

    def local_step(self, step, total: int):
        """The step's modulation with its per-row indices cut to this rank's rows (tables shared)."""
        r = self.rows(total)
        return dataclasses.replace(step, mod_idx=step.mod_idx[r], t_idx=step.t_idx[r])

    def _exchange(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        dist.all_to_all_single(out, x.contiguous(), group=self.group)
        self.bytes_sent += x.numel() * x.element_size() * (self.world - 1) // self.world
        return out

    def attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attend, kernels,
                  quantize: bool = False) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """q, k, v: [S/W, NH, D] of the local rows (any strides) -> [S/W, NH * D]. ``attend(q, k, v)`` runs over
        the full sequence: [S, NH/W, D] each -> [S, NH/W, D] (or [S, NH/W * D]). ``quantize``: the merge may
        write out_proj's e4m3 rows and scales instead (runtime.attention.merge_rows)."""
        s, nh, d = q.shape
        self.check_heads(nh)
        h = nh // self.world
        from runtime import wire as WF

        packed = kernels.call("qkv_pack", q, k, v, self.world)                   # [W, s, h, 3D]
        if self.wire == "int8":                                                   # 400 B records (lossy)
            rec = WF.encode_qkv(packed[..., :d], packed[..., d:2 * d], packed[..., 2 * d:])
            full = WF.decode_qkv(self._exchange(rec), q.dtype).view(self.world * s, h, 3 * d)
        else:
            full = self._exchange(packed).view(self.world * s, h, 3 * d)         # [S, h, 3D], rows in order
        o = attend(full[..., :d], full[..., d:2 * d], full[..., 2 * d:])
        o = o.reshape(self.world, s, h, d)                                        # row chunk w -> rank w
        if self.wire == "int8":
            back = WF.decode_out(self._exchange(WF.encode_out(o)), q.dtype)      # 144 B records (lossy)
        elif self.wire == "fp8":
            back = WF.decode_fp8_out(self._exchange(WF.encode_fp8_out(o)), q.dtype)   # 128 B e4m3 (lossy)
        else:
            back = self._exchange(o)                                              # [W, s, h, D], source-major
        return merge_rows(back, kernels, quantize)                                # [s, NH * D] (or e4m3, scales)

    def gather_rows(self, x: torch.Tensor) -> torch.Tensor:
        """[S/W, ...] of every rank -> [S, ...] in rank (= row) order, on every rank."""
        out = x.new_empty((x.shape[0] * self.world, *x.shape[1:]))
        dist.all_gather_into_tensor(out, x.contiguous(), group=self.group)
        return out


def init_from_env(device: str | None = None, wire: str = "bf16") -> Ulysses | None:
    """Inside ``torchrun`` (WORLD_SIZE > 1): initialise the process group (NCCL on CUDA, gloo otherwise), pick this
    rank's GPU and return the group's :class:`Ulysses`; None for a single process."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return None
    use_cuda = (device or ("cuda" if torch.cuda.is_available() else "cpu")).startswith("cuda")
    if use_cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    if not dist.is_initialized():
        dist.init_process_group("nccl" if use_cuda else "gloo")
    return Ulysses(wire=wire)


def torchrun_argv(n: int, module_argv: list[str]) -> list[str]:
    """The command ``rsi run-pipeline --gpus N`` re-executes itself with: torchrun on this machine, N processes."""
    import sys

    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={n}", "-m", "rsi",
            *module_argv]
