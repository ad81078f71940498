"""Nsight Compute target of run 84 (twenty-ninth session): one launch each of modulate_fp8_warp's row loop at stage1
(one warp, 1,056 programs, RELOAD 0, TAIL 1) without and with PREFETCH, then the h200 lock's bf16 modulate kernel
(the op it replaces, as the probes time it; modulate_fp8 takes modulate's inputs). Run under ncu (reports/h200/run84/README.md has the command)."""
import torch

from rsi.refs import get_op_group
from rsi.templates import modulate_fp8_warp as M
from rsi.verified import locked_kernel

g = get_op_group("modulate_fp8")
sh = [s for s in g.shapes if s.name == "stage1"][0]
a = g.make_inputs(sh, 100, "cuda")
base = {"num_warps": 1, "STREAM": 1, "QUOT": 1, "RELOAD": 0, "PERSIST": 1056, "STAGES": 1, "TAIL": 1, "UNPACK": 0}
for pf in (0, 1):
    M.launch(*a, **base, PREFETCH=pf)
locked_kernel(".", "h200", "modulate").load()(*a)
torch.cuda.synchronize()
