"""FP8 GEMM on quantised operands (approximate class): the GEMM after a fused FP8 producer.

``out = bf16(x_scale[r] * (w_scale[n] * sum_k x8[r, k] w8[n, k]))``: what an ``Fp8Linear`` runs on the e4m3 bytes
and row scales a fused producer (``swiglu_fp8``, ``head_merge_fp8``, ``modulate_fp8``,
``gate_residual_modulate_fp8``) wrote
(runtime/precision.py ``Fp8Linear.quantized``), and the second half of ``fp8_linear``, whose candidates must also
quantise the bf16 activation and may allocate nothing but their output. Splitting it out lets a GEMM kernel that
takes its operands through TMA (the CuTe DSL template ``rsi/templates/fp8_gemm_cute.py`` and the Triton one
``rsi/templates/fp8_gemm_tma.py``) be judged on its own.

Inputs: ``x8`` [R, K] float8_e4m3fn and ``x_scale`` [R] fp32 (``quantize_rows`` of fp8_linear's activation),
``w8`` [N, K] float8_e4m3fn and ``w_scale`` [N] fp32 (``quantize_weight`` of its weight), all contiguous (the
producers write them so; K and N multiples of 16, as ``torch._scaled_mm`` requires). Output [R, N] bf16.

Reference ``rsi.refs.fp8_linear.gemm``: the products of two e4m3 values are exact in fp32; accumulation in fp32
(TF32 off), then ``x_scale * (w_scale * acc)`` in fp32, rounded to bf16 once (PyTorch's row-wise kernel's epilogue
order). Oracle (the exact op on these operands): the fp64 product of the dequantised operands.

Class ``approximate``: the operands are already lossy and the same for every kernel, so what separates kernels is
the accumulation and the final rounding. Bounds: rel-L2 <= 1e-2, cosine >= 0.9999, max-abs <= 2e-2 max|oracle|,
and no lossier than 3x the reference's rel-L2 + 2e-3. The reference's own error is the bf16 rounding (rel-L2 about
1e-3); the factor and floor admit the tensor core's own fp8 accumulator over all of K (what cuBLAS calls fast
accumulation, ``use_fast_accum``; Triton's fp8_linear template's PREC 0), which H200 run 46b measured at rel-L2
2.6e-3 against the fp32 product at 38,248 x 5376 -> 21504. A kernel that drops a scale or accumulates in fp16 fails.

Incumbents: ``scaled_mm``, ``torch._scaled_mm`` with row-wise scales (cuBLASLt; what the runtime runs today), and
``scaled_mm_fast``, the same with cuBLASLt's fast accumulation (``use_fast_accum=True``): a candidate that accumulates
in the tensor core's fp8 accumulator (fp8_gemm_tma's PREC 0) must beat cuBLAS doing the same. H200 run 51 timed such
a candidate at 1.02-1.09x ``scaled_mm`` (0.997x at ltx_qkvo) before this incumbent existed; run 52 at 0.89-1.03x it.
Shapes, inputs and special cases are fp8_linear's (its large, subnormal and NaN-only nonfinite cases act on the
quantised operands here: the scales carry what x carried there); its odd shape has K = 1000, which TMA and
``_scaled_mm`` cannot take (rows of 16 bytes), so this op group's has K = 1008. Layouts: 0 contiguous; 1 x8 and w8
with padded row strides (K + 16, K + 32) at a 16-byte storage offset (a producer writing into a larger buffer),
the scales at odd offsets. TMA needs rows and bases on 16 bytes, which both keep.
Huge shape: fp8_linear's, 80,000 rows at fc1 (the output 2.29e9 elements > 2**31). FLOPs 2 R K N ("tensor_fp8"); bytes: x8, w8 and the scales read once, out written once.
"""

from __future__ import annotations

import random

import torch

from rsi.contract import Approximate, Baseline, OpGroup, Shape, SpecialCase
from rsi.refs import fp8_linear as L
from rsi.refs.common import (
    SPECIAL_ZERO_PREFIX,
    SPECIAL_ZEROS,
    _map_float,
    draw_rows,
    drawn,
    nonfinite_case,
    relayout,
)
from rsi.refs.fp8_common import E4M3, e4m3, quantize_rows

OP = "fp8_gemm"
SCHEMA = "(Tensor x8, Tensor x_scale, Tensor w8, Tensor w_scale) -> Tensor"


def reference(x8, x_scale, w8, w_scale):
    """-> [R, N] bf16 (module docstring)."""
    return L.gemm(x8, x_scale, w8, w_scale)


def oracle(x8, x_scale, w8, w_scale):
    """The exact product of the dequantised operands, fp64."""
    return torch.matmul(x8.double() * x_scale.double()[:, None], (w8.double() * w_scale.double()[:, None]).t())


BASELINES = (Baseline("scaled_mm", L.scaled_mm), Baseline("scaled_mm_fast", L.scaled_mm_fast))


