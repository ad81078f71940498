"""Static check of candidate source, on the AST (never by regex): an ALLOW-LIST. Anything not listed here is rejected.

A candidate is a module whose entry point ``launch(*inputs, **config)`` allocates its outputs with the kernel API
(``from rsi import kernel as K``: ``K.empty``, ``K.empty_like``) and launches ``@triton.jit`` kernels, or CuTe DSL
kernels (rule 5). Everything that computes on data happens inside kernels; host code may only read tensor metadata,
take views, compute launch geometry from sizes and launch kernels. The rules, in the order the check applies them:

1. Module level: an optional docstring; ``import triton``, ``import triton.language as tl`` (any alias, also
   ``from triton import language as tl``), ``from rsi import kernel as K`` / ``import rsi.kernel as K`` (any alias)
   and ``from __future__ import annotations``; constants bound to plain names (numbers, strings, booleans, None,
   tuples of them, arithmetic of them, earlier constants, ``tl.constexpr(<constant>)``, ``K.<dtype>`` /
   ``tl.<dtype>``); ``def`` statements. Every module-level name is bound once, and no name shadows a builtin.
   ``TUNABLE = (("NAME", (v1, v2)), ...)`` (``rsi.llm.reply``) is a tuple constant like any other. A CuTe DSL
   module imports ``cutlass`` / ``cutlass.cute`` instead of triton (rule 5): a module uses one kernel language.
2. ``@triton.jit`` kernels: the decorator is exactly ``<triton alias>.jit``, bare or called with constant keyword
   arguments (no ``triton.autotune`` or ``triton.heuristics``: configs are the search's job; no other decorator);
   defaults are constants; annotations absent, ``tl.constexpr`` or a string. The body uses Python control flow
   (assign, augmented assign, if, for, while, return, break, continue, pass) over names that are parameters,
   locals, module constants, jit functions of the module and the builtins Triton accepts in kernels
   (``KERNEL_BUILTINS``; not ``print``). Attributes: ``tl.<name>`` for the names in ``TL_KERNEL_NAMES``, the math
   chains ``tl.math.<fn>`` and ``tl.extra.cuda.libdevice.<fn>``, ``tl.PropagateNan.ALL/NONE`` (``triton.language``
   spelled out is the same as the tl alias), and on any value only the members in ``KERNEL_MEMBERS``
   (``x.to(...)``, ``x.dtype``, ``x.sum(...)``...). Nothing starting with ``_``, nothing with ``asm`` or ``timer``
   in its name (inline assembly could read ``%globaltimer``).
3. Host functions (every other ``def``; ``launch`` must be one): defaults are constants, annotations absent or
   constants (a string); ``*args`` / ``**kwargs`` are allowed and may be passed on only as themselves. Statements:
   assignment to names (tuple unpacking included), augmented assignment, if/else, ``for ... in range(...)``,
   return, break, continue, pass, ``raise ValueError(...)`` / ``raise TypeError(...)`` with a constant or f-string
   message, and as expression statements only kernel launches ``kern[grid](...)`` (``K.cute_launch(fn, ...)``,
   rule 5) and calls of the module's other host functions. Expressions: constants, names, arithmetic,
   comparisons, boolean operators, conditional expressions, tuple displays, subscripts, f-strings in raise
   messages; the calls ``HOST_BUILTINS``, ``K.<CANDIDATE_API>``, ``triton.cdiv`` / ``triton.next_power_of_2`` and
   the tensor metadata/view methods in ``HOST_TENSOR_METHODS``; the attributes ``HOST_TENSOR_ATTRS``,
   ``K.<CANDIDATE_API>``, ``tl.<dtype>``. No list, dict or set displays, comprehensions, lambdas, while loops,
   with, try, global, del, assert, imports, nested defs or classes. ``data_ptr`` in particular is not allowed (it
   fingerprints the harness's buffers).
   Values are tracked by kind (scalar, tuple of scalars, dtype/device, opaque tensor or input): arithmetic,
   comparisons, truth tests, ``min``/``max``/``abs``/``float``/``bool`` take scalars only, so host code cannot
   compute on tensors even with plain operators. An input that is a plain int (``world``) is opaque until
   converted with ``int(world)`` (``int()`` of anything else opaque is rejected: it would read a tensor's data);
   ``launch``'s defaulted parameters and ``**config`` are the harness's constant config, so ``launch`` may not be
   called by the module; a helper's parameters take the kinds of what its call sites pass (``*inputs`` may
   reach any positional parameter), opaque where nothing does.
4. Shape special-casing: every value derived from an input (its metadata, ``len``, ``int(...)`` of it, arithmetic
   on those) is tainted. A comparison or truth test involving a tainted value may not involve an integer constant
   (after folding ``5000 + 376``, ``1 << 31``, module constants) other than 0, 1, -1 and the index-width limits
   ``INDEX_WIDTH_LIMITS`` (2**31 - 1, 2**31, 2**32, 2**63 - 1: int32/int64 overflow guards such as
   ``x.numel() + BLOCK >= 2**31 - 1``), and may not involve a tainted value into which such a constant was folded
   by arithmetic (``k = n - 5376; if k == 0``); nor may such a value bound a host loop (``for _ in range(n //
   16384)`` runs its body at some shapes only). A constant held by a local counts as the constant (``_Kind.const``,
   carried through names and arithmetic, not loop indices: ``k = 16384; if n_cols == k`` and ``k = BLOCK * 0 +
   16384`` passed before the eighteenth session). Comparisons against launch parameters with defaults (the config)
   are allowed: ``if n_cols > BLOCK_H + BLOCK_T: raise ValueError(...)``.
5. CuTe DSL (``rsi.harness.static_cute``, rules C1-C4 there): ``@cute.kernel`` / ``@cute.jit`` functions with their
   own allow-list, launched from host code only by the statement ``K.cute_launch(fn, *args, **consts)``; rule 4
   applies inside their bodies too, where shapes are static.
"""

from __future__ import annotations

import ast
import builtins
import operator
import re
from dataclasses import dataclass

from rsi.contract import ENTRY_POINT
from rsi.kernel import CANDIDATE_API

# ------------------------------------------------------------------------------------------------- the allow-lists
ALLOWED_IMPORTS = ("triton", "triton.language", "rsi.kernel", "cutlass", "cutlass.cute")
FUTURE_FEATURES = ("annotations",)
# the second kernel language, CuTe DSL, has its rules in rsi.harness.static_cute (imported at the end of this module)

IMPORT_RULE = ("a candidate may import only triton, triton.language and rsi.kernel (`import triton`, "
               "`import triton.language as tl`, `from rsi import kernel as K`, plus `from __future__ import "
               "annotations`), or instead of triton CuTe DSL's cutlass and cutlass.cute (`import cutlass`, `import "
               "cutlass.cute as cute`); allocate outputs with K.empty / K.empty_like, workspace with K.scratch")

API_FUNCTIONS = frozenset({"empty", "empty_like", "scratch", "cdiv", "next_power_of_2", "cute_launch",
                           "cute_launch_dynamic"})
API_DTYPES = frozenset(CANDIDATE_API - API_FUNCTIONS)
TL_DTYPES = frozenset({
    "bfloat16", "float16", "float32", "float64", "float8e4b15", "float8e4b8", "float8e4nv", "float8e5", "float8e5b16",
    "int1", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
})
# tl.<name> a kernel may use (Triton 3.6's public language minus modules, inline assembly, printing and internals)
TL_KERNEL_NAMES = frozenset({
    "abs", "add", "advance", "arange", "argmax", "argmin", "associative_scan", "assume", "atomic_add", "atomic_and",
    "atomic_cas", "atomic_max", "atomic_min", "atomic_or", "atomic_xchg", "atomic_xor", "broadcast", "broadcast_to",
    "cast", "cat", "cdiv", "ceil", "clamp", "constexpr", "cos", "cumprod", "cumsum", "debug_barrier", "device_assert",
    "div_rn", "dot", "dot_scaled", "erf", "exp", "exp2", "expand_dims", "fdiv", "flip", "floor", "fma", "full",
    "gather", "histogram", "interleave", "join", "load", "load_tensor_descriptor", "log", "log2", "make_block_ptr",
    "make_tensor_descriptor", "max", "max_constancy", "max_contiguous", "maximum", "min", "minimum", "mul",
    "multiple_of", "num_programs", "pair_uniform_to_normal", "permute", "philox", "program_id", "rand", "rand4x",
    "randint", "randint4x", "randn", "randn4x", "range", "ravel", "reduce", "reduce_or", "reshape", "rsqrt",
    "sigmoid", "sin", "softmax", "sort", "split", "sqrt", "sqrt_rn", "static_assert", "static_range", "store",
    "store_tensor_descriptor", "sub", "sum", "swizzle2d", "topk", "trans", "umulhi", "view", "where", "xor_sum",
    "zeros", "zeros_like",
}) | TL_DTYPES
# deeper tl chains a kernel may call: prefix -> the leaf must be a lower-case function name (not a module)
TL_KERNEL_CHAINS = (("math",), ("extra", "cuda", "libdevice"))
_LEAF = re.compile(r"^[a-z][a-z0-9_]*$")
_NOT_LEAVES = frozenset({"core", "wraps", "semantic", "builtins"})
# attributes on kernel values (tensors, dtypes, constexprs)
KERNEL_MEMBERS = frozenset({
    "T", "abs", "advance", "argmax", "argmin", "associative_scan", "atomic_add", "atomic_and", "atomic_cas",
    "atomic_max", "atomic_min", "atomic_or", "atomic_xchg", "atomic_xor", "broadcast_to", "cast", "cdiv", "ceil",
    "cos", "cumprod", "cumsum", "erf", "exp", "exp2", "expand_dims", "flip", "floor", "gather", "histogram", "item",
    "log", "log2", "logical_and", "logical_or", "max", "min", "permute", "ravel", "reduce", "reduce_or", "reshape",
    "rsqrt", "sigmoid", "sin", "softmax", "sort", "split", "sqrt", "sqrt_rn", "store", "sum", "to", "trans", "view",
    "xor_sum", "dtype", "shape", "type", "numel", "value", "element_ty", "scalar", "primitive_bitwidth",
    "int_bitwidth", "fp_mantissa_width", "is_floating", "is_int", "is_bool", "is_bf16", "is_fp16", "is_fp32",
    "is_fp64", "is_fp8", "is_int_signed", "is_int_unsigned", "is_ptr", "is_block", "get_int_max_value",
    "get_int_min_value",
})
KERNEL_BUILTINS = frozenset({"range", "min", "max", "len", "int", "float", "bool", "abs"})

