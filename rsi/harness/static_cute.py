"""Static rules of the second kernel language, CuTe DSL (``nvidia-cutlass-dsl``; docs/cute.md), applied by
``rsi.harness.static``. An allow-list like the Triton rules: anything not listed here is rejected.

A CuTe candidate is a module like a Triton one (docstring, imports, constants, def statements, a host ``launch``)
that imports ``cutlass`` and ``cutlass.cute`` (``import cutlass``, ``import cutlass.cute as cute``, ``from cutlass
import cute``, any alias) instead of triton: a module uses one kernel language. CuTe reads annotations when it
compiles (``cutlass.Constexpr``), so a CuTe module has no ``from __future__ import annotations``.

C1. CuTe functions are decorated exactly ``@cute.kernel`` (device code, launched) or ``@cute.jit`` (host-side JIT
    code that launches kernels, or a device helper called from a kernel): bare, the only decorator. Plain
    parameters with constant defaults; annotations absent, ``cutlass.Constexpr``, or a type of ``CUTE_TYPES`` on
    cute / ``DTYPES`` on cute or cutlass (``cute.Tensor``, ``cutlass.Float32``; ``cute.CopyAtom``,
    ``cute.TiledMma`` and ``cute.ComposedLayout`` carry TMA atoms, tiled MMAs and swizzled layouts from a
    ``@cute.jit`` function to its kernel); no return annotation.
C2. Bodies are traced as Python when K compiles them, inside the producer. Statements as in a Triton kernel (assign,
    augmented assign, if, for, while, return, break, continue, pass, calls) plus element stores ``t[i] = v``;
    names: parameters, locals, module constants, the module's CuTe functions, the builtins ``KERNEL_BUILTINS``.
    Attributes: ``cute.<CUTE_NAMES>``, ``cute.arch.<CUTE_ARCH>``, ``cute.math.<CUTE_MATH>``,
    ``cute.nvgpu.CopyUniversalOp``, ``cute.ReductionOp.<op>``, ``cutlass.<CUTLASS_NAMES>``,
    ``cutlass.utils.SmemAllocator``, the Hopper GEMM building blocks below (``CUTE_CHAINS`` / ``CUTLASS_CHAINS``
    list every path), and on values only ``CUTE_MEMBERS``. Nothing starting with ``_``, nothing whose name (an
    attribute or a keyword argument) holds asm, timer, clock, ptx, mlir, llvm, nvvm, print, extern, ffi or compile:
    no inline PTX, clocks, IR escape hatches or device printf, and no ``cute.compile`` (``K.cute_launch``
    compiles). Calls: the functions above, methods of ``CUTE_MEMBERS``, the module's ``@cute.jit`` functions; a
    ``@cute.kernel`` only as the statement ``kern(...).launch(grid=..., block=..., stream=...)`` in a ``@cute.jit``
    function.
    Hopper GEMM building blocks, each bounded by the tensors the harness passes (a TMA load's descriptor is built
    from a tensor argument, or a view of one, and zero-fills what lies past its shape; WGMMA reads shared memory and
    writes registers; the mbarriers live in the CTA's shared memory): TMA loads global -> shared
    ``cute.nvgpu.cpasync.<CUTE_TMA>`` (``CopyBulkTensorTileG2SOp``, ``make_tiled_tma_atom``, ``tma_partition``,
    ``prefetch_descriptor``); warpgroup MMA ``cute.nvgpu.warpgroup.<CUTE_WARPGROUP>`` (``MmaF8Op``,
    ``MmaF16BF16Op``, ``make_smem_layout_atom``, ``fence``, ``commit_group``, ``wait_group``) with
    ``cute.nvgpu.warpgroup.OperandSource.SMEM/RMEM``, ``.SmemLayoutAtomKind.<SMEM_LAYOUT_ATOMS>``,
    ``.Field.ACCUMULATE`` and ``cute.nvgpu.OperandMajorMode.K/MN``; ``cute.<CUTE_HOPPER>`` (``tile_to_shape``,
    ``make_mma_atom``, ``make_tiled_mma``, ``gemm``, and ``make_tensor`` written as the tensor argument of
    ``make_tiled_tma_atom`` with a tensor parameter's ``.iterator`` as it is: a view TMA loads from and nothing is
    stored through; no pointer arithmetic, ``.iterator`` nowhere else, and C4 counts the view as metadata. It
    gives the FP8 GEMM's TMA atom a run-time row count. Its layout is the kernel's, so, like an out-of-range index,
    it can read past the tensor, inside the producer process); mbarrier pipelines of one CTA,
    ``cutlass.pipeline.PipelineTmaAsync.create``, ``.CooperativeGroup``, ``.Agent.Thread``,
    ``.make_pipeline_state``, ``.PipelineUserType.Producer/Consumer``; register reallocation
    ``cute.arch.setmaxregister_decrease/increase`` and ``cute.arch.make_warp_uniform``. Not allowed: TMA stores and
    reductions (S2G: outputs are written by element stores; kept out until a template needs them), multicast,
    clusters (no ``cluster=`` launch keyword, and no keyword argument whose name holds multicast, mcast, cluster or
    cta_layout), tensor-map updates, cp.async (non-bulk) and anything else of cpasync / warpgroup / pipeline.
C3. Host code launches a ``@cute.jit`` function ``fn`` only with the statement ``K.cute_launch(fn, *args, **consts)``
    (or ``K.cute_launch_dynamic``, the same with dynamic tensor layouts),
    which calls ``fn(*args, stream, **consts)``: a ``cute.Tensor`` parameter takes a tensor, a parameter annotated
    with a cutlass dtype (``cutlass.Float32``, ...) takes a host number, a run-time value of the compiled function
    (a size may reach a body so, as a Triton kernel's arguments do, but not one with a constant folded in), the
    parameter after the positional arguments takes the stream (unannotated), and every later parameter is
    ``cutlass.Constexpr``, bound by keyword to a constant or the config, never to a value derived from the inputs.
C4. Shape special-casing (rule 4 of rsi.harness.static, inside CuTe bodies): K.cute_launch compiles for static
    shapes, so the shapes are known when a body is traced (K.cute_launch_dynamic's are runtime values; the rule is
    read from the source, so it holds for both). Values derived from tensor metadata are tainted: ``.shape``,
    ``.layout``, ``.stride``, ``.numel``, a composed layout's ``.outer`` / ``.inner`` and the functions
    ``CUTE_METADATA`` of anything, ``cute.arch.grid_dim()``, parameters not annotated ``cute.Tensor`` /
    ``cute.TensorSSA`` / ``cutlass.Constexpr`` / a cutlass dtype (a run-time number: C3), and whatever is computed
    from tainted values (an element or a load
    takes the taint of its tensor, not of the index). A comparison, a truth test, ``cute.elem_less`` or a min / max
    involving a tainted value may involve no constant but 0, 1, -1 and the index-width limits, and no tainted value
    into which another constant was folded by arithmetic; nor may such a value be a loop bound (``cutlass.range``,
    ``range_constexpr``, ``range``: ``range_constexpr(n // 21504)`` runs its body only at some shapes) or an index
    (``(0, 1)[n // 21504]``). Tensor data (loads, elements of untainted tensors) is not metadata. A tainted value
    may not be passed to a ``cute.Tensor``, ``cute.TensorSSA``, ``cutlass.Constexpr`` or cutlass-dtype
    parameter of another CuTe function (it would shed its taint there). A local holding a constant counts as the
    constant, as in host code; a new register tensor (``FRESH_VALUES``) holds new values, not its shape argument's.
    Known gap: an element store does not pass its value's taint to the tensor (tests/adversarial/
    test_shape_rule_gaps.py, a strict xfail, with the others found so far).
"""

