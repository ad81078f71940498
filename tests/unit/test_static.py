"""The static check is an allow-list: honest candidates pass, and every rule rejects its cheat with a reason that
names what is allowed. Each rejection case below fails if the rule it exercises is removed."""

from __future__ import annotations

from pathlib import Path

import pytest

from rsi.harness.static import check_source

OK = '''"""A copy kernel: the smallest honest candidate."""

from __future__ import annotations

import triton
import triton.language as tl

from rsi import kernel as K

BLOCK = 128
TUNABLE = (("BLOCK", (64, 128, 256)), ("num_warps", (2, 4)))
BIG = 2**31 - 1
DT = K.bfloat16
CEXPR = tl.constexpr(4)


@triton.jit
def _k(x_ptr, out_ptr, n, BLOCK: tl.constexpr, EVEN: "tl.constexpr" = 0):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    for i in tl.static_range(2):
        if EVEN:
            m = m & (offs >= 0)
    x = tl.load(x_ptr + offs, mask=m, other=0.0).to(tl.float32)
    y = tl.extra.cuda.libdevice.rsqrt(x * x + 1.0) * 0.0 + x
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=m)


def _grid(n, block):
    return (triton.cdiv(int(n), int(block)),)


def launch(x, BLOCK=128, num_warps=4):
    n = x.numel()
    if x.ndim == 0 or n > BIG:
        raise ValueError(f"bad input of {n} elements")
    if n + BLOCK >= 2**31 - 1:
        raise ValueError("needs 64-bit indexing")
    out = K.empty(x.shape, dtype=x.dtype, device=x.device)
    flat = x.view(-1)
    rows, = flat.shape
    grid = (K.cdiv(rows, BLOCK),)
    _k[grid](flat, out, n, BLOCK=BLOCK, num_warps=num_warps)
    _k[(triton.cdiv(n, BLOCK), 1)](flat, out, n, BLOCK=K.next_power_of_2(min(BLOCK, n)), num_warps=num_warps)
    return out
'''

TEMPLATES = sorted(p for p in (Path(__file__).resolve().parents[2] / "rsi" / "templates").glob("*.py")
                   if p.name != "__init__.py")


def reason(src: str) -> str:
    r = check_source(src)
    return "" if r.ok else r.reason


def host(body: str, sig: str = "x, BLOCK=128, num_warps=4") -> str:
    """OK with launch replaced: `body` is the new launch body (4-space indented lines)."""
    head, _ = OK.split("def launch(")
    return head + f"def launch({sig}):\n" + body


def kernel(line: str) -> str:
    """OK with one extra line in the kernel body."""
    return OK.replace("    m = offs < n\n", "    m = offs < n\n" + line + "\n", 1)


# --------------------------------------------------------------------------------------------- honest sources pass
def test_the_honest_example_passes():
    assert reason(OK) == ""


@pytest.mark.parametrize("path", TEMPLATES, ids=[p.stem for p in TEMPLATES])
def test_every_template_passes(path):
    src = path.read_text()
    assert reason(src) == ""
    assert "import torch" not in src and "from rsi import kernel as K" in src


def test_templates_exist():
    assert len(TEMPLATES) >= 7


def test_honest_variants_pass():
    ok = [
        OK.replace("import triton.language as tl", "from triton import language as tl"),
        OK.replace("from rsi import kernel as K", "import rsi.kernel as K"),
        OK.replace("from rsi import kernel as K", "from rsi import kernel as api").replace("K.", "api."),
        OK.replace("@triton.jit\n", "@triton.jit(debug=False)\n"),
        host("    return _grid(x.shape[0], BLOCK)\n"),
        host("    out = K.empty_like(x)\n    if x.dtype != K.float32 and x.shape == out.shape:\n"
             "        return out.transpose(0, 1).unsqueeze(0)\n    return out\n"),
        host("    n_world = int(world)\n    k = x.shape[1] // n_world\n    if k > BLOCK or k % BLOCK != 0:\n"
             "        raise TypeError('no')\n    return x.narrow(1, 0, k)\n", "x, world, BLOCK=128"),
        host("    n_rows, n_cols = x.shape\n    for i in range(2):\n        if n_cols > BLOCK:\n            break\n"
             "    return x[:, :n_cols // 2]\n"),
        host("    return _pass(*inputs, **config)\n", "*inputs, **config") + "\n\ndef _pass(x):\n    return x\n",
        host("    return _h(x, x.shape[0], **config)\n", "x, **config")
        + "\n\ndef _h(t, n, BLOCK=64):\n    if n > BLOCK:\n        raise ValueError('fit')\n"
          "    out = K.empty_like(t)\n    _k[(triton.cdiv(n, BLOCK),)](t, out, n, BLOCK=BLOCK)\n    return out\n",
        host("    B = config['BLOCK'] * 2\n    return x.view(B, -1)\n", "x, **config"),
    ]
    for src in ok:
        assert reason(src) == "", reason(src)


