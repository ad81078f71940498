"""Parametric CuTe DSL template for ``gelu_tanh`` (the offline proposer searches it beside the Triton template
``rsi/templates/gelu_tanh.py``; docs/cute.md).

out = bf16(x / (1 + exp(-2u))),  u = 0.7978845608028654 * (x + 0.044715 * x^3), in fp32 with the Triton template's
operation order. x: [R, F] bf16, any row stride; F a multiple of VEC (8 bf16: one 16-byte access).
``cute.zipped_divide`` cuts x into (1, VEC) vectors, a (R, F / VEC) grid of them; block b owns the THREADS * UNROLL
consecutive vectors of that grid (row-major) from b * THREADS * UNROLL, thread t those at offsets t, t + THREADS, ...
(a warp's access is 512 contiguous bytes, split only where a row ends). A full block loads its UNROLL vectors first,
then computes and stores; the last block checks each vector against the grid's size.
K.cute_launch compiles per shape, strides, dtype and alignment: the layouts are static, so the compiler emits
16-byte accesses where the rows and the base pointer are 16-byte aligned and narrower ones where they are not
(layout 2 of the op group: an odd row stride at an odd offset). Offsets are 32-bit: launch refuses x spanning 2**31
elements or more.
Config:
  THREADS   threads per block; UNROLL vectors per thread (8 * UNROLL elements);
  MATH      0: exp(-2u) at full precision (cute.math.exp: the expf range reduction around ex2.approx) and an IEEE
            division (div.rn.f32); 1: the Triton template's instructions, ex2.approx of -2u * log2(e) and
            div.full.f32 (what Triton 3.6 emits for tl.exp and fp32 `/`; both are scalar NVVM ops, so this path
            works element by element). MATH=1 should be bitwise equal to the Triton template: the PTX of both
            (compiled on the CPU for sm_90a) has the same fp32 operations in the same order, fma contraction of
            x + 0.044715 x^3 included; only this one's ex2 flushes subnormals (.ftz), which cannot change 1 + e.
            Not yet compared on a GPU. The op group's class is tolerance (rsi/refs/gelu_tanh.py), so MATH=0 is
            judged the same way, against the fp64 oracle.
"""

import cutlass
from cutlass import cute

from rsi import kernel as K


@cute.jit
def _gelu(x: cute.TensorSSA, MATH: cutlass.Constexpr):
    # sqrt(2 / pi), 0.044715 and log2(e) as literals, like the Triton template
    x = x.to(cutlass.Float32)
    u = 0.7978845608028654 * (x + 0.044715 * (x * x * x))
    if cutlass.const_expr(MATH):
        # Triton's instructions: ex2.approx.f32 of -2u * log2(e) and div.full.f32, scalar NVVM ops: element-wise
        y = cute.make_rmem_tensor(x.shape, cutlass.Float32)
        for j in cutlass.range_constexpr(cute.size(x.shape)):
            e = cute.math.exp2(-2.0 * u[j] * 1.4426950408889634, fastmath=True)
            y[j] = cute.math.div(x[j], 1.0 + e, full=True)
        return y.load().to(cutlass.BFloat16)
    return (x / (1.0 + cute.math.exp(-2.0 * u))).to(cutlass.BFloat16)


@cute.kernel
def _gelu_kernel(gx: cute.Tensor, gout: cute.Tensor, THREADS: cutlass.Constexpr, UNROLL: cutlass.Constexpr,
                 MATH: cutlass.Constexpr):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    n_rows, n_vec = gx.shape[1]
    total = n_rows * n_vec
    first = bidx * (THREADS * UNROLL) + tidx
    if (bidx + 1) * (THREADS * UNROLL) <= total:
        xs = ()
        for i in cutlass.range_constexpr(UNROLL):
            v = first + i * THREADS
            xs = xs + (gx[(None, (v // n_vec, v % n_vec))].load(),)
        for i in cutlass.range_constexpr(UNROLL):
            v = first + i * THREADS
            gout[(None, (v // n_vec, v % n_vec))].store(_gelu(xs[i], MATH))
    else:
        for i in cutlass.range_constexpr(UNROLL):
            v = first + i * THREADS
            if v < total:
                crd = (None, (v // n_vec, v % n_vec))
                gout[crd].store(_gelu(gx[crd].load(), MATH))


@cute.jit
def _gelu_host(x: cute.Tensor, out: cute.Tensor, stream, VEC: cutlass.Constexpr, THREADS: cutlass.Constexpr,
               UNROLL: cutlass.Constexpr, MATH: cutlass.Constexpr):
    gx = cute.zipped_divide(x, (1, VEC))      # ((1, VEC), (R, F / VEC))
    gout = cute.zipped_divide(out, (1, VEC))
    blocks = cute.ceil_div(cute.size(gx, mode=[1]), THREADS * UNROLL)
    _gelu_kernel(gx, gout, THREADS, UNROLL, MATH).launch(grid=(blocks, 1, 1), block=(THREADS, 1, 1), stream=stream)


def launch(x, THREADS=256, UNROLL=2, MATH=0, VEC=8):
    n_rows, n_cols = x.shape
    if n_cols % VEC != 0:
        raise ValueError(f"F = {n_cols} is not a multiple of the vector width {VEC}")
    if x.stride(1) != 1:
        raise ValueError("x's rows must be contiguous (unit column stride)")
    if n_rows * x.stride(0) >= 2**31 - 1:
        raise ValueError("x spans 2**31 elements or more: this template's offsets are 32-bit")
    out = K.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    if n_rows * n_cols == 0:
        return out
    K.cute_launch(_gelu_host, x, out, VEC=VEC, THREADS=THREADS, UNROLL=UNROLL, MATH=MATH)
    return out