from __future__ import annotations

import ast

from rsi.harness.static import (
    KERNEL_BUILTINS,
    _arith,
    _bad_constants,
    _chain,
    _check_attr_name,
    _const_kind,
    _dotted,
    _expression_reason,
    _Function,
    _holds_constant,
    _is_const,
    _Kind,
    _params,
    _Reject,
    _src,
    _statement_reason,
    _tuple_element,
)

MODULES = ("cutlass", "cutlass.cute")
DECORATORS = ("kernel", "jit")
DTYPES = frozenset({"Float32", "BFloat16", "Float16", "Float64", "Int8", "Int16", "Int32", "Int64", "Uint8",
                    "Uint16", "Uint32", "Uint64", "Boolean", "Float8E4M3FN", "Float8E5M2"})
CUTE_TYPES = frozenset({"Tensor", "TensorSSA", "Layout", "Shape", "Coord", "Stride", "IntTuple", "Tile", "Tiler",
                        "ComposedLayout", "CopyAtom", "TiledMma"})
UNTAINTED_TYPES = frozenset({"Tensor", "TensorSSA"})   # with cutlass.Constexpr: parameters that carry no metadata
# parameter kinds (annotation()) that are not metadata in a body: a tainted value may not be passed to them (C4); a
# cutlass dtype ("scalar") is a run-time number, from the host (K.cute_launch) or from the caller's data
UNTAINTED_PARAMS = frozenset({"constexpr", "tensor", "scalar"})
# cute.<name> a body may use: layout algebra, register tensors, copies, selection, math on tensors, types
CUTE_NAMES = frozenset({
    "make_layout", "make_ordered_layout", "make_layout_tv", "make_identity_layout", "make_identity_tensor",
    "zipped_divide", "logical_divide", "tiled_divide", "flat_divide", "local_tile", "local_partition", "composition",
    "coalesce", "group_modes", "select", "slice_", "append", "prepend", "flatten", "size", "rank", "depth", "cosize",
    "shape", "get", "product", "product_each", "ceil_div", "round_up", "elem_less", "crd2idx", "idx2crd",
    "make_rmem_tensor", "make_rmem_tensor_like", "make_fragment_like", "full", "full_like", "zeros_like",
    "ones_like", "where", "any_", "all_", "make_copy_atom", "make_tiled_copy_tv", "copy", "autovec_copy",
    "basic_copy", "basic_copy_if", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh", "erf", "sin", "cos", "abs",
    "max", "min", "fma", "floor", "ceil",
}) | CUTE_TYPES | DTYPES
# Hopper GEMM building blocks (a TMA + WGMMA mainloop): swizzled shared-memory layouts, MMA atoms, the gemm itself
# make_tensor: a tensor of an argument's iterator with a layout of the kernel's making (the fp8 GEMM gives x8 a
# run-time row count: with a static 1 the TMA atom drops the mode and faults, H200 runs 47/47b). The view is read by
# TMA or element loads; a write through it is an element store the guard bands and the output check see.
# domain_offset: a view whose coordinates start at a document's first row (attention_cute's TMA tiles); on a
# tensor it moves the base as an index would, so it reaches nothing an out-of-range index could not
CUTE_HOPPER = frozenset({"tile_to_shape", "make_mma_atom", "make_tiled_mma", "gemm", "make_tensor", "domain_offset"})
CUTE_NAMES = CUTE_NAMES | CUTE_HOPPER
CUTE_ARCH = frozenset({"thread_idx", "block_idx", "block_dim", "grid_dim", "lane_idx", "warp_idx", "sync_threads",
                       "sync_warp", "barrier", "barrier_arrive", "shuffle_sync", "shuffle_sync_bfly",
                       "shuffle_sync_down", "shuffle_sync_up", "warp_reduction", "warp_reduction_sum", "warp_reduction_max", "fmax",
                       "fmin", "rcp_approx", "WARP_SIZE",
                       # warp-specialised kernels: a warp-uniform index, register reallocation (setmaxnreg)
                       "make_warp_uniform", "setmaxregister_decrease", "setmaxregister_increase",
                       # generic shared-memory stores made visible to WGMMA reads (fence.proxy.async.shared::cta)
                       "fence_view_async_shared"})