# ------------------------------------------------------------------------------------------------ rule 1: module
MODULE_CASES = {
    "torch import": ("import torch\n" + OK, "imports torch: a candidate may import only triton"),
    "torch alias F": ("import torch\nF = torch.nn.functional\n" + OK, "imports torch"),
    "F alias alone": (OK.replace("BLOCK = 128", "F = torch.nn.functional"), "module-level value F"),
    "T.ops.aten": ("import torch as T\n" + OK, "imports torch"),
    "aten alias without import": (OK.replace("BLOCK = 128", "A = T.ops.aten"), "module-level value A"),
    "math": ("import math\n" + OK, "imports math"),
    "typing": ("from typing import Any\n" + OK, "imports typing"),
    "sys.modules": ("import sys\n" + OK, "imports sys"),
    "os": ("import os\n" + OK, "imports os"),
    "rsi.refs": ("from rsi.refs.swiglu import reference\n" + OK, "may not call the reference"),
    "rsi harness": ("import rsi.harness.timing as t\n" + OK, "may not call the reference or the harness"),
    "rsi without alias": (OK.replace("from rsi import kernel as K", "import rsi.kernel"), "binds `rsi`"),
    "from triton import jit": ("from triton import jit\n" + OK, "imports triton.jit"),
    "relative": ("from . import x\n" + OK, "relative import"),
    "future feature": ("from __future__ import braces\n" + OK.replace("from __future__ import annotations\n", ""),
                       "only `annotations`"),
    "dict cache": (OK.replace("BLOCK = 128", "_C = {}"), "module-level value _C"),
    "list cache": (OK.replace("BLOCK = 128", "_C = [0]"), "module-level value _C"),
    "call at import": (OK.replace("BLOCK = 128", "BLOCK = len('abc')"), "module-level value BLOCK"),
    "module if": (OK + "\nif BLOCK:\n    BLOCK2 = 1\n", "module-level statement If"),
    "module for": (OK + "\nfor i in range(3):\n    pass\n", "module-level statement For"),
    "module try": (OK + "\ntry:\n    pass\nexcept Exception:\n    pass\n", "module-level statement Try"),
    "module expr": (OK + "\nprint('import-time work')\n", "module-level statement Expr"),
    "class": (OK + "\nclass A:\n    pass\n", "ClassDef"),
    "annassign": (OK.replace("BLOCK = 128", "BLOCK: int = 128"), "annotated module-level assignment"),
    "tuple target": (OK.replace("BLOCK = 128", "A, B = 1, 2"), "bind one plain name"),
    "rebinding": (OK.replace("BLOCK = 128", "BLOCK = 128\nBLOCK = 256"), "bound twice"),
    "builtins": (OK.replace("BLOCK = 128", "__builtins__ = 1"), "dunder"),
    "shadow builtin": (OK.replace("BLOCK = 128", "len = 3"), "shadows a Python builtin"),
    "no entry": (OK.replace("def launch", "def entry"), "no entry point"),
    "jit entry": (OK.replace("def _k(", "def launch_(").replace("_k[", "launch_[").replace("def launch(", "def _h(")
                  .replace("def launch_(", "def launch("), "must be a host function"),
    "async": (OK + "\nasync def f():\n    pass\n", "async def"),
    "huge power": (OK.replace("BLOCK = 128", "BLOCK = 10 ** 10 ** 10"), "module-level value BLOCK"),
    "syntax": ("def launch(:\n", "syntax error"),
}


