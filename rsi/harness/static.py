"""Static checks on candidate source, on the AST (not regex). Fail closed: anything not understood is rejected.

A candidate is a module whose entry point ``launch(*inputs, **config)`` allocates its outputs and launches
Triton kernels. Host code may only allocate (``torch.empty*``), take views, compute launch geometry and launch
``@triton.jit`` kernels. Kernel bodies (functions decorated with ``triton.jit``) may use Triton's language freely,
but not inline assembly (it could read ``%globaltimer``).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from rsi.contract import ENTRY_POINT

ALLOWED_IMPORTS = ("torch", "triton", "triton.language", "math", "typing", "__future__")
ALLOWED_IMPORT_PREFIXES = ("triton.language.",)

# torch.<name> that host code may call or read: allocation, dtypes and helpers that compute nothing
ALLOWED_TORCH = {
    "empty", "empty_like", "empty_strided", "Tensor", "Size", "dtype", "device",
    "bfloat16", "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool",
    "float8_e4m3fn", "float8_e5m2",
}
# tensor methods host code may call: metadata and pure views (no arithmetic, no copies, no host syncs)
ALLOWED_TENSOR_METHODS = {
    "stride", "size", "numel", "dim", "is_contiguous", "element_size", "view", "view_as", "as_strided",
    "unsqueeze", "squeeze", "transpose", "permute", "narrow", "select", "expand", "unflatten", "chunk", "split",
    "unbind", "t", "new_empty", "storage_offset",
}
BANNED_NAMES = {
    "time", "perf_counter", "perf_counter_ns", "monotonic", "process_time", "Event", "Stream", "stream",
    "current_stream", "default_stream", "set_stream", "synchronize", "elapsed_time", "record_event", "wait_stream",
    "CUDAGraph", "graph", "Thread", "threading", "multiprocessing", "concurrent", "subprocess", "socket", "os",
    "sys", "open", "exec", "eval", "compile", "__import__", "globals", "locals", "vars", "getattr", "setattr",
    "delattr", "breakpoint", "input", "id", "importlib", "pickle", "ctypes", "signal", "requests", "urllib",
    "http", "shutil", "pathlib", "inline_asm_elementwise", "reference", "oracle", "rsi", "functools", "lru_cache",
    "manual_seed", "set_rng_state",
}
TIMER_MODULES = {"time", "timeit", "datetime"}
TIMER_WORDS = {"Event", "elapsed_time", "perf_counter", "perf_counter_ns", "monotonic", "process_time", "do_bench",
               "synchronize", "record"}
STREAM_WORDS = {"Stream", "stream", "current_stream", "set_stream", "wait_stream", "default_stream", "ExternalStream"}


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


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return _dotted(node.value) + "." + node.attr
    return "?"


def _is_triton_jit(fn: ast.FunctionDef) -> bool:
    for d in fn.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        if _dotted(target) in ("triton.jit", "jit", "triton.autotune", "triton.heuristics"):
            return True
    return False


def _is_constant_expr(node: ast.AST) -> bool:
    """Module-level values may only be immutable constants (no containers that could cache results)."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Tuple):
        return all(_is_constant_expr(e) for e in node.elts)
    if isinstance(node, ast.UnaryOp):
        return _is_constant_expr(node.operand)
    if isinstance(node, ast.BinOp):
        return _is_constant_expr(node.left) and _is_constant_expr(node.right)
    if isinstance(node, ast.Call) and _dotted(node.func) in ("tl.constexpr", "triton.language.constexpr"):
        return all(_is_constant_expr(a) for a in node.args)
    # e.g. DTYPE = tl.bfloat16
    return isinstance(node, ast.Attribute) and _dotted(node).split(".")[0] in ("tl", "torch", "triton")


def _mentions_shape(node: ast.AST) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and sub.attr in ("shape",):
            return True
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr in ("size", "numel"):
            return True
    return False