CUTE_MATH = frozenset({
    "abs", "absf", "absi", "acos", "acosh", "add", "asin", "asinh", "atan", "atan2", "atanh", "cbrt", "ceil",
    "clamp", "copysign", "cos", "cosh", "div", "erf", "erfc", "exp", "exp2", "expm1", "floor", "fma", "fpowi",
    "ipowi", "isfinite", "isinf", "isnan", "isnormal", "log", "log10", "log1p", "log2", "max", "min", "mul", "neg",
    "pow", "rcp", "rem", "round", "roundeven", "rsqrt", "sin", "sincos", "sinh", "sqrt", "sub", "tan", "tanh",
    "trunc",
})
# TMA loads global -> shared only (no TMA stores or reductions, no multicast), and their descriptors' prefetch
CUTE_TMA = frozenset({"CopyBulkTensorTileG2SOp", "make_tiled_tma_atom", "tma_partition", "prefetch_descriptor"})
# warpgroup MMA (wgmma.mma_async): the fp8 and f16/bf16 ops, their smem layout atoms, fence / commit / wait
CUTE_WARPGROUP = frozenset({"MmaF8Op", "MmaF16BF16Op", "make_smem_layout_atom", "fence", "commit_group",
                            "wait_group"})
SMEM_LAYOUT_ATOMS = frozenset({"K_INTER", "K_SW32", "K_SW64", "K_SW128", "MN_INTER", "MN_SW32", "MN_SW64",
                               "MN_SW128"})
# chains: the attributes after cute between the module path (the key) and the leaf (one of the set)
CUTE_CHAINS = {("nvgpu",): frozenset({"CopyUniversalOp"}), ("ReductionOp",): frozenset({"ADD", "MUL", "MIN", "MAX"}),
               ("arch",): CUTE_ARCH, ("math",): CUTE_MATH,
               ("nvgpu", "OperandMajorMode"): frozenset({"K", "MN"}),
               ("nvgpu", "cpasync"): CUTE_TMA,
               ("nvgpu", "warpgroup"): CUTE_WARPGROUP,
               ("nvgpu", "warpgroup", "OperandSource"): frozenset({"SMEM", "RMEM"}),
               ("nvgpu", "warpgroup", "SmemLayoutAtomKind"): SMEM_LAYOUT_ATOMS,
               ("nvgpu", "warpgroup", "Field"): frozenset({"ACCUMULATE"})}
CUTLASS_NAMES = frozenset({"Constexpr", "range", "range_constexpr", "range_dynamic", "const_expr", "dynamic_expr",
                           "min", "max", "full", "full_like", "select_", "and_", "or_", "not_", "any_",
                           "all_"}) | DTYPES
# mbarrier pipelines of one CTA: a TMA producer and consumer threads, their stage/phase states
CUTLASS_CHAINS = {("utils",): frozenset({"SmemAllocator"}),
                  ("pipeline",): frozenset({"CooperativeGroup", "make_pipeline_state"}),
                  ("pipeline", "PipelineTmaAsync"): frozenset({"create"}),
                  ("pipeline", "Agent"): frozenset({"Thread"}),
                  ("pipeline", "PipelineUserType"): frozenset({"Producer", "Consumer"})}
# attributes on CuTe values: tensors, register fragments, TensorSSA values, tiled copies, the shared-memory allocator
CUTE_MEMBERS = frozenset({"load", "store", "fill", "to", "shape", "layout", "stride", "element_type", "dtype",
                          "reduce", "reshape", "broadcast_to", "numel", "get_slice", "partition_S", "partition_D",
                          "retile", "allocate_tensor", "allocate_array", "width",
                          # composed (swizzled) layouts, tiled MMAs and their slices, pipelines and pipeline states
                          "outer", "inner", "set", "partition_A", "partition_B", "partition_C", "make_fragment_A",
                          "make_fragment_B", "producer_acquire", "producer_get_barrier", "producer_commit",
                          "consumer_wait", "consumer_release", "advance", "index",
                          # a tensor's iterator (its pointer), for cute.make_tensor; metadata under C4
                          "iterator",
                          # a value's bits as another type of the same width (Numeric / TensorSSA.bitcast): registers
                          # only, no memory; it keeps its kind under C4 (attention_fp8_cute's emulated exp2, EMU)
                          "bitcast"})
CUTE_FIELDS = frozenset({"index"})   # members that are read, never called (a tuple's .index would match a shape)
METADATA_MEMBERS = frozenset({"shape", "layout", "stride", "numel", "outer", "inner", "iterator"})
# functions whose result is metadata of their argument, and those that compare or select by value (rule C4)
CUTE_METADATA = frozenset({"size", "rank", "depth", "cosize", "shape", "product", "product_each", "grid_dim"})
COMPARES = frozenset({"elem_less"})
# functions making new register tensors: their values are not their shape argument's (the shape and layout are
# metadata as ever: cute.size(t), t.shape). make_rmem_tensor only: make_fragment_like of a layout is a layout, and
# cute.full / ones_like summed give their size (the eighteenth session's adversary pass); .reduce counts as metadata
FRESH_VALUES = frozenset({"make_rmem_tensor"})
# size arithmetic: a literal folded in by them mixes a shape as +, - and // do (cute.ceil_div(n, 2048) == 1)
SIZE_ARITH = frozenset({"ceil_div", "round_up"})
# functions taking a coordinate or a tile, as an index does (argument positions), and named barriers (their id and
# thread count, by keyword): none may carry a shape test either
COORDINATES = {"domain_offset": (0,), "local_tile": (1, 2), "crd2idx": (0,)}
BARRIERS = frozenset({"barrier", "barrier_arrive"})
LOOPS = frozenset({"range", "range_constexpr", "range_dynamic"})   # a mixed bound is a shape test (C4)
SELECTS = frozenset({"min", "max", "clamp", "fmax", "fmin"})
LAUNCH_KEYWORDS = frozenset({"grid", "block", "stream", "smem"})
# keyword arguments of calls that would reach other CTAs (make_tiled_tma_atom's num_multicast, cute.copy's
# mcast_mask, PipelineTmaAsync.create's cta_layout_vmnk): clusters are not allowed, so neither are these
CLUSTER_WORDS = ("multicast", "mcast", "cluster", "cta_layout")
_ESCAPES = ("ptx", "mlir", "llvm", "nvvm", "print", "extern", "ffi", "compile")