HOST_BUILTINS = frozenset({"len", "min", "max", "int", "float", "bool", "tuple", "range", "abs"})
HOST_EXCEPTIONS = frozenset({"ValueError", "TypeError"})
HOST_TENSOR_ATTRS = frozenset({"shape", "dtype", "device", "ndim"})
HOST_SIZE_METHODS = frozenset({"stride", "size", "numel", "dim", "element_size", "is_contiguous", "storage_offset"})
HOST_VIEW_METHODS = frozenset({"view", "unsqueeze", "squeeze", "transpose", "permute", "narrow", "select", "expand",
                               "unflatten", "as_strided", "t"})
HOST_TENSOR_METHODS = HOST_SIZE_METHODS | HOST_VIEW_METHODS
TRITON_HOST_CALLS = frozenset({"cdiv", "next_power_of_2"})
TRITON_HOST_ATTRS = TRITON_HOST_CALLS | {"jit"}
TL_HOST_ATTRS = TL_DTYPES | {"constexpr"}

INDEX_WIDTH_LIMITS = frozenset({2**31 - 1, 2**31, 2**32, 2**63 - 1})
TRIVIAL_CONSTANTS = frozenset({0, 1, -1})
_PY_BUILTINS = frozenset(dir(builtins))

HOST_RULE = ("host code may only read tensor metadata (" + ", ".join(sorted(HOST_TENSOR_ATTRS)) + ", "
             + ", ".join(f"{m}()" for m in sorted(HOST_SIZE_METHODS)) + "; storage_offset() of inputs only), take "
             "views ("
             + ", ".join(f"{m}()" for m in sorted(HOST_VIEW_METHODS)) + "), allocate with K.empty / K.empty_like "
             "(outputs) and K.scratch (workspace), "
             "compute sizes with integer arithmetic, K.cdiv / triton.cdiv, K.next_power_of_2 / "
             "triton.next_power_of_2 and " + "/".join(sorted(HOST_BUILTINS)) + ", and launch kernels")


def contract_rules() -> list[str]:
    """The rules above in prompt form (rsi.llm.prompt shows them to the model, so the two cannot drift apart)."""
    return [
        (f"- imports: {IMPORT_RULE}. Nothing else: not torch, math, typing, os, sys or anything from rsi but "
         f"rsi.kernel. The kernel API is exactly K.{{{', '.join(sorted(CANDIDATE_API))}}}: "
         "`K.empty(shape, dtype, device)`, `K.empty_like(t)` for outputs, `K.scratch(shape, dtype, device)` for "
         "workspace (at most one copy of each input plus 1 MiB per call; it never holds anything from an earlier call)"),
        ("- module level: a docstring, the imports, constants bound to plain names (numbers, strings, booleans, None, "
         "tuples of them, arithmetic of them, tl.constexpr(...), K.<dtype>, tl.<dtype>) and def statements; "
         "no classes, no if/for/with/try, no calls at import time, no containers (no caches of results)"),
        ("- kernels: exactly `@triton.jit` (no triton.autotune, no triton.heuristics: configs are the search's job); "
         "constant defaults; annotations only `tl.constexpr`; the body uses tl.* (tl.math.*, "
         "tl.extra.cuda.libdevice.*), jit functions of the module, methods of kernel values (x.to, x.sum, ...) and "
         f"{', '.join(sorted(KERNEL_BUILTINS))}; no print, no inline assembly"),
        (f"- outside @triton.jit, {HOST_RULE}; all arithmetic on data happens in kernels. Plain-int "
         "inputs (e.g. `world`) are used through `int(world)`"),
        ("- host statements: assignments to names, if/else, `for i in range(...)`, return, `raise ValueError(...)`, "
         "kernel launches `kern[grid](...)` and calls of the module's own host functions; no while, with, no "
         "try/except, no global/nonlocal, del, assert, lambda, comprehensions, list/dict/set displays (use tuples), "
         "no getattr/eval/exec/print, no names or attributes starting with `_`, no data_ptr()"),
        ("- defaults of every function are constants; annotations are evaluated at import time, so only "
         "`tl.constexpr` (kernels) or strings"),
        ("- no special-casing of shapes: a value derived from an input's size may be compared only with 0, 1, -1, the "
         "index-width limits (2**31 - 1, 2**31, 2**32, 2**63 - 1) or the launch parameters (the config), e.g. "
         "`if n_cols > BLOCK_H + BLOCK_T: raise ValueError(...)`"),
        f"- the kernel language is Triton, {static_cute.CUTE_RULE}",
    ]


# ---------------------------------------------------------------------------------------------------- the result
@dataclass(frozen=True)
class StaticResult:
    ok: bool
    reason: str = ""
    line: int = 0


class _Reject(Exception):
    def __init__(self, reason: str, node: ast.AST | None = None):
        super().__init__(reason)
        self.reason = reason
        self.line = getattr(node, "lineno", 0)


class _NotConst(Exception):
    pass


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return _dotted(node.value) + "." + node.attr
    if isinstance(node, ast.Call):
        return _dotted(node.func) + "(...)"
    if isinstance(node, ast.Subscript):
        return _dotted(node.value) + "[...]"
    return "<expr>"


def _src(node: ast.AST, limit: int = 60) -> str:
    try:
        text = ast.unparse(node)
    except Exception:  # noqa: BLE001 - only for messages
        text = type(node).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _chain(node: ast.AST) -> tuple[ast.AST, list[str]]:
    """(root, [attr, attr, ...]) of a.b.c."""
    attrs: list[str] = []
    while isinstance(node, ast.Attribute):
        attrs.append(node.attr)
        node = node.value
    return node, attrs[::-1]


def _check_attr_name(attr: str, node: ast.AST) -> None:
    if attr.startswith("_"):
        raise _Reject(f"attribute {attr} ({_src(node)}): names starting with '_' are not allowed", node)
    low = attr.lower()
    if "asm" in low:
        raise _Reject(f"attribute {attr}: inline assembly is not allowed (it could read %globaltimer)", node)
    if "timer" in low or "clock" in low:
        raise _Reject(f"attribute {attr}: reading a clock is not allowed", node)


# ------------------------------------------------------------------------------------------------ constant folding
_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
           ast.LShift: operator.lshift, ast.RShift: operator.rshift, ast.BitAnd: operator.and_,
           ast.BitOr: operator.or_, ast.BitXor: operator.xor}
_MAX_BITS = 4096
_MAX_LEN = 4096
_FOLDED_BUILTINS = {"int": int, "float": float, "len": len, "abs": abs}   # evaluated on constants by _fold


def _fold(node: ast.AST, consts: dict[str, tuple[str, object]], reads: bool = False) -> object:
    """The value of a constant expression, or _NotConst. Bounded: no huge powers, shifts or repetitions. ``reads``:
    also subscripts of constant tuples and int / float / len / abs of constants, for finding the constants a shape
    is compared with (rule 4); a module constant or a default is never one of those."""
    if isinstance(node, ast.Constant):
        v = node.value
        if v is None or type(v) in (int, float, str, bool):
            return v
        raise _NotConst
    if isinstance(node, ast.Name):
        c = consts.get(node.id)
        if c is not None and c[0] in ("S", "T"):
            return c[1]
        raise _NotConst
    if isinstance(node, ast.Tuple) and isinstance(node.ctx, ast.Load):
        return tuple(_fold(e, consts, reads) for e in node.elts)
    if isinstance(node, ast.UnaryOp):
        v = _fold(node.operand, consts, reads)
        try:
            if isinstance(node.op, ast.Not):
                return not v
            if isinstance(v, (str, tuple)) or v is None:
                raise _NotConst
            if isinstance(node.op, ast.USub):
                return -v
            if isinstance(node.op, ast.UAdd):
                return +v
            if isinstance(node.op, ast.Invert) and isinstance(v, int):
                return ~v
        except TypeError:
            raise _NotConst from None
        raise _NotConst
    if reads and isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):   # (2048, 16384)[1], KS[0]
        seq, i = _fold(node.value, consts, reads), _fold(node.slice, consts, reads)
        if isinstance(seq, (tuple, str)) and isinstance(i, int) and not isinstance(i, bool) and -len(seq) <= i < len(seq):
            return seq[i]
        raise _NotConst
    if (reads and isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FOLDED_BUILTINS
            and consts.get(node.func.id) is None and not node.keywords and len(node.args) == 1):
        v = _fold(node.args[0], consts, reads)   # int('16384'), float(...), len('x' * 2048), abs(-16384)
        try:
            v = _FOLDED_BUILTINS[node.func.id](v)
        except (ArithmeticError, TypeError, ValueError):
            raise _NotConst from None
        if isinstance(v, int) and v.bit_length() > _MAX_BITS:
            raise _NotConst
        return v
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        a, b = _fold(node.left, consts, reads), _fold(node.right, consts, reads)
        if isinstance(node.op, ast.Pow) and isinstance(a, int) and isinstance(b, int) and (
                b < 0 or b > _MAX_BITS or max(abs(a), 1).bit_length() * b > _MAX_BITS):
            raise _NotConst
        if isinstance(node.op, ast.LShift) and isinstance(b, int) and not 0 <= b <= _MAX_BITS:
            raise _NotConst
        if isinstance(node.op, ast.Mult) and (isinstance(a, (str, tuple)) or isinstance(b, (str, tuple))):
            n = b if isinstance(a, (str, tuple)) else a
            seq = a if isinstance(a, (str, tuple)) else b
            if not isinstance(n, int) or len(seq) * max(n, 0) > _MAX_LEN:
                raise _NotConst
        try:
            v = _BINOPS[type(node.op)](a, b)
        except (ArithmeticError, TypeError, ValueError):
            raise _NotConst from None
        if isinstance(v, int) and v.bit_length() > _MAX_BITS or isinstance(v, complex):
            raise _NotConst
        return v
    raise _NotConst


