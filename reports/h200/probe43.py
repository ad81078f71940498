"""H200 run 43 (ninth session): where the time of cuDNN's FP8 attention path goes at h3_full (38,272 rows, 56 heads,
attention_fp8's inputs): torch.profiler's CUDA kernel times over 5 calls after 2 warm-ups (no L2 flush between calls),
by kernel, and the host-side gaps."""

import torch
from torch.profiler import ProfilerActivity, profile

from rsi.refs import get_op_group
from runtime import attention_fp8_cudnn as C

g = get_op_group("attention_fp8")
shape = next(s for s in g.shapes if s.name == "h3_full")
q, k, v, cu = g.make_inputs(shape, 1000, "cuda")
bounds = [int(x) for x in cu.tolist()]
for _ in range(2):
    C.attention_fp8(q, k, v, bounds)
torch.cuda.synchronize()
ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
ev[0].record()
for _ in range(5):
    C.attention_fp8(q, k, v, bounds)
ev[1].record()
torch.cuda.synchronize()
print(f"5 calls back to back: {ev[0].elapsed_time(ev[1]) / 5:.2f} ms per call", flush=True)
with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
    for _ in range(5):
        C.attention_fp8(q, k, v, bounds)
    torch.cuda.synchronize()
print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=25, max_name_column_width=70))
print("plans", C.plans())
