"""FP8 linear (approximate class): ``out = x W^T`` with the weight stored as e4m3 per output channel and the
activation quantised to e4m3 per row inside the op, bf16 out.

Inputs: ``x`` [R, K] bf16 (the activation; any row stride, any storage offset), ``w8`` [N, K] float8_e4m3fn (the
weight quantised offline per output channel with ``rsi.refs.fp8_common.quantize_weight``; any row stride) and
``w_scale`` [N] fp32 (its per-channel scales; any element stride). Output: contiguous [R, N] bf16.

Reference (the lossy algorithm, as ``torch._scaled_mm`` with row-wise scales computes it): ``x8, x_scale =
quantize_rows(x)`` (rsi/refs/fp8_common.py: scale = amax(row) / 448, x8 = RNE saturating e4m3 of x / scale; a row
holding NaN/Inf is NaN throughout, a zero row has scale 1), then ``acc = x8 @ w8^T`` accumulated in fp32 (the
products of two e4m3 values are exact in fp32; TF32 off) and ``out = bf16(x_scale[r] * (w_scale[n] * acc))``:
PyTorch's row-wise kernel on sm_90 (aten/src/ATen/native/cuda/RowwiseScaledMM.cu, a CUTLASS TMA warp-specialized
GEMM) applies its epilogue in fp32 in that order (``Multiply(XScale, Multiply(WScale, Acc))``, round to nearest)
and casts to bf16; bias none. Its requirements (ScaledBlas.cpp): mat1 [M, K] row-major, mat2 [K, N] column-major
(``w8.t()``), K and N multiples of 16, scale_a fp32 [M, 1], scale_b fp32 [1, N] contiguous, bf16 out, sm_89/sm_90+;
``use_fast_accum`` False by default (the accumulator promoted to fp32 periodically, CUTLASS's non-FastAccum
schedule).

Oracle (the EXACT op): the fp64 linear of the bf16 x with the dequantised weight ``w8 * w_scale``. The model's
weight *is* the e4m3 weight once the checkpoint is converted at load, so this op's loss is the activation's
quantisation plus the kernel's accumulation; the weight's own quantisation error is a property of the
checkpoint conversion, reported per weight by ``weight_error(w_bf16)`` (fp8_common; rel-L2, max-abs, cosine of
dequant(quant(w)) against w) for the runtime's records, never charged to a kernel.

Class ``approximate`` (rsi.contract.Approximate) against the oracle, over the whole output: ``rel_l2 <= 0.1``,
``cosine >= 0.995``, ``max|out - oracle| <= 0.2 max|oracle|``, and no lossier than 1.5x the reference's rel-L2 +
1e-3. Measured on the CPU (make_inputs below): the reference's own rel-L2 is 0.024-0.030 (cosine 0.9996-0.9997,
max-abs 0.02-0.06 of max|oracle|) at 64 x 512 -> 256, 333 x 1000 -> 200 and 1024 x 1024 -> 512 (seeds 0-2); over
the interpreter shapes, 12 drawn shapes (up to 24 rows, K and N up to 160) and every special case, seeds 0-3, at
most 0.062 (cosine >= 0.9982, max-abs <= 0.102 of max|oracle|): with 16-24 rows and a short K the one row holding
a massive activation weighs 1/16 of the output. What fails (tests/interp/test_fp8_linear.py): e5m2 activations
(1.66-1.75x the reference's rel-L2 at the larger shapes), a per-tensor activation scale (2.7-4.2x: the massive
activation sets the tensor's scale and pushes every other row into e4m3's subnormal range), a missing or wrong scale
in the epilogue. A quantiser that multiplies by 448 / amax instead of dividing by amax / 448 differs from the IEEE
quotient where the quotient is an exact e4m3 tie (bf16 inputs over an 8-bit amax hit ties often: 5 of 192 elements
at the tiny shape): 0.97-1.02x the reference's rel-L2, well inside the class.

Inputs (make_inputs): x ~ N(0, 1) with its rows scaled by 2^e_r (e_r spread evenly over [-1, 1], exact in bf16),
~1% of its columns (at least one; chosen by the seed) x 8 (the outlier channels of a transformer's activation), and
in every 16th row (rows 15, 31, ...) one massive activation 2^16 (x the row's factor) in a seeded channel whose
weight column is 2^-16 of the others (the product stays ordinary, and the e4m3 weight rounds it to 0): per-row
scaling loses precision on that row only, a per-tensor scale on every row. The weight ~ N(0, 1/K) with its rows
scaled by 2^f_n (f_n over [-4, 4]), quantised per row by ``quantize_weight``. Layouts: 0 contiguous x, w8, w_scale;
1 x with a padded row stride (K + 24) at a 16-byte offset, w8 with row stride K + 16 at a 16-byte offset, w_scale at
an offset; 2 x and w8 with odd row strides (K + 3) at odd offsets (unaligned), w_scale with element stride 2.

Special cases: zeros and zero_prefix as everywhere; ``large``: x x 1e4, w8's values x 16 saturating at 448, w_scale
x 1e4; ``subnormal``: x x 1e-39 (bf16 subnormals: the row scales fall below fp32's normal range and are kept as
subnormals; a kernel that forms 448 / amax overflows there unless it rescales), w8 x 2^-6 (into e4m3's subnormal
range), w_scale x 2^100 (outputs stay normal bf16); ``nonfinite``: NaN/+-Inf in x (the row's outputs are all NaN),
NaN but no +-Inf in w8 (e4m3fn has no Inf) and in w_scale (a column of NaN).

Shapes ``{rows, k, n}``: the four H3 linears (H3_SPEC.md section 7: qkv 5376 -> 21504, out_proj 7168 -> 5376, fc1
5376 -> 28672, fc2 14336 -> 5376) at 38,248 rows (1344x768 on one GPU; a kernel serves 19,124-76,496 rows) and
10,250 (the Stage-1 draft; it also serves the 9,562-row Ulysses rank), and the LTX-2 refiner's video linears at
16,128 rows (diffusers LTX2VideoTransformer3DModel: to_q/k/v/out 4096 -> 4096, ff.net.0.proj 4096 -> 16384 with
GELU-tanh, ff.net.2 16384 -> 4096). FLOPs ``2 R K N`` with flops_kind "tensor_fp8": the physics gate compares
them with the dense fp8 tensor-core peak (1,979 TFLOP/s on the H200; cuBLASLt's fp8 GEMM ran at 1,247-1,276 TFLOP/s
there, ANCHORS.md, above the bf16 peak of 989). Bytes: x, w8, w_scale read once, out written once.

Incumbents (rsi.contract.Baseline): ``scaled_mm`` (the quantiser above in eager torch, then ``torch._scaled_mm``
with row-wise scales) and ``scaled_mm_compiled`` (the quantiser through ``torch.compile``, one fused Inductor
kernel, then the same GEMM); the judge vets them like any incumbent (torch 2.13 also runs ``_scaled_mm`` on the
CPU, where both give the reference's bits except under the subnormal case). The bf16 ``F.linear`` of the
unquantised weight is the comparison the runtime's fp8 path must beat, but not an incumbent: it computes another op
(no quantisation); it belongs in a bench of the runtime's fp8 path against its bf16 path (not written yet).
"""