@pytest.mark.parametrize("case", list(MODULE_CASES))
def test_module_rules(case):
    src, words = MODULE_CASES[case]
    r = reason(src)
    assert words in r, (case, r)


# ------------------------------------------------------------------------------------------------ rule 2: kernels
KERNEL_CASES = {
    "autotune": (OK.replace("@triton.jit\n", "@triton.autotune(configs=[], key=['n'])\n@triton.jit\n"),
                 "configs are the search's job"),
    "autotune alone": (OK.replace("@triton.jit\n", "@triton.autotune(configs=[], key=['n'])\n"),
                       "decorator triton.autotune is not allowed (configs are the search's job"),
    "heuristics": (OK.replace("@triton.jit\n", "@triton.heuristics({'B': lambda a: a['n'] % 2})\n"),
                   "decorator triton.heuristics is not allowed"),
    "other decorator": (OK.replace("@triton.jit\n", "@staticmethod\n"), "decorator staticmethod is not allowed"),
    "decorator argument": (OK.replace("@triton.jit\n", "@triton.jit(debug=open('f'))\n"),
                           "decorator argument of triton.jit"),
    "positional decorator argument": (OK.replace("@triton.jit\n", "@triton.jit(1)\n"), "decorator argument"),
    "kernel default": (OK.replace('EVEN: "tl.constexpr" = 0', "EVEN=__import__('time')"),
                       "default argument of _k() is not a constant"),
    "kernel annotation": (OK.replace("n, BLOCK: tl.constexpr", "n: print('x'), BLOCK: tl.constexpr"),
                          "annotation print('x') of _k(n) is evaluated at import time"),
    "kernel varargs": (OK.replace("EVEN: \"tl.constexpr\" = 0", "*rest"), "takes *args"),
    "print": (kernel("    print(n)"), "name 'print' is not allowed in kernel"),
    "device_print": (kernel("    tl.device_print('n', n)"), "tl.device_print is not allowed in a kernel"),
    "inline asm": (kernel("    t = tl.inline_asm_elementwise('mov.u64 $0, %globaltimer;', '=l', [], "
                          "dtype=tl.int64, is_pure=False, pack=1)"), "inline assembly"),
    "globaltimer": (kernel("    t = tl.extra.cuda.globaltimer()"), "reading a clock"),
    "tl module": (kernel("    c = tl.core"), "tl.core is not allowed in a kernel"),
    "tl.math.core": (kernel("    c = tl.math.core"), "tl.math.core is not allowed"),
    "extra pkgutil": (kernel("    c = tl.extra.pkgutil"), "tl.extra.pkgutil is not allowed"),
    "triton in kernel": (kernel("    c = triton.runtime"), "kernels use triton.language (tl.*) only"),
    "K in kernel": (kernel("    c = K.float32"), "the kernel API (rsi.kernel) is for host code"),
    "dunder attr": (kernel("    c = m.__class__"), "attribute __class__"),
    "private attr": (kernel("    c = m.handle"), "attribute .handle"),
    "getattr": (kernel("    c = getattr(m, 'handle')"), "name 'getattr' is not allowed in kernel"),
    "builtins in kernel": (kernel("    c = __builtins__"), "name '__builtins__' is not allowed"),
    "host fn from kernel": (kernel("    c = _grid(n, 1)"), "kernel _k() calls _grid"),
    "lambda in kernel": (kernel("    f = tl.reduce(m, 0, lambda a, b: a)"), "lambda in kernel"),
    "comprehension in kernel": (kernel("    c = [i for i in range(2)]"), "comprehension"),
    "dict in kernel": (kernel("    c = {}"), "dict display"),
    "nested def": (kernel("    def f():\n        pass"), "nested FunctionDef"),
    "with in kernel": (kernel("    with m:\n        pass"), "with statement"),
    "assert in kernel": (kernel("    assert n > 0"), "use tl.device_assert"),
    "subscript store in kernel": (kernel("    m[0] = 1"), "assignment to m[0] in kernel"),
    "global in kernel": (kernel("    global BLOCK"), "global statement"),
}


@pytest.mark.parametrize("case", list(KERNEL_CASES))
def test_kernel_rules(case):
    src, words = KERNEL_CASES[case]
    r = reason(src)
    assert words in r, (case, r)