def _holds_constant(v: object) -> bool:
    """v (a folded constant) is or holds a number a shape may not be compared with (rule 4)."""
    vals = v if isinstance(v, tuple) else (v,)
    return any(isinstance(x, (int, float)) and not isinstance(x, bool) and x not in TRIVIAL_CONSTANTS
               and x not in INDEX_WIDTH_LIMITS for x in vals)


def _const_value(node: ast.AST, consts: dict[str, tuple[str, object]]) -> object:
    """node's folded value (rule 4's reading: _fold with reads), or _NotConst where it does not fold."""
    try:
        return _fold(node, consts, reads=True)
    except _NotConst:
        return _NotConst


def _const_kind(node: ast.AST, consts: dict[str, tuple[str, object]]) -> bool | None:
    """Whether node, where it folds to a constant, holds one a shape may not be compared with (None: it does not
    fold). Kinds carry this as ``const`` through locals and arithmetic (_Kind)."""
    v = _const_value(node, consts)
    return None if v is _NotConst else _holds_constant(v)


def _tuple_element(node: ast.Subscript, consts: dict[str, tuple[str, object]]) -> ast.AST | None:
    """The element a literal tuple indexed by a constant picks (``(n, 16384)[1]`` is ``16384``), else None."""
    elts = node.value.elts if isinstance(node.value, ast.Tuple) else None
    if elts is None or any(isinstance(e, ast.Starred) for e in elts):
        return None
    i = _const_value(node.slice, consts)
    return elts[i] if isinstance(i, int) and not isinstance(i, bool) and -len(elts) <= i < len(elts) else None


def _arith(node: ast.AST, left: ast.AST, op: ast.operator, right: ast.AST, lk: _Kind, rk: _Kind,
           consts: dict[str, tuple[str, object]]) -> _Kind:
    """The kind of ``left op right`` (scalars; host code and CuTe bodies): tainted if a side is; mixed if a side is,
    or if it is tainted and the other side holds a constant other than a factor (scaling cannot map one shape onto
    0, 1 or -1) or the halving // 2 (x[:, :F]); const where untainted and holding one."""
    taint, mixed = lk.taint or rk.taint, lk.mixed or rk.mixed
    if taint and isinstance(op, ast.Mult):   # scaling by a fraction maps a shape onto 1 (n * (1 / 16384) == 1)
        mixed = mixed or any(isinstance(c, float) and not c.is_integer() for side in (left, right)
                             for c in _bad_constants(side, consts) if isinstance(c, (int, float)))
    if taint and not isinstance(op, ast.Mult):
        for side, sk in ((left, lk), (right, rk)):
            bad = _bad_constants(side, consts)
            halving = isinstance(op, ast.FloorDiv) and side is right and bad == [2]
            if (bad and not halving) or (sk.const and not bad):   # a literal, or a local holding one (k = 5376)
                mixed = True
    folded = _const_kind(node, consts)
    return _Kind("S", taint, mixed, const=folded if folded is not None else (lk.const or rk.const) and not taint)


def _is_const(node: ast.AST, consts: dict[str, tuple[str, object]]) -> bool:
    try:
        _fold(node, consts)
        return True
    except _NotConst:
        return False


def _bad_constants(node: ast.AST, consts: dict[str, tuple[str, object]]) -> list[int]:
    """Integer constants (maximal folded subexpressions) in node that a shape may not be compared with (``consts``:
    what a name folds to there)."""
    out: list[int] = []

    def walk(n: ast.AST) -> None:
        try:
            v = _fold(n, consts, reads=True)
        except _NotConst:
            v = _NotConst
        if v is not _NotConst:
            out.extend(x for x in (v if isinstance(v, tuple) else (v,)) if _holds_constant(x))
            return
        if isinstance(n, (ast.BinOp,)):
            walk(n.left)
            walk(n.right)
        elif isinstance(n, ast.UnaryOp):
            walk(n.operand)
        elif isinstance(n, ast.BoolOp):
            for x in n.values:
                walk(x)
        elif isinstance(n, ast.IfExp):
            for x in (n.test, n.body, n.orelse):
                walk(x)
        elif isinstance(n, ast.Tuple):
            for x in n.elts:
                walk(x)
        elif isinstance(n, ast.Compare):
            for x in (n.left, *n.comparators):
                walk(x)
        elif isinstance(n, ast.Call):
            for x in n.args:
                walk(x)

    walk(node)
    return out


# ----------------------------------------------------------------------------------------------------- the module
class _Module:
    def __init__(self, tree: ast.Module):
        self.tree = tree
        self.triton: set[str] = set()     # aliases of the triton module
        self.tl: set[str] = set()         # aliases of triton.language
        self.api: set[str] = set()        # aliases of rsi.kernel
        self.cutlass: set[str] = set()    # aliases of cutlass (CuTe DSL, rsi.harness.static_cute)
        self.cute: set[str] = set()       # aliases of cutlass.cute
        self.cute_fns: dict[str, str] = {}                 # CuTe function -> "kernel" | "jit"
        self.cute_defs: dict[str, ast.FunctionDef] = {}
        self.future = False               # from __future__ import annotations
        self.consts: dict[str, tuple[str, object]] = {}
        self.jit: dict[str, ast.FunctionDef] = {}
        self.host: dict[str, ast.FunctionDef] = {}
        self.bound: set[str] = set()
        self.params: dict[str, dict[str, _Kind]] = {}  # host function -> parameter -> kind (from call sites)
        self.changed = False

    @property
    def aliases(self) -> set[str]:
        return self.triton | self.tl | self.api | self.cutlass | self.cute

    # ---- rule 1
    def scan(self) -> None:
        for i, stmt in enumerate(self.tree.body):
            if i == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) \
                    and isinstance(stmt.value.value, str):
                continue  # docstring
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                self._import(stmt)
            elif isinstance(stmt, ast.Assign):
                self._assign(stmt)
            elif isinstance(stmt, ast.FunctionDef):
                self._bind(stmt.name, stmt)
                cute_kind = static_cute.decorator(self, stmt)
                if cute_kind:
                    self.cute_fns[stmt.name], self.cute_defs[stmt.name] = cute_kind, stmt
                elif self._is_jit(stmt):
                    self.jit[stmt.name] = stmt
                else:
                    self.host[stmt.name] = stmt
            elif isinstance(stmt, ast.AnnAssign):
                raise _Reject("annotated module-level assignment: the annotation is evaluated at import time; "
                              "write NAME = <constant>", stmt)
            elif isinstance(stmt, ast.ClassDef):
                raise _Reject("class definition (ClassDef) in a candidate: state and subclass tricks are not allowed; "
                              "a module holds only a docstring, imports, constants and def statements", stmt)
            elif isinstance(stmt, ast.AsyncFunctionDef):
                raise _Reject(f"async def {stmt.name}: not allowed in a candidate", stmt)
            else:
                raise _Reject(f"module-level statement {type(stmt).__name__}: a candidate module may hold only a "
                              "docstring, imports, constants and def statements (no work at import time)", stmt)
        if (self.cutlass or self.cute) and (self.triton or self.tl):
            raise _Reject("the module imports both triton and cutlass: a candidate uses one kernel language, Triton or "
                          "CuTe DSL")
        if (self.cutlass or self.cute) and self.future:
            raise _Reject("from __future__ import annotations in a CuTe DSL candidate: CuTe reads annotations "
                          "(cutlass.Constexpr) when it compiles, so they must stay objects")
        entry = self.jit.get(ENTRY_POINT) or self.cute_defs.get(ENTRY_POINT) or self.host.get(ENTRY_POINT)
        if entry is None:
            raise _Reject(f"no entry point: define `def {ENTRY_POINT}(<inputs>, NAME=default, ...)` at module level")
        if ENTRY_POINT in self.jit or ENTRY_POINT in self.cute_fns:
            raise _Reject(f"`{ENTRY_POINT}` must be a host function, not a kernel", entry)

    def _bind(self, name: str, node: ast.AST) -> None:
        if name.startswith("__"):
            raise _Reject(f"name {name!r}: dunder names are not allowed", node)
        if name in _PY_BUILTINS:
            raise _Reject(f"module-level name {name!r} shadows a Python builtin", node)
        if name in self.bound:
            raise _Reject(f"name {name!r} is bound twice at module level", node)
        self.bound.add(name)

    def _import(self, stmt: ast.Import | ast.ImportFrom) -> None:
        if isinstance(stmt, ast.ImportFrom):
            mod = stmt.module or ""
            if stmt.level:
                raise _Reject(f"relative import: {IMPORT_RULE}", stmt)
            if mod == "__future__":
                for a in stmt.names:
                    if a.name not in FUTURE_FEATURES or a.asname:
                        raise _Reject(f"from __future__ import {a.name}: only `annotations` is allowed", stmt)
                self.future = True
                return
            for a in stmt.names:
                full = f"{mod}.{a.name}"
                if full == "triton.language":
                    self.tl.add(a.asname or a.name)
                elif full == "rsi.kernel":
                    self.api.add(a.asname or a.name)
                elif full == "cutlass.cute":
                    self.cute.add(a.asname or a.name)
                else:
                    _reject_import(full if mod in ("triton", "rsi", "cutlass") else mod, stmt)
                self._bind(a.asname or a.name, stmt)
            return
        for a in stmt.names:
            if a.name == "triton":
                if (a.asname or "triton") not in self.triton:
                    self.triton.add(a.asname or "triton")
                    self._bind(a.asname or "triton", stmt)
            elif a.name == "triton.language":
                if a.asname:
                    self.tl.add(a.asname)
                    self._bind(a.asname, stmt)
                elif "triton" not in self.triton:  # binds `triton`; triton.language.x is then rooted at it
                    self.triton.add("triton")
                    self._bind("triton", stmt)
            elif a.name == "rsi.kernel" and a.asname:
                self.api.add(a.asname)
                self._bind(a.asname, stmt)
            elif a.name == "rsi.kernel":
                raise _Reject("`import rsi.kernel` binds `rsi`: write `from rsi import kernel as K`", stmt)
            elif a.name == "cutlass.cute" and a.asname:
                self.cute.add(a.asname)
                self._bind(a.asname, stmt)
            elif static_cute.is_cute_import(a.name):  # binds `cutlass`; cutlass.cute.x is then rooted at it
                if "cutlass" not in self.cutlass:
                    self.cutlass.add(a.asname or "cutlass")
                    self._bind(a.asname or "cutlass", stmt)
            else:
                _reject_import(a.name, stmt)

    def _assign(self, stmt: ast.Assign) -> None:
        if len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name):
            raise _Reject(f"module-level assignment to {_src(stmt.targets[0])}: bind one plain name to a constant "
                          "(NAME = <constant>)", stmt)
        name = stmt.targets[0].id
        self._bind(name, stmt)
        self.consts[name] = self._module_value(stmt.value, name)

    def _module_value(self, node: ast.AST, name: str) -> tuple[str, object]:
        try:
            v = _fold(node, self.consts)
            return ("T" if isinstance(v, tuple) else "S", v)
        except _NotConst:
            pass
        if isinstance(node, ast.Call) and not node.keywords and len(node.args) == 1 and self._is_tl(node.func,
                                                                                               "constexpr"):
            try:
                return "S", _fold(node.args[0], self.consts)
            except _NotConst:
                pass
        if isinstance(node, ast.Attribute):
            root, attrs = _chain(node)
            if isinstance(root, ast.Name) and len(attrs) == 1 and (
                    (root.id in self.api and attrs[0] in API_DTYPES) or (root.id in self.tl and attrs[0] in TL_DTYPES)):
                return "M", None
            if isinstance(root, ast.Name) and root.id in self.triton and attrs[:1] == ["language"] \
                    and len(attrs) == 2 and attrs[1] in TL_DTYPES:
                return "M", None
        raise _Reject(f"module-level value {name} = {_src(node)} is not an immutable constant (module state could "
                      "cache results across calls); allowed: numbers, strings, booleans, None, tuples of them, "
                      "arithmetic of them, earlier constants, tl.constexpr(<constant>), K.<dtype>, tl.<dtype>", node)

    def _is_tl(self, node: ast.AST, attr: str) -> bool:
        """node is tl.<attr> or triton.language.<attr> (alias-aware)."""
        root, attrs = _chain(node)
        if not isinstance(root, ast.Name):
            return False
        return (root.id in self.tl and attrs == [attr]) or (root.id in self.triton and attrs == ["language", attr])

    # ---- decorators (rule 2)
    def _is_jit(self, fn: ast.FunctionDef) -> bool:
        if not fn.decorator_list:
            return False
        if len(fn.decorator_list) > 1:
            raise _Reject(f"{fn.name}() has {len(fn.decorator_list)} decorators: a kernel takes exactly @triton.jit "
                          "(no triton.autotune or triton.heuristics: configs are the search's job)", fn)
        d = fn.decorator_list[0]
        target = d.func if isinstance(d, ast.Call) else d
        root, attrs = _chain(target)
        name = _dotted(target)
        if not (isinstance(root, ast.Name) and root.id in self.triton and attrs == ["jit"]):
            if attrs[-1:] in (["autotune"], ["heuristics"]):
                raise _Reject(f"decorator {name} is not allowed (configs are the search's job: declare tunable "
                              "launch parameters and TUNABLE instead)", d)
            raise _Reject(f"decorator {name} is not allowed: kernels take exactly @triton.jit, host functions none", d)
        if isinstance(d, ast.Call):
            if d.args:
                raise _Reject(f"decorator argument of {name}(...) on {fn.name}(): only constant keyword arguments", d)
            for kw in d.keywords:
                if kw.arg is None or not _is_const(kw.value, self.consts):
                    raise _Reject(f"decorator argument of {name}(...) on {fn.name}() is not a constant "
                                  f"({_src(kw.value)})", kw.value)
        return True


