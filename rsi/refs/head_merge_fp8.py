"""``head_merge`` fused with the e4m3 quantisation of its output (bitwise class): the attention output that feeds
the fp8 out_proj GEMM (rsi/refs/fp8_linear.py), quantised where the Ulysses return path writes it.

``reference(x) -> (h8, h_scale)``: head_merge's input (rsi/refs/head_merge.py: x [W, S, h, 128] bf16 as received;
same layouts, shapes, special cases), outputs h8 float8_e4m3fn [S, W h 128] contiguous and h_scale fp32 [S]:
``quantize_rows`` (rsi/refs/fp8_common.py) of the merged rows ``x.permute(1, 0, 2, 3).reshape(S, W h 128)``.

Bitwise is exact here without any canonical form: the merge moves bf16 values unchanged, the row amax is exact,
and the quantiser's two IEEE divisions and the RNE saturating cast are the same in torch (CPU and CUDA) and in a
Triton kernel that uses ``tl.div_rn`` (fp8_common's docstring). Unlike head_merge, the W = 1 bucket is real work
(the quantisation), so it is claimed too.

Incumbent ``merge_then_quantize``: the path without the fusion, the merge (a copy for W > 1, a view at W = 1) then the
compiled quantiser (``quantize_rows_compiled``). On the CPU its bytes are the reference's; on CUDA Inductor's division
is not the IEEE quotient and H200 run 33 found 53,625 of 274M bytes one e4m3 step off at w1, so under the bitwise
class it was never timed and blocked every promotion. It is vetted in ``UNFUSED_CLASS`` (fp8_common), timed, and
binding: a kernel is promoted only if it beats it too.

Bytes: read 2 S W h 128, write S W h 128 + 4 S. FLOPs: a comparison and a division per element (2 S W h 128).
"""

from __future__ import annotations

import torch

from rsi.contract import Baseline, Bitwise, OpGroup
from rsi.refs import head_merge as HM
from rsi.refs.fp8_common import E4M3, UNFUSED_CLASS, quantize_rows, quantize_rows_compiled

OP = "head_merge_fp8"
SCHEMA = "(Tensor x) -> (Tensor, Tensor)"


def reference(x):
    """x: [W, S, h, 128] bf16 -> (h8 float8_e4m3fn [S, W h 128], h_scale fp32 [S])."""
    return quantize_rows(HM.reference(x))


def merge_then_quantize(x):
    """The unfused path (module docstring): head_merge's reference, then the compiled quantiser."""
    return quantize_rows_compiled()(HM.reference(x))


BASELINES = (Baseline("merge_then_quantize", merge_then_quantize, tolerance=UNFUSED_CLASS),)


def fake(x):
    W, S, h, D = x.shape
    return x.new_empty((S, W * h * D), dtype=E4M3), x.new_empty((S,), dtype=torch.float32)


def bytes_moved(shape) -> int:
    n = shape.dims["rows"] * shape.dims["heads"] * HM.HEAD_DIM
    return 3 * n + 4 * shape.dims["rows"]


def flops(shape) -> int:
    return 2 * shape.dims["rows"] * shape.dims["heads"] * HM.HEAD_DIM


_B = HM.OP_GROUP
OP_GROUP = OpGroup(
    name=OP,
    reference=reference,
    oracle=reference,
    make_inputs=_B.make_inputs,
    tolerance=Bitwise(),
    baselines=BASELINES,
    shapes=_B.shapes,
    odd_shapes=_B.odd_shapes,
    interp_shapes=_B.interp_shapes,
    special_cases=_B.special_cases,
    bytes_moved=bytes_moved,
    flops=flops,
    noncontiguous_inputs=(),
    special_inputs=(),
    input_names=_B.input_names,
    template="head_merge_fp8",
    notes="Ulysses head merge then the per-row e4m3 quantiser of fp8_common; bitwise on (h8, h_scale); head_merge's "
          "inputs, layouts and special cases; W = 1 is real work here",
    n_layouts=_B.n_layouts,
    sample_shapes=_B.sample_shapes,
    huge_shapes=(),
    dims_of=_B.dims_of,
    fake=fake,
    schema=SCHEMA,
)