# ------------------------------------------------------------------------------------------- rule 3: host functions
HOST_CASES = {
    "default __import__": (host("    return x\n", "x, t=__import__('time')"),
                           "default argument of launch() is not a constant"),
    "default list cache": (host("    return x\n", "x, _c=[]"), "default argument of launch() is not a constant"),
    "annotation call": (host("    return x\n", "x: print('x')=1"), "is evaluated at import time"),
    "return annotation": (OK.replace("num_warps=4):", "num_warps=4) -> print('x'):"),
                          "return annotation print('x') of launch() is evaluated at import time"),
    "torch without import": (host("    return torch.empty_like(x)\n"), "name 'torch' is not allowed in host code"),
    "builtins": (host("    b = __builtins__\n    return x\n"), "name '__builtins__' is not allowed"),
    "getattr sys.modules": (host("    m = getattr(sys.modules, 'torch')\n    return x\n"),
                            "name 'getattr' is not allowed"),
    "eval": (host("    return eval('x')\n"), "name 'eval' is not allowed"),
    "open": (host("    f = open('/tmp/x')\n    return x\n"), "name 'open' is not allowed"),
    "print": (host("    print(x.shape)\n    return x\n"), "name 'print' is not allowed"),
    "host torch compute": (host("    return x.float().sum()\n"),
                           "host code calls x.float(): compute belongs in a @triton.jit kernel"),
    "clone": (host("    return x.clone()\n"), "host code calls x.clone()"),
    "item": (host("    v = x.item()\n    return x\n"), "host code calls x.item()"),
    "data_ptr": (host("    p = x.data_ptr()\n    return x\n"), "data_ptr is not allowed"),
    "data_ptr attr": (host("    p = x.data_ptr\n    return x\n"), "data_ptr is not allowed"),
    "operator compute": (host("    return x * 2\n"), "host code computes on x (operator *)"),
    "operator on input": (host("    return x + x\n"), "compute belongs in a @triton.jit kernel"),
    "exp through pow": (host("    return 2.718 ** (-x)\n"), "host code computes on"),
    "unary on tensor": (host("    return -x\n"), "unary operator"),
    "compare tensors": (host("    m = x > 0\n    return x\n"), "comparison"),
    "tensor truth": (host("    if x:\n        return x\n    return x\n"), "truth test"),
    "tensor and": (host("    y = x and x\n    return x\n"), "truth test"),
    "max of tensor": (host("    return max(x, 0)\n"), "max()"),
    "abs of tensor": (host("    return abs(x)\n"), "abs()"),
    "float of tensor": (host("    return float(x)\n"), "float()"),
    "tuple of tensor": (host("    return tuple(x)\n"), "tuple() of x"),
    "int of a tensor element": (host("    if int(x.view(-1)[0]) == 0:\n        return x\n    return x\n"),
                                "int() would read its data on the host"),
    "tensor index": (host("    return x[x]\n"), "indexing with a tensor is a host-side gather"),
    "world arithmetic": (host("    return K.empty((world * 2,), dtype=x.dtype, device=x.device)\n", "x, world"),
                         "a plain-int input is used as int(name)"),
    "helper param arithmetic": (OK.replace("triton.cdiv(int(n), int(block))", "triton.cdiv(n, block)"),
                                "argument of triton.cdiv()"),
    "helper gets a tensor": (host("    return _h(x)\n") + "\n\ndef _h(a, b=2):\n    return a * b\n",
                             "host code computes on a (operator *)"),
    "tensor into a helper default": (host("    return _h(1, b=x)\n") + "\n\ndef _h(a, b=2):\n    return a * b\n",
                                     "host code computes on b (operator *)"),
    "inputs spill into a default": (host("    return _h(*inputs)\n", "*inputs")
                                    + "\n\ndef _h(a=1, b=2):\n    return a * b\n", "host code computes on a"),
    "helper kwargs": (host("    return _h(x)\n") + "\n\ndef _h(a, **kw):\n    return _g(**kw)\n\n\n"
                      "def _g(b=2):\n    return b * 2\n", "host code computes on b"),
    "view with tensor": (host("    return x.view(x)\n"), "takes sizes, dims and dtypes, not tensors"),
    "method on int": (host("    n = x.numel()\n    return n.view(1)\n"), "which is not a tensor"),
    "K.set_allocator": (host("    K.set_allocator(None)\n    return x\n"),
                        "K.set_allocator is not part of the kernel API"),
    "K._allocator": (host("    a = K._allocator\n    return x\n"), "attribute _allocator"),
    "K._launch_ffi": (host("    K._launch_ffi(None, None, None, None, (x,), {}, False)\n    return x\n"),
                      "attribute _launch_ffi"),
    "K.CUTE_FFI_ENV": (host("    e = K.CUTE_FFI_ENV\n    return x\n"), "K.CUTE_FFI_ENV is not part of the kernel API"),
    "K.torch": (host("    t = K.torch\n    return x\n"), "K.torch is not part of the kernel API"),
    "triton.testing": (host("    t = triton.testing.do_bench\n    return x\n"), "triton.testing is not available"),
    "triton.runtime call": (host("    triton.runtime.driver.active.synchronize()\n    return x\n"),
                            "triton.runtime is not available"),
    "tl in host": (host("    return tl.zeros((1,), tl.float32)\n"), "tl.* belongs in kernels"),
    "dunder attr": (host("    s = x.__class__\n    return x\n"), "attribute __class__"),
    "attribute store": (host("    x.storage = 1\n    return x\n"), "assigns attribute x.storage"),
    "item store": (host("    x[0] = 1\n    return x\n"), "item assignment"),
    "lambda": (host("    f = lambda: x\n    return x\n"), "lambda in host code"),
    "lambda grid": (host("    _k[lambda meta: (1,)](x, x, 1, BLOCK=BLOCK)\n    return x\n"), "lambda in host code"),
    "list display cache": (host("    c = [x]\n    return x\n"), "list display"),
    "dict display": (host("    c = {'a': x}\n    return x\n"), "dict display"),
    "set display": (host("    c = {1}\n    return x\n"), "set display"),
    "comprehension": (host("    c = tuple(s for s in x.shape)\n    return x\n"), "comprehension"),
    "list comprehension": (host("    c = [s for s in x.shape]\n    return x\n"), "comprehension"),
    "while": (host("    while False:\n        pass\n    return x\n"), "while loop in host code"),
    "for over tensor": (host("    for r in x:\n        pass\n    return x\n"), "may loop only over range"),
    "with": (host("    with x:\n        pass\n    return x\n"), "with statement"),
    "try": (host("    try:\n        return x\n    except Exception:\n        return x\n"), "try/except"),
    "global": (host("    global BLOCK\n    return x\n"), "global statement"),
    "del": (host("    del x\n    return 1\n"), "del statement"),
    "assert": (host("    assert x.ndim == 2\n    return x\n"), "assert in host code"),
    "import inside": (host("    import os\n    return x\n"), "imports belong at module level"),
    "reference inside": (host("    from rsi.refs import get_op_group\n    return x\n"),
                         "may not call the reference"),
    "nested def": (host("    def f():\n        pass\n    return x\n"), "nested FunctionDef"),
    "walrus": (host("    if (n := 1):\n        pass\n    return x\n"), "assignment expression"),
    "yield": (host("    yield x\n"), "yield in host code"),
    "raise other": (host("    raise RuntimeError('x')\n"), "may only raise ValueError"),
    "raise tensor message": (host("    raise ValueError(f'{x}')\n"), "f-string formats x"),
    "fstring outside raise": (host("    s = f'{BLOCK}'\n    return x\n"), "f-string in launch() outside a raise"),
    "expression statement": (host("    x.view(-1)\n    return x\n"), "expression statement"),
    "direct kernel call": (host("    _k(x, x, 1, BLOCK=BLOCK)\n    return x\n"), "launch it as _k[grid]"),
    "kernel as value": (host("    f = _k\n    return x\n"), "kernel _k used as a value"),
    "launch result": (host("    h = _k[(1,)](x, x, 1, BLOCK=BLOCK)\n    return h\n"), "launch kernels as statements"),
    "calls launch": (host("    return launch(x, BLOCK=x)\n", "x, BLOCK=128"), "called by the harness only"),
    "calls local": (host("    f = BLOCK\n    return f(x)\n"), "a parameter or local"),
    "alias as value": (host("    k = K\n    return x\n"), "module alias K used as a value"),
    "starred foreign": (host("    return _grid(*x.shape)\n"), "only the function's own *args"),
    "in operator": (host("    if BLOCK in (1, 2):\n        pass\n    return x\n"), "`in` comparison"),
    "shadow alias": (host("    tl = 1\n    return x\n"), "shadows a module alias or function"),
    "shadow builtin": (host("    len = 1\n    return x\n"), "shadows a Python builtin"),
    "bytes": (host("    b = b'x'\n    return x\n"), "constant b'x'"),
    "annassign": (host("    n: int = 1\n    return x\n"), "annotated assignment in host code"),
}