def _reject_import(mod: str, node: ast.AST) -> None:
    root = mod.split(".")[0]
    if root == "rsi":
        raise _Reject(f"imports {mod}: a candidate may not call the reference or the harness; {IMPORT_RULE}", node)
    raise _Reject(f"imports {mod}: {IMPORT_RULE}", node)


def _bound_names(body: list[ast.stmt]) -> dict[str, ast.AST]:
    """Names a function body binds (Python's rule: any binding makes a name local to the whole function)."""
    out: dict[str, ast.AST] = {}

    def targets(t: ast.AST) -> None:
        if isinstance(t, ast.Name):
            out.setdefault(t.id, t)
        elif isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                targets(e)
        elif isinstance(t, ast.Starred):
            targets(t.value)

    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    targets(t)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For)):
                targets(node.target)
    return out


def _params(fn: ast.FunctionDef) -> list[ast.arg]:
    a = fn.args
    out = [*a.posonlyargs, *a.args, *a.kwonlyargs]
    if a.vararg:
        out.append(a.vararg)
    if a.kwarg:
        out.append(a.kwarg)
    return out


class _Function:
    """What kernels and host functions share: name scoping and signature checks."""

    kind = "function"

    def __init__(self, mod: _Module, fn: ast.FunctionDef):
        self.mod, self.fn = mod, fn
        self.params = {p.arg: p for p in _params(fn)}
        self.locals = _bound_names(fn.body)
        for name, node in [*self.params.items(), *self.locals.items()]:
            if name.startswith("__"):
                raise _Reject(f"name {name!r} in {fn.name}(): dunder names are not allowed", node)
            if (name in mod.bound and name not in mod.consts) or name in _PY_BUILTINS:
                raise _Reject(f"{'parameter' if name in self.params else 'local'} {name!r} of {fn.name}() shadows "
                              f"{'a Python builtin' if name in _PY_BUILTINS else 'a module alias or function'}",
                              node)

    def check_defaults(self) -> None:
        a = self.fn.args
        for d in [*a.defaults, *(k for k in a.kw_defaults if k is not None)]:
            if not _is_const(d, self.mod.consts):
                raise _Reject(f"default argument of {self.fn.name}() is not a constant ({_src(d)}): defaults are "
                              "evaluated at import time and may only be numbers, strings, booleans, None or tuples",
                              d)


# ------------------------------------------------------------------------------------------------ kernels (rule 2)
class _Kernel(_Function):
    kind = "kernel"

    def check(self) -> None:
        fn, a = self.fn, self.fn.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs:
            raise _Reject(f"kernel {fn.name}() takes *args, **kwargs, keyword-only or positional-only parameters: "
                          "a @triton.jit kernel takes plain parameters", fn)
        self.check_defaults()
        for p in _params(fn):
            ann = p.annotation
            if ann is None or (isinstance(ann, ast.Constant) and isinstance(ann.value, str)) \
                    or self.mod._is_tl(ann, "constexpr"):
                continue
            raise _Reject(f"annotation {_src(ann)} of {fn.name}({p.arg}) is evaluated at import time: a kernel "
                          "parameter's annotation may only be tl.constexpr", ann)
        if fn.returns is not None and not isinstance(fn.returns, ast.Constant):
            raise _Reject(f"return annotation of {fn.name}() is evaluated at import time: leave it out", fn.returns)
        self.body(fn.body)

    def body(self, stmts: list[ast.stmt]) -> None:
        for i, s in enumerate(stmts):
            self.stmt(s, docstring=i == 0 and stmts is self.fn.body)

    def stmt(self, s: ast.stmt, docstring: bool = False) -> None:
        if isinstance(s, ast.Assign):
            for t in s.targets:
                self.target(t)
            self.expr(s.value)
        elif isinstance(s, ast.AugAssign):
            self.target(s.target, plain=True)
            self.expr(s.value)
        elif isinstance(s, ast.AnnAssign):
            self.target(s.target, plain=True)
            if s.value is None or not self.mod._is_tl(s.annotation, "constexpr"):
                raise _Reject(f"annotated assignment in kernel {self.fn.name}(): only `NAME: tl.constexpr = value`",
                              s)
            self.expr(s.value)
        elif isinstance(s, (ast.If, ast.While)):
            self.expr(s.test)
            self.body(s.body)
            self.body(s.orelse)
        elif isinstance(s, ast.For):
            self.target(s.target)
            self.expr(s.iter)
            self.body(s.body)
            self.body(s.orelse)
        elif isinstance(s, ast.Return):
            if s.value is not None:
                self.expr(s.value)
        elif isinstance(s, ast.Expr):
            if docstring and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str):
                return
            if not isinstance(s.value, ast.Call):
                raise _Reject(f"expression statement {_src(s.value)} in kernel {self.fn.name}(): only calls", s)
            self.expr(s.value)
        elif isinstance(s, (ast.Pass, ast.Break, ast.Continue)):
            return
        elif isinstance(s, ast.Assert):
            raise _Reject(f"assert in kernel {self.fn.name}(): use tl.device_assert or tl.static_assert", s)
        else:
            raise _Reject(_statement_reason(s, f"kernel {self.fn.name}()"), s)

    def target(self, t: ast.AST, plain: bool = False) -> None:
        if isinstance(t, ast.Name):
            return
        if not plain and isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                self.target(e)
            return
        raise _Reject(f"assignment to {_src(t)} in kernel {self.fn.name}(): only names (and tuples of names) may "
                      "be assigned", t)

    def expr(self, node: ast.AST) -> None:
        m = self.mod
        if isinstance(node, ast.Constant):
            if node.value is None or node.value is Ellipsis or type(node.value) in (int, float, str, bool):
                return
            raise _Reject(f"constant {node.value!r} of type {type(node.value).__name__} in a kernel", node)
        if isinstance(node, ast.Name):
            n = node.id
            if n in self.params or n in self.locals or n in m.consts or n in m.jit:
                return
            if n in m.aliases:
                raise _Reject(f"module alias {n} used as a value in kernel {self.fn.name}(): use its attributes "
                              "(tl.load, ...)", node)
            if n in KERNEL_BUILTINS:
                raise _Reject(f"builtin {n} used as a value in kernel {self.fn.name}(): call it", node)
            raise _Reject(f"name {n!r} is not allowed in kernel {self.fn.name}(): a kernel may use its parameters "
                          "and locals, module constants, jit functions of the module, tl.* and the builtins "
                          f"{', '.join(sorted(KERNEL_BUILTINS))}", node)
        if isinstance(node, ast.Attribute):
            self.attribute(node)
            return
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name):
                if f.id not in m.jit and f.id not in KERNEL_BUILTINS:
                    if f.id in self.params or f.id in self.locals or f.id in m.consts or f.id in m.host:
                        raise _Reject(f"kernel {self.fn.name}() calls {f.id}: a kernel may call tl.* functions, "
                                      "@triton.jit functions of this module and the builtins "
                                      f"{', '.join(sorted(KERNEL_BUILTINS))}", node)
                    self.expr(f)  # the name's own reason (print, getattr, ...)
            elif isinstance(f, ast.Attribute):
                self.attribute(f)
            else:
                raise _Reject(f"kernel {self.fn.name}() calls the result of {_src(f)}: call tl.* functions, jit "
                              "functions and methods by name", node)
            for a in node.args:
                if isinstance(a, ast.Starred):
                    raise _Reject(f"*{_src(a.value)} in a call in kernel {self.fn.name}()", a)
                self.expr(a)
            for kw in node.keywords:
                if kw.arg is None:
                    raise _Reject(f"**{_src(kw.value)} in a call in kernel {self.fn.name}()", kw.value)
                self.expr(kw.value)
            return
        if isinstance(node, (ast.Tuple, ast.List)):
            for e in node.elts:
                if isinstance(e, ast.Starred):
                    raise _Reject(f"starred expression in kernel {self.fn.name}()", e)
                self.expr(e)
            return
        if isinstance(node, ast.BinOp):
            self.expr(node.left)
            self.expr(node.right)
            return
        if isinstance(node, ast.UnaryOp):
            self.expr(node.operand)
            return
        if isinstance(node, ast.BoolOp):
            for v in node.values:
                self.expr(v)
            return
        if isinstance(node, ast.Compare):
            self.expr(node.left)
            for c in node.comparators:
                self.expr(c)
            return
        if isinstance(node, ast.IfExp):
            for sub in (node.test, node.body, node.orelse):
                self.expr(sub)
            return
        if isinstance(node, ast.Subscript):
            self.expr(node.value)
            self.expr(node.slice)
            return
        if isinstance(node, ast.Slice):
            for sub in (node.lower, node.upper, node.step):
                if sub is not None:
                    self.expr(sub)
            return
        raise _Reject(_expression_reason(node, f"kernel {self.fn.name}()"), node)

    def attribute(self, node: ast.Attribute) -> None:
        m = self.mod
        root, attrs = _chain(node)
        for a in attrs:
            _check_attr_name(a, node)
        if isinstance(root, ast.Name) and (root.id in m.tl or root.id in m.triton):
            if root.id in m.triton:
                if attrs[:1] != ["language"] or len(attrs) < 2:
                    raise _Reject(f"{_dotted(node)} in kernel {self.fn.name}(): kernels use triton.language (tl.*) "
                                  "only", node)
                attrs = attrs[1:]
            if len(attrs) == 1 and attrs[0] in TL_KERNEL_NAMES:
                return
            if attrs[:1] == ["PropagateNan"] and len(attrs) == 2 and attrs[1] in ("ALL", "NONE"):
                return
            for prefix in TL_KERNEL_CHAINS:
                if tuple(attrs[:-1]) == prefix and _LEAF.match(attrs[-1]) and attrs[-1] not in _NOT_LEAVES:
                    return
            raise _Reject(f"{_dotted(node)} is not allowed in a kernel: kernels may use tl.<name> for the names of "
                          "Triton's language (not inline_asm_elementwise, device_print or modules), "
                          "tl.math.<fn> and tl.extra.cuda.libdevice.<fn>", node)
        if isinstance(root, ast.Name) and root.id in m.api:
            raise _Reject(f"{_dotted(node)} in kernel {self.fn.name}(): the kernel API (rsi.kernel) is for host "
                          "code; kernels use tl.*", node)
        if isinstance(root, ast.Name) and (root.id in m.jit or root.id in m.host):
            raise _Reject(f"attribute {_dotted(node)} of a function in kernel {self.fn.name}()", node)
        for a in attrs:
            if a not in KERNEL_MEMBERS:
                raise _Reject(f"attribute .{a} ({_src(node)}) is not allowed in kernel {self.fn.name}(): kernel "
                              f"values offer {', '.join(sorted(KERNEL_MEMBERS))}", node)
        self.expr(root)


