import torch
from rsi.refs import get_op_group
from rsi.templates import modulate_fp8_warp as M
g = get_op_group("modulate_fp8")
sh = [s for s in g.shapes if s.name == "stage1"][0]
a = g.make_inputs(sh, 100, "cuda")
base = {"num_warps": 1, "STREAM": 1, "QUOT": 1, "STAGES": 1, "TAIL": 1, "UNPACK": 0}
M.launch(*a, **base, RELOAD=0, PERSIST=1056, PREFETCH=1)
M.launch(*a, **base, RELOAD=4, PERSIST=2112, PREFETCH=0)
torch.cuda.synchronize()