from __future__ import annotations

import contextlib
import math
import random

import torch

from rsi.contract import Approximate, Baseline, OpGroup, Shape, SpecialCase
from rsi.refs.common import (
    BF16,
    SPECIAL_ZERO_PREFIX,
    SPECIAL_ZEROS,
    _map_float,
    draw_rows,
    drawn,
    generator,
    nonfinite_case,
    relayout,
    spread,
)
from rsi.refs.fp8_common import (
    E4M3,
    dequantize_rows,
    e4m3,
    quantize_rows,
    quantize_rows_compiled,
    quantize_weight,
    spread_exponents,
    weight_error,
)

__all__ = ["OP_GROUP", "oracle", "quantize_rows", "quantize_weight", "reference", "scaled_mm", "weight_error"]

OP = "fp8_linear"
SCHEMA = "(Tensor x, Tensor w8, Tensor w_scale) -> Tensor"
X_SPREAD = 1        # row exponents of x over [-1, 1]
SPIKE = 2.0 ** 16   # the massive activation of every SPIKE_EVERY-th row (x its row's factor)
SPIKE_EVERY = 16
W_SPREAD = 4        # row (output channel) exponents of the weight over [-4, 4]
OUTLIER = 8.0       # factor of x's outlier channels
H3_LINEARS = {"qkv": (5376, 21504), "out": (7168, 5376), "fc1": (5376, 28672), "fc2": (14336, 5376)}
LTX_LINEARS = {"ltx_qkvo": (4096, 4096), "ltx_ff_up": (4096, 16384), "ltx_ff_down": (16384, 4096)}
H3_ROWS = {"stage1": 10250, "full": 38248}
LTX_ROWS = 16128