# -------------------------------------------------------------------------------------- host functions (rules 3, 4)
@dataclass(frozen=True)
class _Kind:
    """What a host value is: S scalar (number, str, bool, None), T tuple of scalars (shapes), M dtype/device,
    D launch's **config (constants), O opaque (a tensor, an input, a tuple holding them: only metadata, views and
    passing along), B not yet known.
    taint: derived from an input (its sizes); mixed: tainted with a non-trivial constant folded in by arithmetic;
    alloc: may be (a view of) memory the candidate allocated (K.empty / K.scratch) or of unknown origin (a host
    function's result), not an input: its storage_offset() would tell the judge's arena from the runtime's
    torch.empty, so it is refused there; const: not tainted, and holds a constant a shape may not be compared
    with (a literal, a module constant, arithmetic on them, a local bound to one: rule 4 follows it through names,
    so ``k = 16384; if n_cols == k`` is ``if n_cols == 16384``; before the eighteenth session it passed)."""

    cat: str
    taint: bool = False
    mixed: bool = False
    alloc: bool = False
    const: bool = False

    def join(self, other: _Kind) -> _Kind:
        if self.cat == "B":
            return other
        if other.cat == "B":
            return self
        cat = self.cat if self.cat == other.cat else "O"
        taint = self.taint or other.taint
        return _Kind(cat, taint, self.mixed or other.mixed, self.alloc or other.alloc,
                     (self.const or other.const) and not taint)

    def alt(self, other: _Kind) -> _Kind:
        """One of self or other (a name bound twice, a conditional or boolean expression, a parameter from two call
        sites): as join, and where one may be shape-derived and the other a constant, mixed (the eighteenth
        session's adversary pass: `k = n; k = 16384; if m == k` passed with the constant dropped)."""
        k = self.join(other)
        if k.taint and (self.const or other.const):
            return _Kind(k.cat, k.taint, True, k.alloc)
        return k


_BOTTOM = _Kind("B")
_OPAQUE_INPUT = _Kind("O", True)


