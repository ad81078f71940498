"""AdaLN modulation tables, precomputed for every (block, step) before the loop (H3_SPEC.md section 1).

The schedule is fixed, so the ``[3M, 6H]`` table of every block at every step is known before sampling. It is
computed once, per step, with exactly the code that per-step recomputation would run (same shapes, same ops), so
it is bitwise equal to it; afterwards the ``adaln_proj`` weights (about 13B parameters, 26 GB bf16 in the full
model) can be released.

Table layout: ``adaln_proj.linear(bf16(silu(t_emb)))`` is [M, 18H] with modality-outer order (video, text, audio;
6 x H each), viewed as [M * 3, 6H]: row ``m * 3 + tag``; its 6 chunks are shift_msa, scale_msa, gate_msa,
shift_mlp, scale_mlp, gate_mlp (strided [3M, H] views). The final layer's [M, 2H] is (shift, scale).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from runtime.layers import BF16
from runtime.packing import PackedSequence, modulation_index


@dataclass
class StepModulation:
    unique_t: torch.Tensor       # [M] fp32 ascending
    blocks: torch.Tensor         # [B, 3M, 6H] bf16
    final: torch.Tensor          # [M, 2H] bf16
    mod_idx: torch.Tensor        # [S] int64 = inverse * 3 + clamp(tag, 0)
    t_idx: torch.Tensor          # [S] int64 = inverse (final layer)

    def block_chunks(self, b: int) -> tuple[torch.Tensor, ...]:
        T, W = self.blocks.shape[1:]
        return self.blocks[b].view(T, 6, W // 6).unbind(1)

    def final_chunks(self) -> tuple[torch.Tensor, torch.Tensor]:
        M, W = self.final.shape
        return self.final.view(M, 2, W // 2).unbind(1)

    def nbytes(self) -> int:
        return self.blocks.numel() * self.blocks.element_size() + self.final.numel() * self.final.element_size()


def time_condition(model, unique_t: torch.Tensor) -> torch.Tensor:
    """[M] fp32 -> [M, 2688] bf16 = bf16(silu(t_emb)) (SiLU in fp32)."""
    return F.silu(model.time_embedder(unique_t.float())).to(BF16)


def block_table(model, b: int, cond: torch.Tensor) -> torch.Tensor:
    """One block's table [3M, 6H] bf16 from c = time_condition(...)."""
    out = model.blocks[b].adaln_proj.linear(cond)                                     # [M, 18H]
    return out.view(cond.shape[0] * 3, out.shape[1] // 3)


def step_modulation(model, seq: PackedSequence, t_v: torch.Tensor, t_a: torch.Tensor) -> StepModulation:
    """Per-step computation of every block's table (the definition the precompute must match bit for bit)."""
    if getattr(model, "adaln_released", False):
        raise RuntimeError("adaln_proj weights were released after the precompute; this schedule's tables must "
                           "come from the AdaLNCache")
    unique, inverse, mod_idx = modulation_index(seq, t_v, t_a)
    device = model.time_embedder.proj_in.weight.device
    unique = unique.to(device)
    c = time_condition(model, unique)
    blocks = torch.stack([block_table(model, b, c) for b in range(len(model.blocks))])   # [B, 3M, 6H]
    final = model.final_layer.adaln_proj.linear(c)                                        # [M, 2H]
    return StepModulation(unique, blocks, final, mod_idx.to(device), inverse.to(device))


class AdaLNCache:
    """Tables of every step of a schedule, computed before the loop; ``release(model)`` frees adaln_proj."""

    def __init__(self, model, seq: PackedSequence, schedule):
        self.steps = [step_modulation(model, seq, *schedule.timesteps(k)) for k in range(schedule.steps)]

    def __getitem__(self, k: int) -> StepModulation:
        return self.steps[k]

    def nbytes(self) -> int:
        return sum(s.nbytes() for s in self.steps)

    @staticmethod
    def release(model) -> dict[str, int]:
        """Drop every adaln_proj (blocks and final layer). Returns the parameters and bytes released."""
        mods = [blk for blk in model.blocks] + [model.final_layer]
        params = sum(p.numel() for m in mods if m.adaln_proj is not None for p in m.adaln_proj.parameters())
        nbytes = sum(p.numel() * p.element_size() for m in mods if m.adaln_proj is not None
                     for p in m.adaln_proj.parameters())
        for m in mods:
            m.adaln_proj = None
        model.adaln_released = True
        return {"params": params, "bytes": nbytes}