CUTE_RULE = ("or CuTe DSL (`import cutlass`, `import cutlass.cute as cute`; docs/cute.md): `@cute.kernel` device "
             "functions launched as `kern(...).launch(grid=..., block=..., stream=stream)` from a `@cute.jit` function "
             "that host code runs with the statement `K.cute_launch(fn, tensors..., NAME=config...)`, which calls "
             "fn(tensors..., stream, NAME=...) with NAME parameters annotated cutlass.Constexpr; CuTe bodies use "
             "cute.* layout algebra, cute.arch thread/block/warp indices and shuffles, cute.math.*, cutlass dtypes, "
             "cutlass.range / range_constexpr / const_expr and tensor methods (load, store, to, shape, ...); for "
             "Hopper GEMMs also TMA loads into shared memory (cute.nvgpu.cpasync.CopyBulkTensorTileG2SOp, "
             "make_tiled_tma_atom, tma_partition, prefetch_descriptor), warpgroup MMA (cute.nvgpu.warpgroup.MmaF8Op / "
             "MmaF16BF16Op, make_smem_layout_atom, fence, commit_group, wait_group; cute.make_tiled_mma, "
             "cute.tile_to_shape, cute.gemm), cutlass.pipeline.PipelineTmaAsync mbarrier pipelines and "
             "cute.arch.setmaxregister_decrease / increase; no TMA stores, clusters or multicast, no "
             "cute.compile, printf, inline PTX or clocks; shape-derived values are compared only with 0, 1, -1, the "
             "index-width limits or the config")


# --------------------------------------------------------------------------------------------- module level (C1)
def is_cute_import(name: str) -> bool:
    return name in MODULES