class _Host(_Function):
    kind = "host"

    def __init__(self, mod: _Module, fn: ast.FunctionDef):
        super().__init__(mod, fn)
        self.entry = fn.name == ENTRY_POINT
        self.env: dict[str, _Kind] = {}
        self.final = False

    # ---- signature
    def signature(self) -> None:
        """Check the signature; seed the kinds of the parameters (mod.params, joined later from call sites)."""
        fn = self.fn
        self.check_defaults()
        for p in _params(fn):
            if p.annotation is not None and not isinstance(p.annotation, ast.Constant):
                raise _Reject(f"annotation {_src(p.annotation)} of {fn.name}({p.arg}) is evaluated at import time: "
                              "leave it out (or write a string)", p.annotation)
        if fn.returns is not None and not isinstance(fn.returns, ast.Constant):
            raise _Reject(f"return annotation {_src(fn.returns)} of {fn.name}() is evaluated at import time: leave "
                          "it out (or write a string)", fn.returns)
        a = fn.args
        positional = [*a.posonlyargs, *a.args]
        defaults = dict(zip([p.arg for p in positional[len(positional) - len(a.defaults):]], a.defaults))
        defaults.update({p.arg: d for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None})
        kinds: dict[str, _Kind] = {}
        for name in self.params:
            if name in defaults:  # the default's kind; in a helper, joined with what every call site passes
                v = _fold(defaults[name], self.mod.consts)
                kinds[name] = _Kind("T" if isinstance(v, tuple) else "S")
            elif self.entry:  # an input of the op: a tensor, or a plain int such as `world`
                kinds[name] = _OPAQUE_INPUT
            else:
                kinds[name] = _BOTTOM  # whatever the call sites pass (opaque if none)
        if a.vararg:
            kinds[a.vararg.arg] = _OPAQUE_INPUT
        if a.kwarg:  # launch's **config holds the harness's constant config; a helper's **kwargs anything
            kinds[a.kwarg.arg] = _Kind("D") if self.entry else _OPAQUE_INPUT
        self.mod.params[fn.name] = kinds
        for name in [*self.params, *self.locals]:
            self.env.setdefault(name, _BOTTOM)
        self.consts = {k: v for k, v in self.mod.consts.items() if k not in self.env}  # what a name folds to here

    def run_pass(self) -> None:
        for name, k in self.mod.params[self.fn.name].items():
            self.assign(name, k)
        self.body(self.fn.body)

    def assign(self, name: str, k: _Kind) -> None:
        old = self.env.get(name, _BOTTOM)
        new = old.alt(k)
        if new != old:
            self.env[name] = new
            self.mod.changed = True

    def pass_to(self, call: ast.Call, callee: ast.FunctionDef) -> None:
        """Join the kinds of a call's arguments into the callee's parameters (Python's binding rules)."""
        kinds = self.mod.params[callee.name]
        a = callee.args
        positional = [p.arg for p in (*a.posonlyargs, *a.args)]
        named = positional[len(a.posonlyargs):] + [p.arg for p in a.kwonlyargs]
        spill = a.vararg.arg if a.vararg else None

        def join(name: str | None, k: _Kind) -> None:
            if name is None:
                return
            new = kinds.get(name, _BOTTOM).alt(k)
            if new != kinds.get(name, _BOTTOM):
                kinds[name] = new
                self.mod.changed = True

        for i, arg in enumerate(call.args):
            if isinstance(arg, ast.Starred):  # any number of inputs: every later positional parameter may get one
                for name in [*positional[i:], spill]:
                    join(name, _OPAQUE_INPUT)
                break
            k = self.expr(arg)
            join(positional[i] if i < len(positional) else spill, _Kind("O", k.taint, k.mixed, k.alloc) if i >= len(
                positional) else k)
        for kw in call.keywords:
            if kw.arg is None:  # **config of launch: constants; any other mapping: anything
                k = self.expr(kw.value)
                for name in named:
                    join(name, _Kind("S") if k.cat == "D" else _OPAQUE_INPUT)
                join(a.kwarg.arg if a.kwarg else None, _OPAQUE_INPUT)
                continue
            k = self.expr(kw.value)
            join(kw.arg if kw.arg in named else (a.kwarg.arg if a.kwarg else None), k)

    # ---- statements
    def body(self, stmts: list[ast.stmt]) -> None:
        for i, s in enumerate(stmts):
            self.stmt(s, docstring=i == 0 and stmts is self.fn.body)

    def stmt(self, s: ast.stmt, docstring: bool = False) -> None:
        fn = self.fn.name
        if isinstance(s, ast.Assign):
            for t in s.targets:  # patching (x.attr = ..., x[i] = ...) is the violation, whatever the value
                for sub in ast.walk(t):
                    if isinstance(sub, (ast.Attribute, ast.Subscript)) and isinstance(sub.ctx, ast.Store):
                        self.bind(sub, _BOTTOM, None)
            k = self.expr(s.value)
            for t in s.targets:
                self.bind(t, k, s.value)
        elif isinstance(s, ast.AugAssign):
            if not isinstance(s.target, ast.Name):
                self.bind(s.target, _BOTTOM, None)  # the reason for attribute / item assignment
            k = self.binop(s, ast.Name(s.target.id, ast.Load(), lineno=s.lineno, col_offset=0), s.op, s.value)
            self.assign(s.target.id, k)
        elif isinstance(s, ast.If):
            self.test(s.test)
            self.body(s.body)
            self.body(s.orelse)
        elif isinstance(s, ast.For):
            it = s.iter
            if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"
                    and it.func.id not in self.env and not it.keywords and 1 <= len(it.args) <= 3):
                raise _Reject(f"for loop over {_src(it)} in {fn}(): host code may loop only over range(...)", s)
            k = _Kind("S")
            for a in it.args:
                k = k.join(self.scalar(a, "range()"))
            if k.mixed:   # rule 4: range(n // 16384) runs its body at some shapes only
                raise _Reject(f"for loop over {_src(it)} in {fn}(): a bound computed from a shape with a constant "
                              "folded in picks a branch by shape: special-casing shapes is not allowed", s)
            if s.orelse:
                raise _Reject(f"for ... else in {fn}()", s)
            self.bind(s.target, _Kind("S", k.taint, k.mixed), None)   # it ranges over values: it holds no constant
            self.body(s.body)
        elif isinstance(s, ast.Return):
            if s.value is not None:
                self.expr(s.value)
        elif isinstance(s, ast.Raise):
            self.raise_(s)
        elif isinstance(s, ast.Expr):
            v = s.value
            if docstring and isinstance(v, ast.Constant) and isinstance(v.value, str):
                return
            if isinstance(v, (ast.Yield, ast.YieldFrom, ast.Await, ast.Lambda, ast.NamedExpr)):
                raise _Reject(_expression_reason(v, f"host code ({fn}())"), s)
            if isinstance(v, ast.Call) and isinstance(v.func, ast.Subscript):
                self.launch(v)
            elif isinstance(v, ast.Call) and static_cute.is_host_launch(self.mod, v):
                static_cute.check_host_launch(self, v)
            elif isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id in self.mod.host:
                self.expr(v)
            else:
                if isinstance(v, ast.Call):
                    self.expr(v)  # a specific reason where the call itself is not allowed
                raise _Reject(f"expression statement {_src(v)} in {fn}(): as statements, host code may only launch "
                              "kernels (kern[grid](...), K.cute_launch(fn, ...)) and call its own host functions", s)
        elif isinstance(s, (ast.Pass, ast.Break, ast.Continue)):
            return
        elif isinstance(s, ast.While):
            raise _Reject(f"while loop in host code ({fn}()): host code may loop only with for ... in range(...)", s)
        elif isinstance(s, ast.Assert):
            raise _Reject(f"assert in host code ({fn}()): raise ValueError(...) instead", s)
        elif isinstance(s, ast.AnnAssign):
            raise _Reject(f"annotated assignment in host code ({fn}()): the annotation is evaluated; write "
                          "NAME = value", s)
        else:
            raise _Reject(_statement_reason(s, f"host code ({fn}())"), s)

    def bind(self, t: ast.AST, k: _Kind, value: ast.AST | None) -> None:
        if isinstance(t, ast.Name):
            self.assign(t.id, k)
        elif isinstance(t, (ast.Tuple, ast.List)):
            if any(isinstance(e, ast.Starred) for e in t.elts):
                raise _Reject(f"starred assignment target in {self.fn.name}()", t)
            if isinstance(value, ast.Tuple) and len(value.elts) == len(t.elts):
                for e, v in zip(t.elts, value.elts):
                    self.bind(e, self.expr(v), v)
                return
            folded = _const_value(value, self.consts) if value is not None else _NotConst
            if isinstance(folded, tuple) and len(folded) == len(t.elts):   # lo, hi = LIM: each its own element
                for e, v in zip(t.elts, folded):
                    self.bind(e, _Kind("T" if isinstance(v, tuple) else "S", const=_holds_constant(v)), None)
                return
            elem = _Kind("S", k.taint, k.mixed, const=k.const) if k.cat == "T" else (_BOTTOM if k.cat == "B" else
                                                                       _Kind("O", k.taint, k.mixed, k.alloc))
            for e in t.elts:
                self.bind(e, elem, None)
        elif isinstance(t, ast.Attribute):
            raise _Reject(f"assigns attribute {_dotted(t)}: patching objects is not allowed", t)
        elif isinstance(t, ast.Subscript):
            raise _Reject(f"item assignment {_src(t)} in host code (host-side compute or a cache)", t)
        else:
            raise _Reject(f"assignment to {_src(t)} in host code", t)

    def raise_(self, s: ast.Raise) -> None:
        e = s.exc
        ok = (s.cause is None and isinstance(e, ast.Call) and isinstance(e.func, ast.Name)
              and e.func.id in HOST_EXCEPTIONS and e.func.id not in self.env and not e.keywords and len(e.args) <= 1)
        if not ok:
            raise _Reject(f"raise {_src(e) if e is not None else ''} in {self.fn.name}(): host code may only "
                          "raise ValueError(<message>) or TypeError(<message>)", s)
        for a in e.args:
            if isinstance(a, ast.JoinedStr):
                self.fstring(a)
            elif not (isinstance(a, ast.Constant) and isinstance(a.value, str)):
                raise _Reject(f"the message of raise {e.func.id}(...) must be a string or an f-string", a)

    def fstring(self, node: ast.JoinedStr) -> None:
        for v in node.values:
            if isinstance(v, ast.FormattedValue):
                k = self.expr(v.value)
                if k.cat == "O":
                    raise _Reject(f"f-string formats {_src(v.value)}, which may be a tensor (formatting reads its "
                                  "data): format sizes and constants only", v)
                if v.format_spec is not None:
                    self.fstring(v.format_spec)

    # ---- kernel launches
    def launch(self, call: ast.Call) -> None:
        sub = call.func
        assert isinstance(sub, ast.Subscript)
        if not (isinstance(sub.value, ast.Name) and sub.value.id in self.mod.jit and sub.value.id not in self.env):
            raise _Reject(f"{_src(sub)}(...) in {self.fn.name}(): only @triton.jit functions of this module are "
                          "launched as kern[grid](...)", call)
        g = self.expr(sub.slice)
        if g.cat not in ("T", "S", "B"):
            raise _Reject(f"launch grid {_src(sub.slice)} of {sub.value.id} must be a tuple of ints", sub.slice)
        self.call_args(call)

    def call_args(self, call: ast.Call) -> list[_Kind]:
        kinds = []
        for a in call.args:
            if isinstance(a, ast.Starred):
                if not (isinstance(a.value, ast.Name) and self.fn.args.vararg is not None
                        and a.value.id == self.fn.args.vararg.arg):
                    raise _Reject(f"*{_src(a.value)} in a call in {self.fn.name}(): only the function's own *args "
                                  "may be passed on", a)
                kinds.append(_OPAQUE_INPUT)
                continue
            kinds.append(self.expr(a))
        for kw in call.keywords:
            if kw.arg is None:
                if not (isinstance(kw.value, ast.Name) and self.fn.args.kwarg is not None
                        and kw.value.id == self.fn.args.kwarg.arg):
                    raise _Reject(f"**{_src(kw.value)} in a call in {self.fn.name}(): only the function's own "
                                  "**kwargs may be passed on", kw.value)
                continue
            kinds.append(self.expr(kw.value))
        return kinds

    # ---- expressions
    def scalar(self, node: ast.AST, what: str) -> _Kind:
        k = self.expr(node)
        if k.cat not in ("S", "B"):
            raise _Reject(self._compute_reason(node, what), node)
        return k

    def _compute_reason(self, node: ast.AST, what: str) -> str:
        return (f"host code computes on {_src(node)} ({what}), which may be a tensor: compute belongs in a "
                "@triton.jit kernel; arithmetic, comparisons and truth tests in host code take sizes and constants "
                "only (a plain-int input is used as int(name))")

    def name(self, node: ast.Name) -> _Kind:
        n, m = node.id, self.mod
        if n in self.env:
            k = self.env[n]
            return _OPAQUE_INPUT if k.cat == "B" and self.final else k
        if n in m.consts:
            cat, value = m.consts[n]
            return _Kind(cat, const=cat in ("S", "T") and _holds_constant(value))
        if n in m.aliases:
            raise _Reject(f"module alias {n} used as a value in {self.fn.name}(): use its allowed attributes", node)
        if n in m.jit:
            raise _Reject(f"kernel {n} used as a value in {self.fn.name}(): launch it as {n}[grid](...)", node)
        if n in m.cute_fns:
            raise _Reject(f"CuTe function {n} used as a value in {self.fn.name}(): host code runs a @cute.jit function "
                          f"with the statement K.cute_launch({n}, ...)", node)
        if n in m.host:
            raise _Reject(f"function {n} used as a value in {self.fn.name}(): call it", node)
        if n in HOST_BUILTINS or n in HOST_EXCEPTIONS:
            raise _Reject(f"builtin {n} used as a value in {self.fn.name}(): call it", node)
        raise _Reject(f"name {n!r} is not allowed in host code ({self.fn.name}()): host code may use its "
                      "parameters and locals, module constants, module functions, the aliases of triton, "
                      f"triton.language and rsi.kernel, and the builtins {', '.join(sorted(HOST_BUILTINS))}", node)

    def expr(self, node: ast.AST) -> _Kind:
        if isinstance(node, ast.Constant):
            if node.value is None or type(node.value) in (int, float, str, bool):
                return _Kind("S", const=_holds_constant(node.value))
            raise _Reject(f"constant {node.value!r} of type {type(node.value).__name__} in host code", node)
        if isinstance(node, ast.Name):
            return self.name(node)
        if isinstance(node, ast.Attribute):
            return self.attribute(node)
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.BinOp):
            return self.binop(node, node.left, node.op, node.right)
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.Not):
                k = self.test(node.operand)
                return _Kind("S", k.taint, k.mixed)
            k = self.scalar(node.operand, "unary operator")
            return k
        if isinstance(node, ast.BoolOp):
            k = _Kind("S")
            for v in node.values:
                k = k.alt(self.test(v))
            return k
        if isinstance(node, ast.Compare):
            return self.compare(node)
        if isinstance(node, ast.IfExp):
            self.test(node.test)
            return self.expr(node.body).alt(self.expr(node.orelse))
        if isinstance(node, ast.Tuple):
            k = _Kind("T")
            for e in node.elts:
                if isinstance(e, ast.Starred):
                    raise _Reject(f"starred expression in a tuple in {self.fn.name}()", e)
                ek = self.expr(e)
                taint = k.taint or ek.taint
                k = _Kind("T" if k.cat == "T" and ek.cat in ("S", "B") else "O", taint, k.mixed or ek.mixed,
                          k.alloc or ek.alloc, (k.const or ek.const) and not taint)
            return k
        if isinstance(node, ast.Subscript):
            return self.subscript(node)
        if isinstance(node, ast.JoinedStr):
            raise _Reject(f"f-string in {self.fn.name}() outside a raise message: host code formats strings only "
                          "for error messages", node)
        raise _Reject(_expression_reason(node, f"host code ({self.fn.name}())"), node)

    def binop(self, node: ast.AST, left: ast.AST, op: ast.operator, right: ast.AST) -> _Kind:
        sym = _OPSYM.get(type(op), type(op).__name__)
        lk, rk = self.expr(left), self.expr(right)
        if isinstance(op, ast.Add) and lk.cat == "T" and rk.cat == "T":
            return _Kind("T", lk.taint or rk.taint, lk.mixed or rk.mixed)  # shape tuples concatenated
        for side, k in ((left, lk), (right, rk)):
            if k.cat not in ("S", "B"):
                raise _Reject(self._compute_reason(side, f"operator {sym}"), node)
        return _arith(node, left, op, right, lk, rk, self.consts)

    def _shape_rule(self, node: ast.AST, parts: list[ast.AST], kinds: list[_Kind]) -> None:
        if not any(k.taint for k in kinds):
            return
        for part, k in zip(parts, kinds):
            if k.mixed:
                raise _Reject(f"compares {_src(part)}, a value computed from a shape with a constant folded in, in "
                              f"{_src(node)}: special-casing shapes is not allowed (compare sizes with 0, 1, -1, "
                              "the index-width limits or launch parameters)", node)
        for part, k in zip(parts, kinds):
            bad = _bad_constants(part, self.consts)
            if bad or k.const:
                what = f"the constant {bad[0]}" if bad else f"{_src(part)}, which holds a constant,"
                raise _Reject(f"compares a shape-derived value with {what} in {_src(node)}: special-casing shapes "
                              "is not allowed (only 0, 1, -1, the index-width limits 2**31 - 1, 2**31, 2**32, "
                              "2**63 - 1 and launch parameters may appear)", node)

    def compare(self, node: ast.Compare) -> _Kind:
        parts = [node.left, *node.comparators]
        kinds = [self.expr(p) for p in parts]
        for op in node.ops:
            if isinstance(op, (ast.In, ast.NotIn)):
                raise _Reject(f"`in` comparison in host code ({_src(node)}): compare with == or < instead", node)
        identity = all(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops)
        if not identity:
            cats = {k.cat for k in kinds} - {"B"}
            equality = all(isinstance(op, (ast.Eq, ast.NotEq)) for op in node.ops)
            if not (cats <= {"S"} or (equality and (cats <= {"T"} or cats <= {"M"}))):
                bad = next((p for p, k in zip(parts, kinds) if k.cat == "O"), node)
                raise _Reject(self._compute_reason(bad, "comparison"), node)
        self._shape_rule(node, parts, kinds)
        return _Kind("S", any(k.taint for k in kinds))

    def test(self, node: ast.AST) -> _Kind:
        """A truth test: the value is compared with 0 (and a tensor's truth would read its data)."""
        k = self.expr(node)
        if isinstance(node, (ast.Compare, ast.BoolOp)) or (isinstance(node, ast.UnaryOp)
                                                             and isinstance(node.op, ast.Not)):
            return k  # checked as expressions
        if k.cat not in ("S", "B"):
            raise _Reject(self._compute_reason(node, "truth test"), node)
        self._shape_rule(node, [node], [k])
        return k

    def subscript(self, node: ast.Subscript) -> _Kind:
        elt = _tuple_element(node, self.consts)    # (x.shape[0], 16384)[1] is 16384
        if elt is not None:
            self.expr(node.value)
            return self.expr(elt)
        folded = _const_kind(node, self.consts)
        if folded is not None:           # KS[0] of a module constant: its element, not the whole tuple's const
            self.expr(node.value)
            return _Kind("S", const=folded)
        vk = self.expr(node.value)
        ik, is_slice = self.index(node.slice)
        taint, mixed = vk.taint or ik.taint, vk.mixed or ik.mixed
        if vk.cat == "T":
            return _Kind("T" if is_slice else "S", taint, mixed, const=vk.const and not taint)
        if vk.cat == "S":
            return _Kind("S", taint, mixed, const=vk.const and not taint)
        if vk.cat == "D":  # launch's **config: a constant of the harness's config
            return _Kind("S")
        if vk.cat == "M":
            raise _Reject(f"subscript of {_src(node.value)} in {self.fn.name}()", node)
        return _Kind("O" if vk.cat == "O" else "B", taint, mixed, vk.alloc)

    def index(self, node: ast.AST) -> tuple[_Kind, bool]:
        """An index or slice must be made of sizes (a tensor index would be a host-side gather)."""
        if isinstance(node, ast.Slice):
            k = _Kind("S")
            for sub in (node.lower, node.upper, node.step):
                if sub is not None:
                    k = k.join(self.index_scalar(sub))
            return k, True
        if isinstance(node, ast.Tuple):
            k, sl = _Kind("S"), False
            for e in node.elts:
                ek, es = self.index(e)
                k, sl = k.join(ek), sl or es
            return k, True
        if isinstance(node, ast.Constant) and node.value in (None, Ellipsis):
            return _Kind("S"), True
        return self.index_scalar(node), False

    def index_scalar(self, node: ast.AST) -> _Kind:
        k = self.expr(node)
        if k.cat not in ("S", "B"):
            raise _Reject(f"index {_src(node)} may be a tensor (indexing with a tensor is a host-side gather): "
                          "index with sizes and constants only", node)
        return k

    def attribute(self, node: ast.Attribute) -> _Kind:
        _check_attr_name(node.attr, node)
        m, v = self.mod, node.value
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            raise _Reject(f"assigns attribute {_dotted(node)}: patching objects is not allowed", node)
        if isinstance(v, ast.Name) and v.id not in self.env:
            if v.id in m.api:
                if node.attr not in CANDIDATE_API:
                    raise _Reject(f"{v.id}.{node.attr} is not part of the kernel API: {_api_rule(v.id)}", node)
                if node.attr in API_FUNCTIONS:
                    raise _Reject(f"{v.id}.{node.attr} used as a value: call it", node)
                return _Kind("M")
            if v.id in m.triton:
                if node.attr not in TRITON_HOST_ATTRS:
                    raise _Reject(f"triton.{node.attr} is not available in host code (only triton.cdiv and "
                                  "triton.next_power_of_2; kernels are decorated with triton.jit)", node)
                raise _Reject(f"triton.{node.attr} used as a value in {self.fn.name}(): call it", node)
            if v.id in m.cutlass or v.id in m.cute:
                raise _Reject(f"{_dotted(node)} in host code ({self.fn.name}()): cutlass and cute belong in "
                              "@cute.jit / @cute.kernel functions; host code uses K.*", node)
            if v.id in m.tl:
                if node.attr not in TL_HOST_ATTRS:
                    raise _Reject(f"{v.id}.{node.attr} in host code: tl.* belongs in kernels (host code may name "
                                  "only tl dtypes and tl.constexpr)", node)
                return _Kind("M")
        k = self.expr(v)
        if node.attr == "data_ptr":
            raise _Reject("data_ptr is not allowed (it fingerprints the harness's buffers)", node)
        if node.attr not in HOST_TENSOR_ATTRS:
            raise _Reject(f"host code reads {_src(node)}: {HOST_RULE}", node)
        if node.attr == "shape":
            return _Kind("T", True, k.mixed)
        if node.attr == "ndim":
            return _Kind("S", True, k.mixed)
        return _Kind("M", k.taint)

    def call(self, node: ast.Call) -> _Kind:
        f, m, fn = node.func, self.mod, self.fn.name
        if isinstance(f, ast.Subscript):
            raise _Reject(f"kernel launch {_src(f)}(...) used as a value in {fn}(): launch kernels as statements",
                          node)
        if isinstance(f, ast.Name) and f.id in self.env:
            raise _Reject(f"{fn}() calls {f.id}, a parameter or local: host code calls only its builtins, K.*, "
                          "triton.cdiv/next_power_of_2, tensor metadata/view methods and the module's functions",
                          node)
        if isinstance(f, ast.Name):
            n = f.id
            if n in m.host:
                if n == ENTRY_POINT:
                    raise _Reject(f"{fn}() calls {ENTRY_POINT}(): the entry point is called by the harness only", node)
                self.call_args(node)
                self.pass_to(node, m.host[n])
                return _Kind("O", True, alloc=True)
            if n in m.jit:
                raise _Reject(f"kernel {n} called directly in {fn}(): launch it as {n}[grid](...)", node)
            if n in m.cute_fns:
                raise _Reject(f"CuTe function {n} called directly in {fn}(): host code runs a @cute.jit function with "
                              f"the statement K.cute_launch({n}, ...)", node)
            if n in HOST_BUILTINS:
                return self.builtin(node, n)
            if n in HOST_EXCEPTIONS:
                raise _Reject(f"{n}(...) outside a raise statement in {fn}()", node)
            self.name(f)  # the reason for a name that is not allowed at all
            raise _Reject(f"{fn}() calls {n}", node)
        if isinstance(f, ast.Attribute):
            _check_attr_name(f.attr, f)
            v = f.value
            if isinstance(v, ast.Name) and v.id not in self.env and v.id in m.aliases:
                return self.alias_call(node, v.id, f.attr)
            k = self.expr(v)
            meth = f.attr
            if meth == "data_ptr":
                raise _Reject("data_ptr is not allowed (it fingerprints the harness's buffers)", node)
            if meth == "storage_offset" and k.alloc:
                raise _Reject(f"{_src(f)}(): storage_offset() of memory the candidate allocated (K.empty, "
                              "K.scratch) or a host function returned is not allowed: it differs between the judge's "
                              "arena and the runtime's torch.empty, so it would tell them apart (inputs only)", node)
            if meth not in HOST_TENSOR_METHODS:
                raise _Reject(f"host code calls {_src(f)}(): compute belongs in a @triton.jit kernel; {HOST_RULE}",
                              node)
            if k.cat in ("S", "M"):
                raise _Reject(f"{_src(f)}() on {_src(v)}, which is not a tensor", node)
            for ak in self.call_args(node):
                if ak.cat == "O":
                    raise _Reject(f"{_src(f)}() takes sizes, dims and dtypes, not tensors", node)
            if meth in ("stride", "size"):
                return _Kind("S" if node.args else "T", True, k.mixed)
            if meth in HOST_SIZE_METHODS:
                return _Kind("S", True, k.mixed)
            return _Kind("O", k.taint, k.mixed, k.alloc)
        raise _Reject(f"{fn}() calls the result of {_src(f)}: call functions and methods by name", node)

    def alias_call(self, node: ast.Call, alias: str, attr: str) -> _Kind:
        m = self.mod
        if alias in m.api:
            if attr not in CANDIDATE_API:
                raise _Reject(f"{alias}.{attr} is not part of the kernel API: {_api_rule(alias)}", node)
            if attr not in API_FUNCTIONS:
                raise _Reject(f"{alias}.{attr} is a dtype, not a function", node)
            if attr in static_cute.LAUNCHES:
                raise _Reject(f"{alias}.{attr}(...) used as a value in {self.fn.name}(): launch as a statement",
                              node)
            kinds = self.call_args(node)
            if attr in ("empty", "empty_like", "scratch"):
                return _Kind("O", any(k.taint for k in kinds), alloc=True)
            return self._size_fn(node, f"{alias}.{attr}")
        if alias in m.triton:
            if attr not in TRITON_HOST_CALLS:
                raise _Reject(f"host code calls triton.{attr}: only triton.cdiv and triton.next_power_of_2", node)
            return self._size_fn(node, f"triton.{attr}")
        if alias in m.cutlass or alias in m.cute:
            raise _Reject(f"host code calls {alias}.{attr}: cutlass and cute belong in @cute.jit / @cute.kernel "
                          "functions; host code runs them with K.cute_launch", node)
        raise _Reject(f"host code calls {alias}.{attr}: tl.* belongs in kernels", node)

    def _size_fn(self, node: ast.Call, name: str) -> _Kind:
        if node.keywords:
            raise _Reject(f"{name}() takes positional arguments", node)
        k, holds = _Kind("S"), False
        for a in node.args:
            if isinstance(a, ast.Starred):
                raise _Reject(f"*{_src(a.value)} in {name}()", a)
            ak = self.scalar(a, f"argument of {name}()")
            k = k.join(ak)
            holds = holds or ak.const or bool(_bad_constants(a, self.consts))
        return _Kind("S", k.taint, k.mixed or (k.taint and holds), const=k.const)

    def builtin(self, node: ast.Call, n: str) -> _Kind:
        if node.keywords:
            raise _Reject(f"{n}() with keyword arguments in host code", node)
        if any(isinstance(a, ast.Starred) for a in node.args):
            raise _Reject(f"{n}(*...) in host code", node)
        if n == "range":
            raise _Reject("range() in host code is allowed only as a for-loop iterable", node)
        if len(node.args) != 1 and n in ("len", "int", "float", "bool", "abs", "tuple"):
            raise _Reject(f"{n}() takes one argument here", node)
        if n == "len":
            k = self.expr(node.args[0])
            folded = _const_kind(node, self.consts)   # len('x' * 2048)
            return _Kind("S", k.taint or k.cat == "O", k.mixed, const=bool(folded))
        if n == "int":
            a = node.args[0]
            k = self.expr(a)
            if k.cat == "O" and not (isinstance(a, ast.Name) and a.id in self.params):
                raise _Reject(f"int() of {_src(a)}, which may be a tensor (int() would read its data on the host): "
                              "int() converts plain-int parameters (int(world)) and sizes only", node)
            if k.cat not in ("S", "O", "B"):
                raise _Reject(f"int() of {_src(a)}", node)
            # int(parameter): a plain-int input; were it a tensor, int() fails unless it has exactly one element
            folded = _const_kind(node, self.consts)
            return _Kind("S", k.taint or k.cat == "O", k.mixed,
                         const=(k.const and not k.taint and k.cat != "O") if folded is None else folded)
        if n == "tuple":
            k = self.expr(node.args[0])
            if k.cat not in ("T", "B"):
                raise _Reject(f"tuple() of {_src(node.args[0])}: only of a shape or a tuple of sizes", node)
            return _Kind("T", k.taint, k.mixed, const=k.const)
        if n in ("min", "max"):
            if not node.args:
                raise _Reject(f"{n}() without arguments", node)
            kinds = [self.expr(a) for a in node.args]
            for a, k in zip(node.args, kinds):
                if k.cat not in ("S", "B") and not (len(node.args) == 1 and k.cat == "T"):
                    raise _Reject(self._compute_reason(a, f"{n}()"), node)
            taint = any(k.taint for k in kinds)
            mixed = any(k.mixed for k in kinds) or (taint and (bool(_bad_constants(node, self.consts))
                                                               or any(k.const for k in kinds)))
            return _Kind("S", taint, mixed, const=not taint and any(k.const for k in kinds))
        k = self.scalar(node.args[0], f"{n}()")  # float, bool, abs
        folded = _const_kind(node, self.consts)
        return _Kind("S", k.taint, k.mixed, const=k.const if folded is None else folded)


