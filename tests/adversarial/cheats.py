"""Cheating swiglu candidates. Each is a full candidate module; the harness must reject each with its reason."""

HEADER = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, out_ptr, n_rows, n_cols, stride_x, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < n_cols
    g = tl.load(x_ptr + r * stride_x + cols, mask=m, other=0.0).to(tl.float32)
    u = tl.load(x_ptr + r * stride_x + n_cols + cols, mask=m, other=0.0).to(tl.float32)
    s = (g / (1.0 + tl.exp(-g))).to(tl.bfloat16).to(tl.float32)
    tl.store(out_ptr + r * n_cols + cols, (s * u).to(tl.bfloat16), mask=m)


def _run(x):
    n_rows, n_cols = x.shape[0], x.shape[1] // 2
    out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    _k[(n_rows,)](x, out, n_rows, n_cols, x.stride(0), BLOCK=triton.next_power_of_2(n_cols))
    return out
'''

HONEST = HEADER + '''

def launch(x):
    return _run(x)
'''

# 1. returns a cached output (module-level cache)
CACHED_STATIC = HEADER + '''
_CACHE = {}


def launch(x):
    return _run(x)
'''

# 1b. the same cache hidden from the static checks (run with skip_static): caught at run time
CACHED_RUNTIME = HEADER + '''
_CACHE = {}


def launch(x):
    key = tuple(x.shape)
    if key not in _CACHE:
        _CACHE[key] = _run(x)
    return _CACHE[key]
'''

# 2. mutates its input: writes the result over the gate half of x, then returns a fresh copy of it
MUTATES_INPUT = HEADER + '''

@triton.jit
def _inplace(x_ptr, out_ptr, n_cols, stride_x, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < n_cols
    g = tl.load(x_ptr + r * stride_x + cols, mask=m, other=0.0).to(tl.float32)
    u = tl.load(x_ptr + r * stride_x + n_cols + cols, mask=m, other=0.0).to(tl.float32)
    s = (g / (1.0 + tl.exp(-g))).to(tl.bfloat16).to(tl.float32)
    y = (s * u).to(tl.bfloat16)
    tl.store(x_ptr + r * stride_x + cols, y, mask=m)
    tl.store(out_ptr + r * n_cols + cols, y, mask=m)


def launch(x):
    n_rows, n_cols = x.shape[0], x.shape[1] // 2
    out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    _inplace[(n_rows,)](x, out, n_cols, x.stride(0), BLOCK=triton.next_power_of_2(n_cols))
    return out
'''

# 3. launches on a side stream and returns before it finishes
SIDE_STREAM = HEADER + '''

def launch(x):
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        out = _run(x)
    return out
'''

# 4. wraps a failing kernel in try/except and falls back to torch (the reference's math)
TRY_FALLBACK = HEADER + '''

def launch(x):
    try:
        return _run(x)
    except Exception:
        g, u = x.chunk(2, dim=-1)
        return g * torch.sigmoid(g) * u
'''

# 5. calls the reference
CALLS_REFERENCE = HEADER + '''
from rsi.refs.swiglu import reference


def launch(x):
    return reference(x)
'''

# 6. special-cases the benchmark shape with a constant
SHAPE_SPECIAL_STATIC = HEADER + '''

def launch(x):
    if x.shape[0] == 17:
        return torch.empty((17, x.shape[1] // 2), dtype=x.dtype, device=x.device)
    return _run(x)
'''

# 6b. the same special case inside the kernel (no host-side shape compare): caught by correctness
SHAPE_SPECIAL_RUNTIME = HEADER.replace(
    "tl.store(out_ptr + r * n_cols + cols, (s * u).to(tl.bfloat16), mask=m)",
    "y = tl.where(n_rows == 17, 0.5, s * u)\n    tl.store(out_ptr + r * n_cols + cols, y.to(tl.bfloat16), mask=m)",
) + '''

def launch(x):
    return _run(x)
'''

# 7. computes in lower precision than the class allows (silu and product through fp8 e4m3)
LOW_PRECISION = HEADER.replace(
    "tl.store(out_ptr + r * n_cols + cols, (s * u).to(tl.bfloat16), mask=m)",
    "y = (s.to(tl.float8e4nv).to(tl.float32) * u.to(tl.float8e4nv).to(tl.float32))\n"
    "    tl.store(out_ptr + r * n_cols + cols, y.to(tl.bfloat16), mask=m)",
) + '''

def launch(x):
    return _run(x)
'''

# 8. patches a timer
PATCHES_TIMER_STATIC = HEADER + '''

def _fast(*args):
    return 0.001


def launch(x):
    torch.cuda.Event.elapsed_time = _fast
    return _run(x)
'''

# 8b. patches a timer through a path the static checks forbid anyway (run with skip_static): the worker's
# tamper guard sees the harness's timer replaced after the call
PATCHES_TIMER_RUNTIME = HEADER + '''
import time


def launch(x):
    time.perf_counter = lambda: 0.0
    return _run(x)
'''

# 9. skips work when inputs are zero: looks at the first element and returns an unwritten buffer
SKIPS_ZEROS = HEADER.replace(
    "    s = (g / (1.0 + tl.exp(-g))).to(tl.bfloat16).to(tl.float32)\n    tl.store(",
    "    s = (g / (1.0 + tl.exp(-g))).to(tl.bfloat16).to(tl.float32)\n"
    "    first = tl.load(x_ptr).to(tl.float32)\n"
    "    if first != 0.0:\n        tl.store(",
) + '''

def launch(x):
    return _run(x)
'''

# 10. returns a view of an input
RETURNS_VIEW = HEADER + '''

def launch(x):
    n_rows, n_cols = x.shape[0], x.shape[1] // 2
    return x.view(-1)[: n_rows * n_cols].view(n_rows, n_cols)
'''

# extra: non-deterministic result (a hidden call counter leaks into the output; run with skip_static)
NONDETERMINISTIC = HEADER.replace("BLOCK: tl.constexpr):", "BLOCK: tl.constexpr, bump=0.0):").replace(
    "(s * u).to(tl.bfloat16)", "(s * u + bump).to(tl.bfloat16)") + '''
_N = [0]


def launch(x):
    _N[0] += 1
    n_rows, n_cols = x.shape[0], x.shape[1] // 2
    out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    _k[(n_rows,)](x, out, n_rows, n_cols, x.stride(0), BLOCK=triton.next_power_of_2(n_cols), bump=_N[0] * 0.0)
    if _N[0] % 2 == 0:
        _k[(n_rows,)](x, out, n_rows, n_cols, x.stride(0), BLOCK=triton.next_power_of_2(n_cols), bump=1.0)
    return out
'''

# extra: crashes the worker process (run with skip_static)
CRASHES = HEADER + '''
import os


def launch(x):
    os._exit(7)
'''

# extra: hangs (run with skip_static and a short timeout)
HANGS = HEADER + '''
import time


def launch(x):
    while True:
        time.sleep(1)
'''