def kernel_language(source: str) -> str:
    """``cute`` for a module that imports cutlass, else ``triton`` (recorded in verdicts and records)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return "triton"
    for stmt in tree.body:
        names = [a.name for a in stmt.names] if isinstance(stmt, ast.Import) else \
            [stmt.module or ""] if isinstance(stmt, ast.ImportFrom) else []
        if any(n.split(".")[0] == "cutlass" for n in names):
            return "cute"
    return "triton"


def _escape(attr: str, node: ast.AST) -> None:
    _check_attr_name(attr, node)
    low = attr.lower()
    for word in _ESCAPES:
        if word in low:
            why = ("K.cute_launch compiles" if word == "compile" else
                   "device printf is not allowed" if word == "print" else
                   "IR-level escape hatches and external code are not allowed")
            raise _Reject(f"{attr} ({_src(node)}) in a CuTe candidate: {why}", node)
    if attr == "ir":
        raise _Reject(f"{_src(node)}: IR-level escape hatches are not allowed", node)


def _cute_chain(mod, node: ast.AST) -> list[str] | None:
    """The attributes after ``cute`` of a cute.* chain (cutlass.cute.* too), None if node is not one."""
    root, attrs = _chain(node)
    if not isinstance(root, ast.Name):
        return None
    if root.id in mod.cute:
        return attrs
    if root.id in mod.cutlass and attrs[:1] == ["cute"]:
        return attrs[1:]
    return None


def _cutlass_chain(mod, node: ast.AST) -> list[str] | None:
    root, attrs = _chain(node)
    if isinstance(root, ast.Name) and root.id in mod.cutlass and attrs[:1] != ["cute"]:
        return attrs
    return None


def decorator(mod, fn: ast.FunctionDef) -> str | None:
    """"kernel" or "jit" for a CuTe function, None for a function without a cute decorator (rule C1)."""
    cute = [d for d in fn.decorator_list if _cute_chain(mod, d.func if isinstance(d, ast.Call) else d) is not None
            or _cutlass_chain(mod, d.func if isinstance(d, ast.Call) else d) is not None]
    if not cute:
        return None
    d = fn.decorator_list[0]
    attrs = _cute_chain(mod, d)
    if len(fn.decorator_list) > 1 or attrs is None or len(attrs) != 1 or attrs[0] not in DECORATORS:
        raise _Reject(f"decorator {_dotted(cute[0])} on {fn.name}(): a CuTe function takes exactly one bare "
                      "@cute.kernel or @cute.jit (no arguments, no other decorator)", cute[0])
    return attrs[0]


def annotation(mod, ann: ast.AST | None, where: str) -> str:
    """"constexpr", "tensor" (cute.Tensor / cute.TensorSSA), "scalar" (a cutlass dtype: a run-time number), "type"
    (another allowed type) or "" (none)."""
    if ann is None:
        return ""
    attrs = _cute_chain(mod, ann)
    if attrs is not None and len(attrs) == 1 and (attrs[0] in CUTE_TYPES or attrs[0] in DTYPES):
        return "tensor" if attrs[0] in UNTAINTED_TYPES else "scalar" if attrs[0] in DTYPES else "type"
    attrs = _cutlass_chain(mod, ann)
    if attrs == ["Constexpr"]:
        return "constexpr"
    if attrs is not None and len(attrs) == 1 and attrs[0] in DTYPES:
        return "scalar"
    raise _Reject(f"annotation {_src(ann)} in {where}: a CuTe parameter is annotated with cutlass.Constexpr, a cutlass "
                  "dtype or cute." + "/cute.".join(sorted(CUTE_TYPES)) + " (evaluated at import time; no strings)", ann)


# ----------------------------------------------------------------------------------------- CuTe bodies (C2, C4)
_CLEAN = _Kind("S")


class CuteFunction(_Function):
    kind = "CuTe function"

    def __init__(self, mod, fn: ast.FunctionDef):
        super().__init__(mod, fn)
        self.decor = mod.cute_fns[fn.name]
        self.where = f"@cute.{self.decor} {fn.name}()"
        self.consts = {k: v for k, v in mod.consts.items() if k not in self.params and k not in self.locals}
        self.taint: dict[str, _Kind] = {}
        self.changed = False
        self.iterators: set[int] = set()   # .iterator nodes that are cute.make_tensor's first argument (C2)
        self.tma_sources: set[int] = set()   # make_tiled_tma_atom's tensor arguments (C2)

    def check(self) -> None:
        fn, a = self.fn, self.fn.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs:
            raise _Reject(f"{self.where} takes *args, **kwargs, keyword-only or positional-only parameters: a CuTe "
                          "function takes plain parameters", fn)
        self.check_defaults()
        if fn.returns is not None:
            raise _Reject(f"return annotation of {self.where}: leave it out", fn.returns)
        for p in _params(fn):
            kind = annotation(self.mod, p.annotation, self.where)
            self.taint[p.arg] = _CLEAN if kind in UNTAINTED_PARAMS else _Kind("S", True)
        for name in self.locals:
            self.taint.setdefault(name, _CLEAN)
        for _ in range(64):   # taint only grows: to the fixpoint, every pass checks every rule
            self.changed = False
            self.body(fn.body)
            if not self.changed:
                return
        raise _Reject(f"{self.where} too intricate to check (taints did not settle)", fn)

    def bind(self, name: str, k: _Kind) -> None:
        new = self.taint.get(name, _CLEAN).alt(k)   # a name bound twice holds either value
        old = self.taint.get(name, _CLEAN)
        if new != old:
            self.taint[name] = new
            self.changed = True

    # ---- statements
    def body(self, stmts: list[ast.stmt]) -> None:
        for i, s in enumerate(stmts):
            self.stmt(s, docstring=i == 0 and stmts is self.fn.body)

    def stmt(self, s: ast.stmt, docstring: bool = False) -> None:
        if isinstance(s, ast.Assign):
            k = self.expr(s.value)
            for t in s.targets:
                self.target(t, k)
        elif isinstance(s, ast.AugAssign):
            if not isinstance(s.target, ast.Name):
                raise _Reject(f"augmented assignment to {_src(s.target)} in {self.where}: only to names", s)
            self.bind(s.target.id, self.binop(s, s.target, s.op, s.value))
        elif isinstance(s, (ast.If, ast.While)):
            self.test(s.test)
            self.body(s.body)
            if isinstance(s, ast.While) and s.orelse:
                raise _Reject(f"while ... else in {self.where}", s)
            self.body(s.orelse)
        elif isinstance(s, ast.For):
            if s.orelse:
                raise _Reject(f"for ... else in {self.where}", s)
            k = self.expr(s.iter)
            self.target(s.target, _Kind("S", k.taint, k.mixed))   # it ranges over values: it holds no constant
            self.body(s.body)
        elif isinstance(s, ast.Return):
            if s.value is not None:
                self.expr(s.value)
        elif isinstance(s, ast.Expr):
            v = s.value
            if docstring and isinstance(v, ast.Constant) and isinstance(v.value, str):
                return
            if not isinstance(v, ast.Call):
                raise _Reject(f"expression statement {_src(v)} in {self.where}: only calls", s)
            if isinstance(v.func, ast.Attribute) and v.func.attr == "launch":
                self.launch(v)
            else:
                self.expr(v)
        elif isinstance(s, (ast.Pass, ast.Break, ast.Continue)):
            return
        elif isinstance(s, ast.Assert):
            raise _Reject(f"assert in {self.where}: raise ValueError in host code instead", s)
        elif isinstance(s, ast.AnnAssign):
            raise _Reject(f"annotated assignment in {self.where}: the annotation is evaluated; write NAME = value", s)
        else:
            raise _Reject(_statement_reason(s, self.where), s)

    def target(self, t: ast.AST, k: _Kind) -> None:
        if isinstance(t, ast.Name):
            self.bind(t.id, k)
        elif isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                if isinstance(e, ast.Starred):
                    raise _Reject(f"starred assignment target in {self.where}", e)
                self.target(e, k)
        elif isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and (
                t.value.id in self.params or t.value.id in self.locals):
            if self.expr(t.slice).mixed:   # an element store into a tensor: t[i] = v, at no shape-chosen index
                raise _Reject(f"{_src(t)} in {self.where}: an index computed from tensor metadata with a constant "
                              "folded in selects by shape: special-casing shapes is not allowed", t)
        else:
            raise _Reject(f"assignment to {_src(t)} in {self.where}: only names, tuples of names and elements of "
                          "tensors (t[i] = v) may be assigned", t)

    def launch(self, call: ast.Call) -> None:
        """kern(...).launch(grid=..., block=..., stream=...): a module @cute.kernel, launched from @cute.jit code."""
        inner = call.func.value
        name = inner.func.id if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) else None
        if name is None or self.mod.cute_fns.get(name) != "kernel" or name in self.params or name in self.locals:
            raise _Reject(f"{_src(call.func)}(...) in {self.where}: only a @cute.kernel of this module is launched, "
                          "as kern(...).launch(grid=..., block=..., stream=...)", call)
        if self.decor != "jit":
            raise _Reject(f"{self.where} launches {name}: kernels are launched from @cute.jit functions", call)
        self.call_args(inner, self.mod.cute_defs[name])
        if call.args:
            raise _Reject(f"{name}(...).launch takes keyword arguments only ({', '.join(sorted(LAUNCH_KEYWORDS))})",
                          call)
        for kw in call.keywords:
            if kw.arg not in LAUNCH_KEYWORDS:
                raise _Reject(f"{name}(...).launch({kw.arg or '**'}=...) in {self.where}: only "
                              f"{', '.join(sorted(LAUNCH_KEYWORDS))} (no clusters, cooperative or programmatic "
                              "launches)", kw.value)
            self.expr(kw.value)

    # ---- expressions: the taint of each value (S kind; taint: metadata-derived; mixed: a constant folded in)
    def test(self, node: ast.AST) -> _Kind:
        k = self.expr(node)
        if not isinstance(node, (ast.Compare, ast.BoolOp)) and k.mixed:
            raise _Reject(self._mixed_reason(node, node), node)
        return k

    def expr(self, node: ast.AST) -> _Kind:
        if isinstance(node, ast.Constant):
            if node.value is None or node.value is Ellipsis or type(node.value) in (int, float, str, bool):
                return _Kind("S", const=_holds_constant(node.value))
            raise _Reject(f"constant {node.value!r} of type {type(node.value).__name__} in {self.where}", node)
        if isinstance(node, ast.Name):
            return self.name(node)
        if isinstance(node, ast.Attribute):
            return self.attribute(node)
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.BinOp):
            return self.binop(node, node.left, node.op, node.right)
        if isinstance(node, ast.UnaryOp):
            return self.test(node.operand) if isinstance(node.op, ast.Not) else self.expr(node.operand)
        if isinstance(node, ast.BoolOp):
            k = _CLEAN
            for v in node.values:
                k = k.alt(self.test(v))
            return k
        if isinstance(node, ast.Compare):
            return self.compare(node, [node.left, *node.comparators])
        if isinstance(node, ast.IfExp):
            self.test(node.test)
            return self.expr(node.body).alt(self.expr(node.orelse))
        if isinstance(node, (ast.Tuple, ast.List)):
            for e in node.elts:
                if isinstance(e, ast.Starred):
                    raise _Reject(f"starred expression in {self.where}", e)
            return self.join(self.expr(e) for e in node.elts)
        if isinstance(node, ast.Subscript):
            elt = _tuple_element(node, self.consts)   # (n, 2048)[1] is 2048
            if elt is not None:
                self.expr(node.value)
                return self.expr(elt)
            folded = _const_kind(node, self.consts)
            if folded is not None:
                return _Kind("S", const=folded)
            k = self.expr(node.value)
            if self.expr(node.slice).mixed:   # an element takes the taint of its tensor, not of the index ...
                raise _Reject(f"{_src(node)} in {self.where}: an index computed from tensor metadata with a constant "
                              "folded in selects by shape: special-casing shapes is not allowed", node)
            return k   # ... but an index may not carry a shape test
        if isinstance(node, ast.Slice):
            return self.join(self.expr(x) for x in (node.lower, node.upper, node.step) if x is not None)
        raise _Reject(_expression_reason(node, self.where), node)

    @staticmethod
    def join(kinds) -> _Kind:
        k = _CLEAN
        for x in kinds:
            k = k.join(x)
        return k

    def name(self, node: ast.Name) -> _Kind:
        n, m = node.id, self.mod
        if n in self.taint:
            return self.taint[n]
        if n in m.consts:
            cat, value = m.consts[n]
            return _Kind("S", const=cat in ("S", "T") and _holds_constant(value))
        if n in m.cute_fns:
            raise _Reject(f"CuTe function {n} used as a value in {self.where}: call it (a @cute.kernel: "
                          f"{n}(...).launch(...))", node)
        if n in m.aliases:
            raise _Reject(f"module alias {n} used as a value in {self.where}: use its allowed attributes", node)
        if n in KERNEL_BUILTINS:
            raise _Reject(f"builtin {n} used as a value in {self.where}: call it", node)
        raise _Reject(f"name {n!r} is not allowed in {self.where}: a CuTe function may use its parameters and "
                      "locals, module constants, the module's CuTe functions, cute.* / cutlass.* and the builtins "
                      f"{', '.join(sorted(KERNEL_BUILTINS))}", node)

    def module_attr(self, node: ast.AST) -> str | None:
        """The leaf name of an allowed cute.* / cutlass.* chain; None where node is not rooted at those aliases."""
        for attrs, names, chains, mod in ((_cute_chain(self.mod, node), CUTE_NAMES, CUTE_CHAINS, "cute"),
                                          (_cutlass_chain(self.mod, node), CUTLASS_NAMES, CUTLASS_CHAINS, "cutlass")):
            if attrs is None:
                continue
            for a in attrs:
                _escape(a, node)
            if len(attrs) == 1 and attrs[0] in names:
                return attrs[0]
            if len(attrs) >= 2 and attrs[-1] in chains.get(tuple(attrs[:-1]), ()):
                return attrs[-1]
            allowed = [f"{mod}.{{{', '.join(sorted(names))}}}"] + [
                f"{mod}.{'.'.join(p)}.{{{', '.join(sorted(v))}}}" for p, v in chains.items()]
            raise _Reject(f"{_dotted(node)} is not allowed in {self.where}: CuTe bodies may use "
                          + "; ".join(allowed), node)
        return None

    def attribute(self, node: ast.Attribute) -> _Kind:
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            raise _Reject(f"assigns attribute {_dotted(node)}: patching objects is not allowed", node)
        if self.module_attr(node) is not None:
            return _CLEAN
        if node.attr == "iterator" and id(node) not in self.iterators:
            raise _Reject(f"{_src(node)} in {self.where}: a tensor's .iterator is only cute.make_tensor's first "
                          "argument", node)
        root, attrs = _chain(node)
        if isinstance(root, ast.Name) and root.id in self.mod.api:
            raise _Reject(f"{_dotted(node)} in {self.where}: the kernel API (rsi.kernel) is for host code", node)
        for a in attrs:
            _escape(a, node)
            if a not in CUTE_MEMBERS:
                raise _Reject(f"attribute .{a} ({_src(node)}) is not allowed in {self.where}: CuTe values offer "
                              f"{', '.join(sorted(CUTE_MEMBERS))}", node)
        k = self.expr(node.value)
        return _Kind("S", True, k.mixed) if node.attr in METADATA_MEMBERS else k

    def call(self, node: ast.Call) -> _Kind:
        f, m = node.func, self.mod
        if isinstance(f, ast.Name):
            n = f.id
            if n in self.taint or n in m.consts:
                raise _Reject(f"{self.where} calls {n}, a parameter, local or constant: a CuTe function calls "
                              "cute.* / cutlass.* functions, the module's @cute.jit functions and builtins", node)
            if m.cute_fns.get(n) == "jit":
                return self.call_args(node, m.cute_defs[n])
            if m.cute_fns.get(n) == "kernel":
                raise _Reject(f"kernel {n} called in {self.where}: launch it as {n}(...).launch(grid=..., "
                              "block=..., stream=stream) from a @cute.jit function", node)
            if n not in KERNEL_BUILTINS:
                self.name(f)   # the reason for a name that is not allowed at all
            k = self.select(node, n, self.args(node))
            folded = _const_kind(node, self.consts)     # int('2048'), len('x' * 2048)
            return k if folded is None else _Kind("S", k.taint, k.mixed, const=folded)
        if not isinstance(f, ast.Attribute):
            raise _Reject(f"{self.where} calls the result of {_src(f)}: call functions and methods by name", node)
        leaf = self.module_attr(f)
        if leaf == "make_tiled_tma_atom" and len(node.args) > 1:
            self.tma_sources.add(id(node.args[1]))       # the tensor a TMA load reads: the only place for make_tensor
        if leaf == "make_tensor":
            if id(node) not in self.tma_sources:
                raise _Reject(f"{_src(node)} in {self.where}: cute.make_tensor is only the tensor argument of "
                              "make_tiled_tma_atom (a view TMA loads from, never stored through)", node)
            first = node.args[0] if node.args else None
            if not (isinstance(first, ast.Attribute) and first.attr == "iterator" and isinstance(first.value, ast.Name)
                    and self.taint.get(first.value.id) == _CLEAN and first.value.id in self.params):
                raise _Reject(f"{_src(node)} in {self.where}: cute.make_tensor takes a tensor parameter's .iterator "
                              "as it is (no pointer arithmetic, no other pointer)", node)
            self.iterators.add(id(first))
        if leaf == "make_tiled_tma_atom" and len(node.args) > 4:   # the fifth would be num_multicast
            raise _Reject(f"{_src(node)} in {self.where}: make_tiled_tma_atom takes (op, tensor, smem layout, tile): no "
                          "clusters or multicast", node)
        if leaf == "tma_partition" and not (len(node.args) == 5 and _src(node.args[1]) == "0"
                                            and _src(node.args[2]) == "cute.make_layout(1)"):
            raise _Reject(f"{_src(node)} in {self.where}: tma_partition(atom, 0, cute.make_layout(1), smem, gmem): one "
                          "CTA, no clusters or multicast", node)
        if leaf is not None:
            kinds = self.args(node)
            steering = [a for i, a in enumerate(node.args) if i in COORDINATES.get(leaf, ())]
            steering += [kw.value for kw in node.keywords if leaf in BARRIERS]
            if any(self.expr(a).mixed for a in steering):
                raise _Reject(f"{_src(node)} in {self.where}: a coordinate, tile or barrier computed from tensor "
                              "metadata with a constant folded in selects by shape, as an index would: special-casing "
                              "shapes is not allowed", node)
            if leaf in CUTE_METADATA:   # metadata of whatever it is given (cute.size(t), cute.arch.grid_dim())
                return _Kind("S", leaf == "grid_dim" or not all(_is_const(a, self.consts) for a in node.args),
                             any(k.mixed for k in kinds))
            if leaf in COMPARES:
                return self.compare(node, node.args)
            k = self.select(node, leaf, kinds)
            if leaf in FRESH_VALUES:   # new register values: not the shape they are made with (its metadata is)
                return _CLEAN
            if leaf in SIZE_ARITH and k.taint and (any(x.const for x in kinds)
                                                   or any(_bad_constants(a, self.consts) for a in node.args)):
                return _Kind("S", True, True)
            return k
        if f.attr == "launch":
            raise _Reject(f"{_src(f)}(...) used as a value in {self.where}: launch kernels as statements", node)
        if f.attr in CUTE_FIELDS:
            raise _Reject(f"{_src(f)}(...) in {self.where}: .{f.attr} is a field (a pipeline state's stage), not a "
                          "method", node)
        k = self.attribute(f)
        kinds = self.args(node)
        if f.attr == "reduce":   # a reduction over a tensor can give its size (ones summed): metadata
            return _Kind("S", True, self.join((k, *kinds)).mixed)
        if k.taint:   # a method of metadata (e.g. a shape tuple's) may not take a constant to match a shape against
            bad = [c for a in [*node.args, *(kw.value for kw in node.keywords)] for c in _bad_constants(a, self.consts)]
            if bad:
                raise _Reject(f"{_src(node)} in {self.where} gives constant {bad[0]} to a method of tensor metadata: "
                              "special-casing shapes is not allowed", node)
        return self.join((k, *kinds))

    def args(self, node: ast.Call) -> list[_Kind]:
        for a in node.args:
            if isinstance(a, ast.Starred):
                raise _Reject(f"*{_src(a.value)} in a call in {self.where}", a)
        for kw in node.keywords:
            if kw.arg is None:
                raise _Reject(f"**{_src(kw.value)} in a call in {self.where}", kw.value)
            _escape(kw.arg, kw.value)
            if any(w in kw.arg.lower() for w in CLUSTER_WORDS):
                raise _Reject(f"{kw.arg}= in {_src(node)} ({self.where}): no clusters or multicast (one CTA per "
                              "launch, nothing reaches another CTA)", kw.value)
        return [self.expr(a) for a in node.args] + [self.expr(kw.value) for kw in node.keywords]

    def call_args(self, node: ast.Call, callee: ast.FunctionDef) -> _Kind:
        """A call of a module CuTe function: a tainted argument may not reach an untainted parameter (C4)."""
        kinds = self.args(node)
        params = _params(callee)
        if len(node.args) > len(params):
            raise _Reject(f"{self.where} passes {len(node.args)} arguments to {callee.name}(), which takes "
                          f"{len(params)}", node)
        bound = [*zip(params, node.args), *((next((p for p in params if p.arg == kw.arg), None), kw.value)
                                            for kw in node.keywords)]
        for p, a in bound:
            if p is None:
                raise _Reject(f"{self.where} passes a keyword {callee.name}() does not take", a)
            if self.expr(a).mixed:   # inside the callee the parameter would be plain metadata, the constant forgotten
                raise _Reject(f"{self.where} passes {_src(a)}, computed from tensor metadata with a constant folded in, "
                              f"to {callee.name}(): special-casing shapes is not allowed", a)
            if annotation(self.mod, p.annotation, callee.name) in UNTAINTED_PARAMS and self.expr(a).taint:
                raise _Reject(f"{self.where} passes {_src(a)}, derived from tensor metadata, to the "
                              f"{_src(p.annotation)} parameter {p.arg} of {callee.name}(): shapes may not shed their "
                              "taint (pass them to an unannotated parameter)", a)
        return self.join(kinds)

    def select(self, node: ast.Call, name: str, kinds: list[_Kind]) -> _Kind:
        """A builtin or a cute/cutlass function; min / max / clamp of a tainted value and a constant is refused
        (C4: ``min(n, 5376)`` as a loop bound special-cases a shape without a comparison)."""
        k = self.join(kinds)
        if name in LOOPS and any(x.mixed for x in kinds):
            raise _Reject(f"{_src(node)} in {self.where}: a loop bound computed from tensor metadata with a constant "
                          "folded in (the trip count would pick a branch by shape): special-casing shapes is not "
                          "allowed", node)
        bad = [c for a in node.args for c in _bad_constants(a, self.consts)] if name in SELECTS and k.taint else []
        bad += [_src(a) for a, x in zip(node.args, kinds) if name in SELECTS and k.taint and x.const and not
                _bad_constants(a, self.consts)]    # a local holding a constant: min(n, k) with k = 5376
        if bad:
            raise _Reject(f"{name}() of a value derived from tensor metadata and the constant {bad[0]} in "
                          f"{_src(node)} ({self.where}): special-casing shapes is not allowed", node)
        return k

    def binop(self, node: ast.AST, left: ast.AST, op: ast.operator, right: ast.AST) -> _Kind:
        return _arith(node, left, op, right, self.expr(left), self.expr(right), self.consts)   # as in host code

    def compare(self, node: ast.AST, parts: list[ast.AST]) -> _Kind:
        kinds = [self.expr(p) for p in parts]
        if any(k.taint for k in kinds):
            for part, k in zip(parts, kinds):
                if k.mixed:
                    raise _Reject(self._mixed_reason(node, part), node)
                bad = _bad_constants(part, self.consts)
                if bad or k.const:
                    what = f"the constant {bad[0]}" if bad else f"{_src(part)}, which holds a constant,"
                    raise _Reject(f"compares a value derived from tensor metadata with {what} in "
                                  f"{_src(node)} ({self.where}): special-casing shapes is not allowed (only 0, 1, -1, "
                                  "the index-width limits and the config may appear)", node)
        return _Kind("S", any(k.taint for k in kinds))

    def _mixed_reason(self, node: ast.AST, part: ast.AST) -> str:
        return (f"compares {_src(part)}, a value computed from tensor metadata with a constant folded in, in "
                f"{_src(node)} ({self.where}): special-casing shapes is not allowed")


# ----------------------------------------------------------------------------------------------- host launch (C3)
LAUNCHES = ("cute_launch", "cute_launch_dynamic")   # the second with dynamic tensor layouts (rsi.kernel), same rules


def is_host_launch(mod, call: ast.Call) -> bool:
    f = call.func
    return (isinstance(f, ast.Attribute) and f.attr in LAUNCHES and isinstance(f.value, ast.Name)
            and f.value.id in mod.api)


def check_host_launch(host, call: ast.Call) -> None:
    """``K.cute_launch(fn, *args, **consts)`` as a statement of host code (``host``: rsi.harness.static._Host)."""
    m, where = host.mod, f"{host.fn.name}()"
    first = call.args[0] if call.args else None
    if not (isinstance(first, ast.Name) and first.id not in host.env and m.cute_fns.get(first.id) == "jit"):
        raise _Reject(f"K.cute_launch in {where} launches a @cute.jit function of this module, named as its first "
                      "argument: K.cute_launch(fn, tensors..., NAME=config...)", call)
    fn = m.cute_defs[first.id]
    params, args = _params(fn), call.args[1:]
    if len(args) >= len(params):
        raise _Reject(f"K.cute_launch({first.id}, ...) in {where}: {first.id}() takes the stream after its "
                      f"{len(args)} positional arguments (a parameter of its own, unannotated)", call)
    for p, a in zip(params, args):
        if isinstance(a, ast.Starred):
            raise _Reject(f"*{_src(a.value)} in K.cute_launch in {where}", a)
        k, kind = host.expr(a), annotation(m, p.annotation, fn.name)
        if kind == "tensor" and k.cat not in ("O", "B"):
            raise _Reject(f"K.cute_launch passes {_src(a)}, not a tensor, to the {_src(p.annotation)} parameter "
                          f"{p.arg} of {first.id}()", a)
        if kind == "scalar" and (k.mixed or k.cat not in ("S", "B")):
            raise _Reject(f"K.cute_launch passes {_src(a)} to the {_src(p.annotation)} parameter {p.arg} of "
                          f"{first.id}(): a dtype-annotated parameter takes a number (a run-time value: a size may "
                          "reach the body so, as a Triton kernel's arguments do, but not with a constant folded in)", a)
        if kind == "constexpr" and (k.taint or k.cat not in ("S", "B")):
            raise _Reject(f"K.cute_launch passes {_src(a)} to the cutlass.Constexpr parameter {p.arg} of "
                          f"{first.id}(): Constexpr parameters take constants and the config", a)
    stream, rest = params[len(args)], params[len(args) + 1:]
    if stream.annotation is not None:
        raise _Reject(f"parameter {stream.arg} of {first.id}() takes the stream K.cute_launch passes after the "
                      f"{len(args)} positional arguments: leave it unannotated", stream)
    names = {p.arg for p in rest}
    for p in rest:
        if annotation(m, p.annotation, fn.name) != "constexpr":
            raise _Reject(f"parameter {p.arg} of {first.id}() comes after the stream: K.cute_launch binds those by "
                          "keyword, so they are annotated cutlass.Constexpr", p)
    given = set()
    for kw in call.keywords:
        if kw.arg is None or kw.arg not in names:
            raise _Reject(f"K.cute_launch({first.id}, ...) in {where}: keyword {kw.arg or '**'} is not one of the "
                          f"cutlass.Constexpr parameters after the stream ({', '.join(sorted(names)) or 'none'})",
                          kw.value)
        k = host.expr(kw.value)
        if k.taint or k.cat not in ("S", "B"):
            raise _Reject(f"K.cute_launch({first.id}, ..., {kw.arg}={_src(kw.value)}) in {where}: a "
                          "cutlass.Constexpr parameter takes a constant or the config, not a value derived from the "
                          "inputs (their shapes reach the CuTe function as the tensors' static shapes)", kw.value)
        given.add(kw.arg)
    defaults = {p.arg for p, _ in zip(reversed(params), reversed(fn.args.defaults))}
    missing = sorted(names - given - defaults)
    if missing:
        raise _Reject(f"K.cute_launch({first.id}, ...) in {where} leaves the cutlass.Constexpr parameters "
                      f"{', '.join(missing)} unbound", call)