_OPSYM = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**",
          ast.LShift: "<<", ast.RShift: ">>", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.MatMult: "@"}


def _api_rule(alias: str) -> str:
    return ("a candidate may use only " + ", ".join(f"{alias}.{n}" for n in sorted(API_FUNCTIONS))
            + " and the dtypes " + ", ".join(f"{alias}.{n}" for n in sorted(API_DTYPES)))


def _statement_reason(s: ast.stmt, where: str) -> str:
    name = type(s).__name__
    if isinstance(s, (ast.Try, getattr(ast, "TryStar", ast.Try))):
        return f"try/except in {where}: an exception handler could hide a failing kernel behind a fallback"
    if isinstance(s, (ast.With, ast.AsyncWith)):
        return f"with statement in {where}: streams, devices and graph capture are not allowed"
    if isinstance(s, (ast.Global, ast.Nonlocal)):
        return f"{name.lower()} statement in {where}: mutable state across calls (result caching) is not allowed"
    if isinstance(s, (ast.Import, ast.ImportFrom)):
        mod = s.module if isinstance(s, ast.ImportFrom) else s.names[0].name
        if (mod or "").split(".")[0] == "rsi" and mod != "rsi.kernel":
            return f"imports {mod} in {where}: a candidate may not call the reference or the harness; {IMPORT_RULE}"
        return f"import of {mod} in {where}: imports belong at module level; {IMPORT_RULE}"
    if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return f"nested {name} {s.name} in {where}: define functions at module level"
    if isinstance(s, ast.Delete):
        return f"del statement in {where}"
    return f"statement {name} is not allowed in {where}"