@pytest.mark.parametrize("case", list(HOST_CASES))
def test_host_rules(case):
    src, words = HOST_CASES[case]
    r = reason(src)
    assert words in r, (case, r)


# ---------------------------------------------------------------------------------------- rule 4: shape special cases
SHAPE_CASES = {
    "literal": "    if x.shape[0] == 9562:\n        return x\n    return x\n",
    "arithmetic literal": "    n = x.shape[0]\n    if n == 5000 + 376:\n        return x\n    return x\n",
    "shift literal": "    if x.numel() < 1 << 20:\n        return x\n    return x\n",
    "module constant": "    if x.shape[1] == CEXPR:\n        return x\n    return x\n",
    "reversed": "    if 5376 == x.shape[1]:\n        return x\n    return x\n",
    "folded into the value": "    k = x.shape[1] - 5376\n    if k == 0:\n        return x\n    return x\n",
    "truth of a difference": "    if x.shape[1] - 5376:\n        return x\n    return x\n",
    "not of a difference": "    if not x.shape[1] - 5376:\n        return x\n    return x\n",
    "xor": "    k = x.shape[1] ^ 5376\n    if not k:\n        return x\n    return x\n",
    "tuple": "    if x.shape == (17, 5376):\n        return x\n    return x\n",
    "len": "    if len(x) == 17:\n        return x\n    return x\n",
    "stride": "    if x.stride(0) != 5376:\n        return x\n    return x\n",
    "ifexp": "    b = 1 if x.shape[0] > 4096 else 2\n    return x\n",
    "boolop": "    if BLOCK and x.shape[0] > 4096:\n        return x\n    return x\n",
    "min special": "    if min(x.shape[0], 4096) == 4096:\n        return x\n    return x\n",
    "world input": "    if int(world) == 8:\n        return x\n    return x\n",
    "float literal": "    if x.shape[0] * 0.5 > 2687.5:\n        return x\n    return x\n",
    "launch argument": "    _k[(1,)](x, x, 1, BLOCK=BLOCK, EVEN=x.shape[0] == 17)\n    return x\n",
    # a constant held by a local is the constant (all four passed the check before the eighteenth session)
    "local holding it": "    k = 16384\n    if x.shape[1] == k:\n        return x\n    return x\n",
    "config times zero plus it": "    k = BLOCK * 0 + 16384\n    if x.shape[1] == k:\n        return x\n    return x\n",
    "tuple element": "    ks = (2048, 16384)\n    if x.shape[1] == ks[1]:\n        return x\n    return x\n",
    "folded through a local": "    k = 5376\n    d = x.shape[1] - k\n    if d == 0:\n        return x\n    return x\n",
    "min with a local": "    k = 4096\n    if min(x.shape[0], k) == k:\n        return x\n    return x\n",
    # the same session's adversary pass (a helper): each passed the first version of the rule
    "rebound after a shape": "    k = x.shape[0]\n    k = 16384\n    if x.shape[1] == k:\n        return x\n    return x\n",
    "conditional": "    k = x.shape[0] if False else 16384\n    if x.shape[1] == k:\n        return x\n    return x\n",
    "boolean operator": "    k = 0 * x.shape[0] or 16384\n    if x.shape[1] == k:\n        return x\n    return x\n",
    "literal tuple element": "    if x.shape[1] == (x.shape[0], 16384)[1]:\n        return x\n    return x\n",
    "int of a string": "    if x.shape[1] == int('16384'):\n        return x\n    return x\n",
    "len of a string": "    if x.shape[1] == len('x' * 4096) * 4:\n        return x\n    return x\n",
    "cdiv by a literal": "    q = K.cdiv(x.shape[1], 16384)\n    if q == 1:\n        return x\n    return x\n",
    "scaled by a fraction": "    s = x.shape[1] * (1 / 16384)\n    if s == 1:\n        return x\n    return x\n",
    # scaled by inf or NaN: the first version of the fraction test crashed the checker on these
    "scaled by infinity": "    s = x.shape[1] * 1e400\n    if s == 0:\n        return x\n    return x\n",
    "scaled by NaN": "    s = x.shape[1] * float('nan')\n    if s == 0:\n        return x\n    return x\n",
}


