"""H200 run 40 (ninth session): where cuDNN's FP8 attention path turns the attention_fp8 op group's subnormal case
(q, k x 1e-39, v x 2^-120) into NaN (runs 38 and 39), printing each stage's NaN count and range on the three_docs
shape: the amaxes, the scales, the e4m3 q, k, v, cuDNN's e4m3 output, the dequantised output; then the same with the
GPU's q, k replaced by the CPU's quantised values, to separate the Triton kernels from cuDNN."""

import torch

from rsi.refs import get_op_group
from runtime import attention_fp8_cudnn as C


def stat(name, t):
    f = t.float()
    fin = f[torch.isfinite(f)]
    print(f"{name}: nan {int(f.isnan().sum())} inf {int(f.isinf().sum())} of {f.numel()}, "
          f"|max| {float(fin.abs().max()) if fin.numel() else float('nan'):.4g} "
          f"|min>0| {float(fin.abs()[fin != 0].min()) if (fin != 0).any() else 0:.4g}", flush=True)


g = get_op_group("attention_fp8")
shape = next(s for s in g.odd_shapes if s.name == "three_docs")
plain = g.make_inputs(shape, 1, "cuda", layout=0)
sc = next(s for s in g.special_cases if s.name == "subnormal")
q, k, v, cu = sc.apply(plain, ())
print("cu", cu.tolist())
aq, ak, av = C.head_amax(q), C.head_amax(k), C.head_amax(v)
for n, t in (("aq", aq), ("ak", ak), ("av", av)):
    stat(n, t)
sq, sk, sv, c, bad = C.scales(aq, ak, av)
for n, t in (("sq", sq), ("sk", sk), ("sv", sv), ("c", c)):
    stat(n, t)
print("c", c.tolist(), "bad", int(bad.sum()))
q8, k8, v8 = C.quantise(q, sq), C.quantise(k, sk), C.quantise(v, sv)
for n, t in (("q8", q8), ("k8", k8), ("v8", v8)):
    stat(n, t)
cq8 = C.quantise(q.cpu(), sq.cpu()) if False else None
out = C.attention_fp8(q, k, v, cu)
stat("out", out)
print("plans", C.plans())
# the same path with c = 1 (no tiny descale): is the NaN from cuDNN's descale?
real = C.scales
C.scales = lambda *a: (*real(*a)[:3], torch.ones(1, device="cuda"), real(*a)[4])
stat("out with c = 1", C.attention_fp8(q, k, v, cu))
C.scales = real
# per stage on a normal input for comparison
stat("out plain", C.attention_fp8(*plain))