def _expression_reason(node: ast.AST, where: str) -> str:
    if isinstance(node, ast.Lambda):
        return f"lambda in {where}: define functions at module level"
    if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
        return f"comprehension ({type(node).__name__}) in {where}: write the loop out"
    if isinstance(node, (ast.List, ast.Dict, ast.Set)):
        return (f"{type(node).__name__.lower()} display {_src(node)} in {where}: a mutable container could cache "
                "results; use a tuple")
    if isinstance(node, ast.NamedExpr):
        return f"assignment expression (:=) in {where}"
    if isinstance(node, (ast.Await, ast.Yield, ast.YieldFrom)):
        return f"{type(node).__name__.lower()} in {where}"
    if isinstance(node, ast.JoinedStr):
        return f"f-string in {where}"
    if isinstance(node, ast.Starred):
        return f"starred expression in {where}"
    return f"expression {type(node).__name__} ({_src(node)}) is not allowed in {where}"


def check_source(source: str) -> StaticResult:
    """Return ok, or the first violation with its line."""
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        return StaticResult(False, f"syntax error: {e.msg}", e.lineno or 0)
    try:
        mod = _Module(tree)
        mod.scan()
        hosts: list[_Host] = []
        for stmt in tree.body:
            if isinstance(stmt, ast.FunctionDef):
                if stmt.name in mod.jit:
                    _Kernel(mod, stmt).check()
                elif stmt.name in mod.cute_fns:
                    static_cute.CuteFunction(mod, stmt).check()
                else:
                    hosts.append(_Host(mod, stmt))
                    hosts[-1].signature()
        # value kinds only grow (join) and every check is monotone in them: iterate over all host functions (call
        # sites feed parameters) to the fixpoint, then a final pass in which names still unknown count as opaque
        for _ in range(64):
            mod.changed = False
            for h in hosts:
                h.run_pass()
            if not mod.changed:
                break
        else:
            raise _Reject("host code too intricate to check (value kinds did not settle)")
        for h in hosts:
            h.final = True
            h.run_pass()
    except _Reject as r:
        return StaticResult(False, r.reason, r.line)
    except RecursionError:
        return StaticResult(False, "source nested too deeply to check", 0)
    return StaticResult(True)


# the CuTe DSL rules build on the helpers above, so they are imported after them (static_cute imports this module)
from rsi.harness import static_cute
