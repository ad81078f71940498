import torch
from rsi.refs import get_op_group
from rsi.templates import modulate_fp8_warp as M
g = get_op_group("modulate_fp8"); sh = [s for s in g.shapes if s.name == "stage1"][0]
a = g.make_inputs(sh, 100, "cuda")
for rl in (1, 2):
    M.launch(*a, num_warps=1, STREAM=1, QUOT=1, RELOAD=rl)
torch.cuda.synchronize()
