"""Make the Triton interpreter round like the GPU.

Triton 3.6's interpreter converts fp32 -> bf16/fp16 by truncating the mantissa (its ``_convert_float`` ignores
the rounding mode), while compiled kernels round to nearest even (``cvt.rn``). Judged under the interpreter, a
correct kernel would then look like a lower-precision one. Only the interpret backend applies this patch; it
replaces the fp32 -> bf16/fp16 downcast with torch's/numpy's round-to-nearest-even casts (NaN preserved) and leaves
every other conversion (fp8, fp16 upcasts) to the interpreter. It also widens bf16 -> fp32 exactly: the
interpreter flushes bf16 subnormals to zero there, so the subnormal special case would test the wrong inputs.
And ``tl.dot`` on bf16 operands: the interpreter multiplies their raw 16-bit patterns as integers (garbage); the
patch widens bf16 operands exactly to fp32 first, which is what a bf16 tensor-core MMA computes (exact products,
fp32 accumulation; only the summation order differs). And a loaded scalar (shape-(1,) data in the interpreter) used
as a loop bound, ``range(start, end, BLOCK)`` with bounds read from memory (cu_seqlens): the interpreter's
``__index__`` calls ``int()`` on that array, which numpy 2 refuses; the patch takes its single element.
And fp8 (``tl.float8e4nv`` = e4m3fn, ``tl.float8e5`` = e5m2) conversions: the interpreter rounds half up without a
carry, clamps the exponent (500 -> 256, NaN -> 384 in e4m3fn) and has no e4m3 subnormal outputs; sm_90 compiles
fp32 -> fp8 to ``cvt.rn.satfinite.e4m3x2.f32`` / ``...e5m2x2.f32`` (round to nearest even, saturating to the
largest finite value, NaN to NaN). The patch converts fp32/bf16/fp16 -> fp8 that way (torch's cast after a clamp:
torch alone maps overflow to NaN) unless round-toward-zero is asked for, and fp8 -> fp32/bf16/fp16 exactly (NaN
stays NaN; the interpreter gives e4m3fn's NaN as 480). fp8 ``tl.dot`` operands go through the same exact widening
(the interpreter widens them to fp16, exact for both formats, and multiplies in fp32).
And ``tl.fma`` on fp32: the interpreter computes ``x * y + z`` in fp32, rounding twice; the GPU's ``fma.rn.f32``
rounds once, which the quantisers' reciprocal quotient relies on (rsi/refs/fp8_quotient.py). The patch computes it
exactly (``fma32``: fp64 with round-to-odd).
"""

from __future__ import annotations

import numpy as np


def patch_interpreter_rounding() -> bool:
    """Idempotent; returns True when the patch is in place."""
    import torch
    import triton.language as tl
    from triton.runtime import interpreter

    if getattr(interpreter, "_rsi_rne_patch", False):
        return True
    original = interpreter._convert_float
    # Triton fp8 type -> (torch dtype, largest finite value); wider float types -> (numpy bits dtype, torch dtype)
    fp8 = {tl.float8e4nv: (torch.float8_e4m3fn, 448.0), tl.float8e5: (torch.float8_e5m2, 57344.0)}
    wide = {tl.float32: (np.float32, torch.float32), tl.bfloat16: (np.int16, torch.bfloat16),
            tl.float16: (np.float16, torch.float16)}
    rtz = interpreter._ir.ROUNDING_MODE.RTZ

    def to_torch(input, dtype):
        a = np.ascontiguousarray(input)
        if dtype in fp8:
            return torch.from_numpy(a.view(np.uint8)).view(fp8[dtype][0])
        return torch.from_numpy(a.view(wide[dtype][0])).view(wide[dtype][1])

    def convert(input, input_dtype, output_dtype, rounding_mode):
        if output_dtype in fp8 and input_dtype in wide and rounding_mode != rtz:
            t, top = fp8[output_dtype]
            src = to_torch(input, input_dtype).float().clamp(-top, top)   # clamp keeps NaN
            return src.to(t).view(torch.uint8).numpy().reshape(np.shape(input))
        if input_dtype in fp8 and output_dtype in wide:
            out = to_torch(input, input_dtype).to(wide[output_dtype][1])
            bits = {4: (torch.int32, np.uint32), 2: (torch.int16, np.uint16)}[out.element_size()]
            return out.view(bits[0]).numpy().view(bits[1]).reshape(np.shape(input))
        if input_dtype == tl.bfloat16 and output_dtype == tl.float32:
            # exact widening (the interpreter flushes bf16 subnormals such as 3.7e-40 to 0.0)
            return (np.ascontiguousarray(input).view(np.uint16).astype(np.uint32) << 16).reshape(input.shape)
        if input_dtype == tl.float32 and output_dtype == tl.bfloat16:
            src = torch.from_numpy(np.ascontiguousarray(input).view(np.float32))
            return src.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16).reshape(input.shape)
        if input_dtype == tl.float32 and output_dtype == tl.float16:
            return np.ascontiguousarray(input).view(np.float32).astype(np.float16).view(np.uint16)
        return original(input, input_dtype, output_dtype, rounding_mode)

    interpreter._convert_float = convert

    builder = interpreter.InterpreterBuilder
    original_dot = builder.create_dot

    def widen(h):
        if h.dtype == tl.bfloat16:   # a TensorHandle holds its scalar type
            bits = np.ascontiguousarray(h.data).view(np.uint16).astype(np.uint32) << 16
            return interpreter.TensorHandle(bits.view(np.float32).reshape(h.data.shape), tl.float32)
        return h

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        return original_dot(self, widen(a), widen(b), d, input_precision, max_num_imprecise_acc)

    original_fma = builder.create_fma
    from rsi.refs.fp8_quotient import fma32

    def create_fma(self, x, y, z):
        if z.dtype.scalar == tl.float32 and x.dtype.scalar == tl.float32 and y.dtype.scalar == tl.float32:
            return interpreter.TensorHandle(fma32(x.data, y.data, z.data), tl.float32)
        return original_fma(self, x, y, z)

    builder.create_dot = create_dot
    builder.create_fma = create_fma

    original_tensor_patch = interpreter._patch_lang_tensor

    def patch_lang_tensor(tensor, scope):
        original_tensor_patch(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(np.asarray(self.handle.data).reshape(-1)[0])
                       if np.asarray(self.handle.data).size == 1 else int(self.handle.data))

    interpreter._patch_lang_tensor = patch_lang_tensor
    interpreter._rsi_rne_patch = True
    return True