@contextlib.contextmanager
def _no_tf32():
    if not torch.cuda.is_available():
        yield
        return
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old


def gemm(x8: torch.Tensor, x_scale: torch.Tensor, w8: torch.Tensor, w_scale: torch.Tensor) -> torch.Tensor:
    """The reference GEMM on quantised operands: bf16(x_scale[r] * (w_scale[n] * (x8 @ w8^T))), fp32 accumulation."""
    with _no_tf32():
        acc = torch.matmul(x8.float(), w8.float().t())
    return (x_scale[:, None] * (w_scale[None, :] * acc)).to(BF16)


def reference(x, w8, w_scale):
    """x: [R, K] bf16, w8: [N, K] e4m3fn, w_scale: [N] fp32 -> [R, N] bf16 (module docstring)."""
    x8, x_scale = quantize_rows(x)
    return gemm(x8, x_scale, w8, w_scale)


def oracle(x, w8, w_scale):
    """The exact op: fp64 x @ (w8 * w_scale)^T on the bf16 x."""
    return torch.matmul(x.double(), dequantize_rows(w8, w_scale).t())


# ------------------------------------------------------------------------------------------------- incumbents
def scaled_mm(x8: torch.Tensor, x_scale: torch.Tensor, w8: torch.Tensor, w_scale: torch.Tensor,
              fast: bool = False) -> torch.Tensor:
    """``torch._scaled_mm`` with row-wise scales on quantised operands (CUDA, sm_89+): x8 [R, K] row-major, w8 [N, K]
    (passed as its column-major transpose), x_scale [R], w_scale [N] fp32 -> [R, N] bf16. What the runtime calls
    after a fused producer (modulate_fp8, gate_residual_modulate_fp8, swiglu_fp8, head_merge_fp8) has quantised the
    activation. ``fast``: cuBLASLt's fast accumulation (``use_fast_accum``: the tensor core's fp8 accumulator over all
    of K, never promoted to fp32)."""
    return torch._scaled_mm(x8, w8.t(), scale_a=x_scale.reshape(-1, 1).contiguous(),
                            scale_b=w_scale.reshape(1, -1).contiguous(), out_dtype=BF16, use_fast_accum=fast)


def scaled_mm_fast(x8: torch.Tensor, x_scale: torch.Tensor, w8: torch.Tensor, w_scale: torch.Tensor) -> torch.Tensor:
    """:func:`scaled_mm` with cuBLASLt's fast accumulation."""
    return scaled_mm(x8, x_scale, w8, w_scale, fast=True)


def _incumbent(x, w8, w_scale):
    return scaled_mm(*quantize_rows(x), w8, w_scale)


def _incumbent_compiled(x, w8, w_scale):
    return scaled_mm(*quantize_rows_compiled()(x), w8, w_scale)