@pytest.mark.parametrize("case", list(SHAPE_CASES))
def test_shape_special_cases_rejected(case):
    r = reason(host(SHAPE_CASES[case], "x, world=None, BLOCK=128" if "world" not in SHAPE_CASES[case]
                    else "x, world, BLOCK=128"))
    assert "special-casing shapes is not allowed" in r, (case, r)


def test_shape_guards_that_are_allowed():
    for body in [
        "    if x.numel() + BLOCK >= 2**31 - 1:\n        raise ValueError('int32')\n    return x\n",
        "    if x.numel() >= 2**31:\n        raise ValueError('int32')\n    return x\n",
        "    if x.numel() > 2**63 - 1 or x.numel() >= 2**32:\n        raise ValueError('x')\n    return x\n",
        "    n_rows, n_cols = x.shape\n    if n_cols > BLOCK + BLOCK:\n        raise ValueError('fit')\n    return x\n",
        "    if x.shape[0] == 0 or x.stride(-1) != 1:\n        raise ValueError('empty')\n    return x\n",
        "    n_cols = x.shape[1] // 2\n    if n_cols > BLOCK:\n        raise ValueError('fit')\n    return x\n",
        "    m = x.shape[0] * 3\n    if m > BLOCK:\n        raise ValueError('fit')\n    return x\n",
        # locals holding what may appear: an index-width limit, the config, a loop index
        "    lim = 2**31 - 1\n    if x.numel() >= lim:\n        raise ValueError('int32')\n    return x\n",
        "    b = BLOCK\n    if x.shape[0] > b:\n        raise ValueError('fit')\n    return x\n",
        "    for i in range(4):\n        if x.shape[0] > i:\n            return x\n    return x\n",
        # constants read element by element: LIM's 1, a literal tuple's 1
        "    lo, hi = LIM\n    if x.shape[0] == lo:\n        raise ValueError('one')\n    return x\n",
        "    if x.shape[0] == (1, 16384)[0]:\n        raise ValueError('one')\n    return x\n",
    ]:
        src = host(body).replace("BLOCK = 128\n", "BLOCK = 128\nLIM = (1, 8)\n", 1)
        assert reason(src) == "", (body, reason(src))