def make_inputs(shape: Shape, seed: int, device, layout: int = 0):
    R, Kd, N = shape.dims["rows"], shape.dims["k"], shape.dims["n"]
    if torch.device(device).type == "meta":
        return (torch.empty((R, Kd), dtype=E4M3, device=device), torch.empty((R,), device=device),
                torch.empty((N, Kd), dtype=E4M3, device=device), torch.empty((N,), device=device))
    x8, xs = quantize_rows(L.make_x(R, Kd, seed, device))
    w8, ws = L.quantize_weight(L.make_weight(N, Kd, seed, device))
    if layout == 1:
        return (relayout(x8, pad=(0, 16), offset=16), relayout(xs, offset=1), relayout(w8, pad=(0, 32), offset=16),
                relayout(ws, offset=3))
    return x8, xs, w8, ws


def dims_of(args: tuple) -> dict[str, int]:
    """x8: [R, K], w8: [N, K] -> rows, k, n."""
    return {"rows": args[0].shape[0], "k": args[0].shape[1], "n": args[2].shape[0]}


def fake(x8, x_scale, w8, w_scale):
    return x_scale.new_empty((x8.shape[0], w8.shape[0]), dtype=torch.bfloat16)


def bytes_moved(shape: Shape) -> int:
    R, Kd, N = shape.dims["rows"], shape.dims["k"], shape.dims["n"]
    return R * Kd + N * Kd + 4 * (R + N) + 2 * R * N


def _large(inputs, which=()):
    """The operands' largest values: x8 and w8 x 16 saturating at 448, both scales x 1e4."""
    def f(i, t):
        return e4m3(t.float() * 16.0) if i in (0, 2) else t * 1.0e4
    return _map_float(inputs, f, which)


def _subnormal(inputs, which=()):
    """Subnormal row scales (fp32), x8 and w8 x 2^-6 (many into e4m3's subnormals); w_scale x 2^112 keeps the
    outputs normal bf16."""
    def f(i, t):
        if i == 1:
            return t * 1.0e-39
        if i in (0, 2):
            return e4m3(t.float() * 2.0 ** -6)
        return t * 2.0 ** 112
    return _map_float(inputs, f, which)


def _shape(name: str, rows: int, k: int, n: int) -> Shape:
    return Shape(name, {"rows": rows, "k": k, "n": n})


def sample_dims(rng: random.Random, backend: str) -> dict[str, int]:
    """Interpreter: any rows, K and N multiples of 16 up to 160; GPU: any rows with one linear's (K, N)."""
    if backend == "interpret":
        return {"rows": draw_rows(rng, backend), "k": 16 * rng.randint(1, 10), "n": 16 * rng.randint(1, 10)}
    return L.sample_dims(rng, backend)


def sample_shapes(rng: random.Random, backend: str, n: int) -> list[Shape]:
    return drawn(rng, backend, n, sample_dims)


OP_GROUP = OpGroup(
    name=OP,
    reference=reference,
    oracle=oracle,
    make_inputs=make_inputs,
    tolerance=Approximate(max_rel_l2=1e-2, min_cosine=0.9999, max_abs_frac=2e-2, factor=3.0, floor_rel_l2=2e-3),
    shapes=L.SHAPES,
    odd_shapes=(_shape("one_row", 1, 5376, 21504), _shape("odd", 333, 1008, 200)),
    interp_shapes=(_shape("tiny", 3, 64, 32), _shape("odd", 17, 208, 48), _shape("tall", 70, 96, 80)),
    special_cases=(SPECIAL_ZEROS, SPECIAL_ZERO_PREFIX, SpecialCase("large", _large),
                   SpecialCase("subnormal", _subnormal), nonfinite_case(nan_only=(0, 1, 2, 3))),
    bytes_moved=bytes_moved,
    flops=L.flops,
    flops_kind="tensor_fp8",
    noncontiguous_inputs=(),
    special_inputs=(),
    input_names=("x8", "x_scale", "w8", "w_scale"),
    template="fp8_gemm_cute",
    notes="the GEMM after a fused FP8 producer: x8 [R, K] e4m3 + x_scale [R], w8 [N, K] e4m3 + w_scale [N] fp32, "
          "contiguous, bf16(x_scale * (w_scale * acc)); approximate class against the fp64 product of the dequantised "
          "operands (rel-L2 <= 1e-2, cosine >= 0.9999, max-abs <= 2e-2 max|exact|, no lossier than 3x the "
          "reference + 2e-3: fast fp8 accumulation passes); fp8_linear's shapes and cases; incumbent "
          "torch._scaled_mm row-wise; nonfinite: NaN but no +-Inf in every input (e4m3fn has none; 0 x Inf in a "
          "scale would judge the rounding)",
    n_layouts=2,
    sample_shapes=sample_shapes,
    huge_shapes=(_shape("huge", 80000, 5376, 28672),),
    dims_of=dims_of,
    fake=fake,
    schema=SCHEMA,
    baselines=BASELINES,
    reference_timed=False,
    heavy_shapes=("qkv_full", "fc1_full", "fc2_full", "out_full"),
)