BASELINES = (Baseline("scaled_mm", _incumbent), Baseline("scaled_mm_compiled", _incumbent_compiled))


# ------------------------------------------------------------------------------------------------------ inputs
def _cols(k: int, n: int, seed: int, device) -> torch.Tensor:
    """n distinct seeded columns of k."""
    return torch.randperm(k, generator=generator(seed, device), device=device)[:n]


def make_x(rows: int, k: int, seed: int, device) -> torch.Tensor:
    """N(0, 1) rows scaled by 2^e_r (e_r over [-X_SPREAD, X_SPREAD]), outlier channels x OUTLIER, and in every
    SPIKE_EVERY-th row one massive activation x SPIKE in a seeded channel (module docstring)."""
    if torch.device(device).type == "meta":
        return torch.empty((rows, k), dtype=BF16, device=device)
    x = torch.randn((rows, k), generator=generator(seed, device), device=device, dtype=torch.float32)
    factor = torch.exp2(spread_exponents(rows, X_SPREAD)).to(x.device)
    if k:
        cols = _cols(k, max(1, k // 100) + 1, seed + 3, device)
        x[:, cols[1:]] *= OUTLIER
        x[SPIKE_EVERY - 1::SPIKE_EVERY, cols[0]] = SPIKE
    return (x * factor[:, None]).to(BF16)


def make_weight(n: int, k: int, seed: int, device) -> torch.Tensor:
    """The bf16-precision weight the e4m3 one replaces: N(0, 1/K), rows scaled by 2^f_n (fp32), the massive
    channel's column by 1 / SPIKE (its products stay ordinary)."""
    w = torch.randn((n, k), generator=generator(seed + 1, device), device=device, dtype=torch.float32)
    w.mul_(torch.exp2(spread_exponents(n, W_SPREAD)).to(w.device)[:, None] / math.sqrt(max(k, 1)))
    if k:
        w[:, _cols(k, 1, seed + 3, device)] /= SPIKE
    return w


def make_inputs(shape: Shape, seed: int, device, layout: int = 0):
    R, Kd, N = shape.dims["rows"], shape.dims["k"], shape.dims["n"]
    x = make_x(R, Kd, seed, device)
    if torch.device(device).type == "meta":
        w8 = torch.empty((N, Kd), dtype=E4M3, device=device)
        ws = torch.empty((N,), dtype=torch.float32, device=device)
    else:
        w8, ws = quantize_weight(make_weight(N, Kd, seed, device))
    if layout == 1:
        return relayout(x, pad=(0, 24), offset=8), relayout(w8, pad=(0, 16), offset=16), relayout(ws, offset=2)
    if layout == 2:
        return relayout(x, pad=(0, 3), offset=1), relayout(w8, pad=(0, 3), offset=1), spread(ws, 2, offset=1)
    return x, w8, ws


def dims_of(args: tuple) -> dict[str, int]:
    """x: [R, K], w8: [N, K] -> rows, k, n."""
    return {"rows": args[0].shape[0], "k": args[0].shape[1], "n": args[1].shape[0]}


def fake(x, w8, w_scale):
    return x.new_empty((x.shape[0], w8.shape[0]))


def bytes_moved(shape: Shape) -> int:
    R, Kd, N = shape.dims["rows"], shape.dims["k"], shape.dims["n"]
    return 2 * R * Kd + N * Kd + 4 * N + 2 * R * N


def flops(shape: Shape) -> int:
    """2 R K N: the GEMM's multiply-adds (tensor cores). The quantisation (~4 R K) and epilogue (2 R N) are not
    counted."""
    return 2 * shape.dims["rows"] * shape.dims["k"] * shape.dims["n"]


# ------------------------------------------------------------------------------------------------ special cases
def _large(inputs, which=()):
    def f(i, t):
        if i == 1:
            return e4m3(t.float() * 16.0)
        return (t.float() * 1.0e4).to(t.dtype)
    return _map_float(inputs, f, which)


def _subnormal(inputs, which=()):
    def f(i, t):
        if i == 0:
            return (t.float() * 1.0e-39).to(t.dtype)
        if i == 1:
            return e4m3(t.float() * 2.0 ** -6)
        return t * 2.0 ** 100
    return _map_float(inputs, f, which)


SPECIAL_CASES = (SPECIAL_ZEROS, SPECIAL_ZERO_PREFIX, SpecialCase("large", _large),
                 SpecialCase("subnormal", _subnormal), nonfinite_case(nan_only=(1, 2)))


# ------------------------------------------------------------------------------------------------------ shapes
def _shape(name: str, rows: int, k: int, n: int) -> Shape:
    return Shape(name, {"rows": rows, "k": k, "n": n})


SHAPES = tuple(_shape(f"{lin}_{stage}", rows, k, n) for stage, rows in H3_ROWS.items()
               for lin, (k, n) in H3_LINEARS.items()) + \
    tuple(_shape(name, LTX_ROWS, k, n) for name, (k, n) in LTX_LINEARS.items())
PAIRS = tuple(sorted(set(H3_LINEARS.values()) | set(LTX_LINEARS.values())))


def sample_dims(rng: random.Random, backend: str) -> dict[str, int]:
    """Interpreter: any rows, K and N up to 160; GPU: any rows with the (K, N) of one of the linears."""
    if backend == "interpret":
        return {"rows": draw_rows(rng, backend), "k": rng.randint(1, 160), "n": rng.randint(1, 160)}
    k, n = rng.choice(PAIRS)
    return {"rows": draw_rows(rng, backend), "k": k, "n": n}


def sample_shapes(rng: random.Random, backend: str, n: int) -> list[Shape]:
    return drawn(rng, backend, n, sample_dims)


OP_GROUP = OpGroup(
    name=OP,
    reference=reference,
    oracle=oracle,
    make_inputs=make_inputs,
    tolerance=Approximate(max_rel_l2=0.1, min_cosine=0.995, max_abs_frac=0.2, factor=1.5, floor_rel_l2=1e-3),
    shapes=SHAPES,
    odd_shapes=(_shape("one_row", 1, 5376, 21504), _shape("odd", 333, 1000, 200)),
    interp_shapes=(_shape("tiny", 3, 64, 32), _shape("odd", 17, 200, 48), _shape("tall", 70, 96, 80)),
    special_cases=SPECIAL_CASES,
    bytes_moved=bytes_moved,
    flops=flops,
    flops_kind="tensor_fp8",
    noncontiguous_inputs=(),
    special_inputs=(),
    input_names=("x", "w8", "w_scale"),
    template="fp8_linear",
    notes="x [R, K] bf16 quantised per row inside the op (scale amax/448, RNE saturating e4m3), w8 [N, K] e4m3 + "
          "w_scale [N] fp32 per output channel, bf16(x_scale * (w_scale * acc)); approximate class against the fp64 "
          "linear of the bf16 x with the dequantised weight (rel-L2 <= 0.1, cosine >= 0.995, max-abs <= 0.2 "
          "max|exact|, no lossier than 1.5x the reference + 1e-3); x rows 2^16 apart and outlier columns; own large "
          "and subnormal cases; nonfinite: NaN but no +-Inf in w8 (e4m3fn has none) and w_scale; incumbents "
          "torch._scaled_mm row-wise (eager and compiled quantiser), CUDA only",
    n_layouts=3,
    sample_shapes=sample_shapes,
    huge_shapes=(_shape("huge", 80000, 5376, 28672),),
    dims_of=dims_of,
    fake=fake,
    schema=SCHEMA,
    baselines=BASELINES,
    reference_timed=False,  # fp32/fp64 reference ~0.1-1 s per call; the incumbents bind
    heavy_shapes=("qkv_full", "fc1_full", "fc2_full", "out_full"),   # specials and layouts at the stage-1 shapes
)