def test_reasons_say_what_is_allowed():
    assert "allocate outputs with K.empty" in reason("import torch\n" + OK)
    r = reason(host("    return x.sum()\n"))
    assert "host code may only read tensor metadata" in r and "K.empty" in r and "shape" in r
    assert "K.empty" in reason(host("    K.set_allocator(None)\n    return x\n"))
    assert "0, 1, -1" in reason(host(SHAPE_CASES["literal"]))


def test_line_numbers_point_at_the_violation():
    src = host("    n = 1\n    m = x.sum()\n    return x\n")
    r = check_source(src)
    assert not r.ok and src.splitlines()[r.line - 1].strip() == "m = x.sum()"


def test_tunable_declaration_is_a_constant():
    assert reason(OK) == ""
    assert "module-level value TUNABLE" in reason(OK.replace('TUNABLE = (("BLOCK", (64, 128, 256)),',
                                                             'TUNABLE = [("BLOCK", (64, 128, 256)),').replace(
        '("num_warps", (2, 4)))', '("num_warps", (2, 4))]'))


def test_triton_kernel_bodies_are_not_under_rule_4():
    """By design: a @triton.jit kernel gets sizes as run-time values and may branch on them (bounds, alignment fast
    paths); rule 4 holds in host code and CuTe bodies (docs/design.md)."""
    assert reason(kernel("    if n == 16384:\n        m = m & (offs >= 0)")) == ""
