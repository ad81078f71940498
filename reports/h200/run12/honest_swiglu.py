import triton
import triton.language as tl
from rsi import kernel as K


@triton.jit
def _k(x_ptr, out_ptr, n_rows, n_cols, stride_x, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < n_cols
    g = tl.load(x_ptr + r * stride_x + cols, mask=m, other=0.0).to(tl.float32)
    u = tl.load(x_ptr + r * stride_x + n_cols + cols, mask=m, other=0.0).to(tl.float32)
    s = (g / (1.0 + tl.exp(-g))).to(tl.bfloat16).to(tl.float32)
    tl.store(out_ptr + r * n_cols + cols, (s * u).to(tl.bfloat16), mask=m)


def launch(x):
    n_rows, n_cols = x.shape[0], x.shape[1] // 2
    out = K.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    _k[(n_rows,)](x, out, n_rows, n_cols, x.stride(0), BLOCK=K.next_power_of_2(n_cols))
    return out