class _Checker(ast.NodeVisitor):
    def __init__(self) -> None:
        self.tl_aliases = {"tl"}
        self.in_jit = 0

    # -- imports
    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self._check_import(a.name, node)
            if a.name == "triton.language" and a.asname:
                self.tl_aliases.add(a.asname)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        mod = node.module or ""
        if node.level:
            raise _Reject("relative import", node)
        self._check_import(mod, node)
        for a in node.names:
            if a.name in BANNED_NAMES or a.name == "*":
                raise _Reject(f"imports banned name {a.name!r} from {mod}", node)

    def _check_import(self, mod: str, node: ast.AST) -> None:
        root = mod.split(".")[0]
        if root == "rsi":
            raise _Reject(f"imports {mod}: candidates may not call the reference or the harness", node)
        if root in TIMER_MODULES:
            raise _Reject(f"imports timer module {mod}", node)
        if mod in ALLOWED_IMPORTS or mod.startswith(ALLOWED_IMPORT_PREFIXES):
            return
        if mod.startswith("torch."):
            raise _Reject(f"imports {mod}: only torch allocation is allowed in host code", node)
        raise _Reject(f"imports {mod}: not in the allowed set {ALLOWED_IMPORTS}", node)

    # -- state and control flow
    def visit_Try(self, node: ast.AST) -> None:
        raise _Reject("try/except: an exception handler could hide a failing kernel behind a fallback", node)

    visit_TryStar = visit_Try

    def visit_Global(self, node: ast.AST) -> None:
        raise _Reject("global statement: mutable state across calls (result caching)", node)

    visit_Nonlocal = visit_Global

    def visit_With(self, node: ast.With) -> None:
        for item in node.items:
            if any(w in _dotted(item.context_expr.func if isinstance(item.context_expr, ast.Call)
                                else item.context_expr) for w in STREAM_WORDS):
                raise _Reject("uses a CUDA stream context", node)
        raise _Reject("with statement in a candidate (streams, devices, graph capture are not allowed)", node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in TIMER_WORDS:
            raise _Reject(f"reads or patches a timer ({_dotted(node)})", node)
        if node.attr.startswith("__"):
            raise _Reject(f"dunder attribute access {node.attr!r}", node)
        if node.attr in STREAM_WORDS:
            raise _Reject(f"touches CUDA streams ({_dotted(node)})", node)
        if node.attr in BANNED_NAMES and _dotted(node).split(".")[0] not in self.tl_aliases | {"triton"}:
            raise _Reject(f"uses banned attribute {_dotted(node)}", node)
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            raise _Reject(f"assigns attribute {_dotted(node)}: patching objects is not allowed", node)
        if node.attr == "inline_asm_elementwise":
            raise _Reject("inline assembly in a kernel", node)
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in BANNED_NAMES:
            if node.id in STREAM_WORDS:
                raise _Reject(f"touches CUDA streams ({node.id})", node)
            raise _Reject(f"uses banned name {node.id!r}", node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if isinstance(node.ctx, (ast.Store, ast.Del)) and not self.in_jit:
            raise _Reject("item assignment in host code (host-side compute or a cache)", node)
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        for d in node.args.defaults + node.args.kw_defaults:
            if d is not None and isinstance(d, (ast.List, ast.Dict, ast.Set, ast.Call)):
                raise _Reject(f"mutable default argument in {node.name}() (a cache across calls)", d)
        jit = _is_triton_jit(node)
        self.in_jit += jit
        for d in node.decorator_list:
            name = _dotted(d.func if isinstance(d, ast.Call) else d)
            if name not in ("triton.jit", "jit", "triton.autotune", "triton.heuristics"):
                raise _Reject(f"decorator {name!r} is not allowed", d)
        for stmt in node.body:
            self.visit(stmt)
        self.in_jit -= jit

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        raise _Reject("class definition in a candidate (state or subclass tricks)", node)

    def visit_Compare(self, node: ast.Compare) -> None:
        if not self.in_jit:
            sides = [node.left, *node.comparators]
            if any(_mentions_shape(s) for s in sides) and any(
                isinstance(s, ast.Constant) and isinstance(s.value, int) and not isinstance(s.value, bool)
                and s.value > 1 for s in sides
            ):
                raise _Reject("compares a shape with a literal size: special-casing shapes is not allowed", node)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        parts = set(_dotted(node.func).split("."))
        if parts & STREAM_WORDS:
            raise _Reject(f"touches CUDA streams ({_dotted(node.func)})", node)
        if parts & TIMER_WORDS:
            raise _Reject(f"reads or patches a timer ({_dotted(node.func)})", node)
        if not self.in_jit:
            self._check_host_call(node)
        self.generic_visit(node)

    def _check_host_call(self, node: ast.Call) -> None:
        func = node.func
        name = _dotted(func)
        root = name.split(".")[0]
        if root == "torch":
            parts = name.split(".")
            if len(parts) != 2 or parts[1] not in ALLOWED_TORCH:
                raise _Reject(f"host code calls {name}: only allocation (torch.empty*) is allowed outside kernels", node)
            return
        if root in self.tl_aliases and name not in (f"{root}.cdiv",):
            return  # tl.constexpr etc. in host code are harmless
        if root == "triton":
            if name in ("triton.cdiv", "triton.next_power_of_2"):
                return
            raise _Reject(f"host code calls {name}", node)
        if isinstance(func, ast.Attribute) and func.attr not in ALLOWED_TENSOR_METHODS:
            import torch  # local: the check list comes from the installed torch

            if hasattr(torch.Tensor, func.attr) or func.attr in ("item", "tolist", "cpu", "numpy", "cuda", "to"):
                raise _Reject(f"host code calls tensor method .{func.attr}(): compute belongs in a kernel", node)


def check_source(source: str) -> StaticResult:
    """Return ok, or the first violation with its line."""
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        return StaticResult(False, f"syntax error: {e.msg}", e.lineno or 0)
    try:
        for stmt in tree.body:
            if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                value = stmt.value
                if value is not None and not _is_constant_expr(value):
                    raise _Reject("module-level value that is not an immutable constant (a cache of results?)", stmt)
            elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                pass  # docstring
            elif not isinstance(stmt, (ast.Import, ast.ImportFrom, ast.FunctionDef)):
                raise _Reject(f"module-level statement {type(stmt).__name__} (no work at import time)", stmt)
        entry = [s for s in tree.body if isinstance(s, ast.FunctionDef) and s.name == ENTRY_POINT]
        if not entry:
            raise _Reject(f"no entry point: define `def {ENTRY_POINT}(*inputs, **config)` at module level")
        if _is_triton_jit(entry[0]):
            raise _Reject(f"`{ENTRY_POINT}` must be a host function, not a Triton kernel", entry[0])
        _Checker().visit(tree)
    except _Reject as r:
        return StaticResult(False, r.reason, r.line)
    return StaticResult(True)
