"""The CuTe DSL rules of the static check (rsi/harness/static_cute.py): the gelu_tanh and fp8_gemm CuTe templates
pass, and each cheat below, a one-line change of one of them, is rejected with its reason. Pure AST: cutlass need not
be installed."""

from __future__ import annotations

import pytest

from rsi.harness.static import check_source, contract_rules
from rsi.harness.static_cute import kernel_language
from rsi.spaces import template_source

TEMPLATE = template_source("gelu_tanh_cute")
HOST_LAUNCH = "    K.cute_launch(_gelu_host, x, out, VEC=VEC, THREADS=THREADS, UNROLL=UNROLL, MATH=MATH)\n"
KERNEL_LINE = "    total = n_rows * n_vec\n"
JIT_LINE = "    gout = cute.zipped_divide(out, (1, VEC))\n"
FP8 = template_source("fp8_gemm_cute")   # Hopper TMA + WGMMA: the GEMM building blocks of rule C2
FP8_KERNEL_LINE = "    n_consumer_warps = (BM // 64) * 4\n"
FP8_CONSUMER_LINE = "        k_blocks = cute.size(tCrA, mode=[2])        # BK / 32\n"
FP8_TMA = "cute.nvgpu.cpasync.CopyBulkTensorTileG2SOp(),\n        cute.make_tensor(x8.iterator,"


def reason(src: str) -> str:
    r = check_source(src)
    return "" if r.ok else r.reason


def swap(old: str, new: str) -> str:
    assert TEMPLATE.count(old) == 1, old
    return TEMPLATE.replace(old, new)


def in_kernel(line: str) -> str:
    return swap(KERNEL_LINE, KERNEL_LINE + line + "\n")


def in_jit(line: str) -> str:
    return swap(JIT_LINE, JIT_LINE + line + "\n")


def fp8_swap(old: str, new: str) -> str:
    assert FP8.count(old) == 1, old
    return FP8.replace(old, new)


def in_fp8_kernel(line: str) -> str:
    return fp8_swap(FP8_KERNEL_LINE, FP8_KERNEL_LINE + line + "\n")


def in_fp8_consumer(line: str) -> str:
    return fp8_swap(FP8_CONSUMER_LINE, FP8_CONSUMER_LINE + line + "\n")


def test_the_cute_template_passes_and_is_cute():
    assert reason(TEMPLATE) == ""
    assert kernel_language(TEMPLATE) == "cute"
    assert kernel_language(template_source("gelu_tanh")) == "triton"


@pytest.mark.parametrize("src", [
    swap("from cutlass import cute\n", "import cutlass.cute as cu\n").replace("cute.", "cu."),
    swap("import cutlass\nfrom cutlass import cute\n", "import cutlass\n").replace("cute.", "cutlass.cute."),
    in_kernel("    y = cute.where(gx[(None, (0, 0))].load() > 20.0, 1.0, 0.0)"),   # data is not metadata
    in_kernel("    if tidx < 32:\n        pass"),                                   # thread indices are not either
    in_kernel("    w = cute.size(gx, mode=[1]) // 2"),
    # the eighteenth session: a register tensor's values are not the shape it is made with (its metadata is), and
    # a value's bits may be read as another type (kept in its kind)
    in_kernel("    a = cute.make_rmem_tensor(gx.shape, cutlass.Float32)\n    y = cute.arch.fmax(a[0], 2.5)"),
    in_kernel("    b = gx[(None, (0, 0))].load().bitcast(cutlass.Int16)"),
    in_kernel("    for i in cutlass.range_constexpr(4):\n        if tidx < i:\n            pass"),
])
def test_honest_variants_pass(src):
    assert reason(src) == ""


@pytest.mark.parametrize("src, why", [
    (swap("import cutlass\n", "import cutlass\nimport os\n"), "imports os"),
    (swap("import cutlass\n", "import cutlass\nimport triton\n"), "one kernel language"),
    (swap("import cutlass\n", "from __future__ import annotations\nimport cutlass\n"), "annotations"),
    (swap("import cutlass\n", "import cutlass\nCACHE = []\n"), "not an immutable constant"),
    (in_jit("    f = cute.compile(_gelu_kernel, gx)"), "K.cute_launch compiles"),
    (in_kernel("    p = gx._ptr"), "starting with '_'"),
    (in_kernel("    t = cute.arch.clock()"), "clock"),
    (in_kernel("    t = cute.arch.globaltimer()"), "clock"),
    (in_kernel("    cute.arch.inline_ptx('mov.u32 %r0, 0;')"), "IR-level escape"),
    (in_kernel("    cute.printf('x')"), "printf"),
    (in_kernel("    print(total)"), "not allowed"),
    (in_kernel("    t = cute.arch.smid()"), "not allowed"),
    (in_kernel("    p = cute.make_ptr(cutlass.Float32, 0)"), "not allowed"),
    (in_kernel("    q = gx.iterator"), "only cute.make_tensor's first argument"),
    (in_kernel("    gx.shape = 1"), "only names"),
    (in_kernel("    if n_vec == 2048:\n        pass"), "constant 2048"),
    (in_kernel("    if cute.arch.grid_dim()[0] == 7:\n        pass"), "constant 7"),
    (in_kernel("    k = n_vec - 2048\n    if k == 0:\n        pass"), "constant folded in"),
    (in_kernel("    if cute.elem_less(gx.shape, (9, 9)):\n        pass"), "constant 9"),
    # a constant held by a local, or folded into a data value, is the constant (each passed before the eighteenth
    # session)
    (in_kernel("    k = 2048\n    if n_vec == k:\n        pass"), "holds a constant"),
    (in_kernel("    k = tidx * 0 + 2048\n    if n_vec == k:\n        pass"), "holds a constant"),
    (in_kernel("    a = 2048\n    b = a + 0\n    if n_vec == b:\n        pass"), "holds a constant"),
    (in_kernel("    k = 2048\n    j = n_vec - k\n    if j == 0:\n        pass"), "constant folded in"),
    (in_kernel("    k = 5376\n    w = cutlass.min(n_vec, k)"), "the constant k"),
    (in_kernel("    a = cute.full(gx.shape, n_vec, cutlass.Int32)\n    if a[0] == 2048:\n        pass"), "constant 2048"),
    (in_kernel("    a = cute.full(gx.shape, 1, cutlass.Int32)\n    if a[0] == 2048:\n        pass"), "constant 2048"),
    (in_kernel("    if cute.size(cute.make_rmem_tensor(gx.shape, cutlass.Float32)) == 2048:\n        pass"),
     "constant 2048"),
    (in_kernel("    c = n_vec.bitcast(cutlass.Float32)\n    if c == 3.0:\n        pass"), "constant 3.0"),
    # the same session's adversary pass (a helper): what the first version of the rule let through
    (in_kernel("    k = n_vec\n    k = 2048\n    if n_vec == k:\n        pass"), "constant folded in"),
    (in_kernel("    k = n_vec if False else 2048\n    if n_vec == k:\n        pass"), "constant folded in"),
    (in_kernel("    if n_vec == (n_vec, 2048)[1]:\n        pass"), "holds a constant"),
    (in_kernel("    if n_vec == int('2048'):\n        pass"), "constant 2048"),
    (in_kernel("    q = cute.ceil_div(n_vec, 2048)\n    if q == 1:\n        pass"), "constant folded in"),
    (in_kernel("    s = cute.crd2idx((0, 1), cute.make_fragment_like(cute.make_layout((n_vec, 2))))\n"
               "    if s == 2048:\n        pass"), "constant 2048"),
    (in_kernel("    a = cute.make_rmem_tensor(n_vec, cutlass.Int32)\n    a.fill(1)\n"
               "    s = a.load().reduce(cute.ReductionOp.ADD, 0, 0)\n    if s == 2048:\n        pass"), "constant 2048"),
    (in_kernel("    s = cute.full(gx.shape, 1, cutlass.Int32).reduce(cute.ReductionOp.ADD, 0, 0)\n"
               "    if s == 2048:\n        pass"), "constant 2048"),
    (in_jit("    if cute.size(x, mode=[1]) == 16384:\n        pass"), "constant 16384"),
    (in_jit("    _gelu_kernel(gx, gout, cute.size(x), UNROLL, MATH).launch(grid=(1, 1, 1), block=(1, 1, 1))"),
     "shed"),
    (in_jit("    _gelu_kernel(gx, gout, THREADS, UNROLL, MATH).launch(grid=(1, 1, 1), cluster=(2, 1, 1))"),
     "no clusters"),
    (in_jit("    _gelu_kernel(gx, gout, THREADS, UNROLL, MATH)"), "launch it as"),
    (in_kernel("    _gelu_kernel(gx, gout, THREADS, UNROLL, MATH).launch(grid=(1, 1, 1), block=(1, 1, 1))"),
     "launched from @cute.jit"),
    (swap("@cute.kernel\n", "@cute.jit(preprocess=False)\n"), "exactly one bare"),
    (swap("def _gelu_kernel(gx: cute.Tensor,", "def _gelu_kernel(gx: 'cute.Tensor',"), "no strings"),
    # host code
    (swap("    if n_cols % VEC != 0:", "    if n_cols == 16384:\n        VEC = 8\n    if n_cols % VEC != 0:"),
     "constant 16384"),
    (swap(HOST_LAUNCH, HOST_LAUNCH.replace("VEC=VEC", "VEC=n_cols // 2048")), "derived from the inputs"),
    (swap(HOST_LAUNCH, HOST_LAUNCH.replace("VEC=VEC", "VEC=n_cols")), "derived from the inputs"),
    (swap(HOST_LAUNCH, HOST_LAUNCH.replace("    K.cute_launch", "    done = K.cute_launch")), "as a statement"),
    (swap(HOST_LAUNCH, HOST_LAUNCH.replace("_gelu_host, ", "_gelu_kernel, ")), "launches a @cute.jit function"),
    (swap(HOST_LAUNCH, HOST_LAUNCH.replace(", MATH=MATH", "")), "MATH unbound"),
    (swap(HOST_LAUNCH, HOST_LAUNCH.replace("x, out,", "x, n_rows,")), "not a tensor"),
    (swap(HOST_LAUNCH, HOST_LAUNCH.replace("VEC=VEC", "STREAMS=VEC")), "keyword STREAMS"),
    # the session's ten-minute adversary (none got through): escapes to torch interop, a direct trace from host code,
    # a shape clamped to a constant
    (in_jit("    t = cute.runtime.from_dlpack(x)"), "not allowed"),
    (in_jit("    t = cutlass.torch.dtype(x)"), "not allowed"),
    (swap(HOST_LAUNCH, "    _gelu_host(x, out, 0, VEC, THREADS, UNROLL, MATH)\n"), "called directly"),
    (in_kernel("    w = cutlass.min(n_rows * n_vec, 123456)"), "123456"),
    (swap(HOST_LAUNCH, "    _gelu_host(x, out, 0, VEC, THREADS, UNROLL, MATH)\n"), "K.cute_launch(_gelu_host"),
    (swap(HOST_LAUNCH, "    n = cute.size(x)\n" + HOST_LAUNCH), "belong in @cute.jit"),
])
def test_cheats_are_rejected(src, why):
    r = reason(src)
    assert r, f"accepted: {why}"
    assert why in r, r


def test_the_fp8_gemm_template_passes_and_is_cute():
    assert reason(FP8) == ""
    assert kernel_language(FP8) == "cute"


@pytest.mark.parametrize("src", [
    # bf16 operands through the f16/bf16 warpgroup op, A from registers
    fp8_swap("MmaF8Op(f8, f8, cutlass.Float32, (64, BN, 32),", "MmaF16BF16Op(cutlass.BFloat16, cutlass.Float32, "
             "(64, BN, 16),").replace("OperandSource.SMEM", "OperandSource.RMEM"),
    fp8_swap("SmemLayoutAtomKind.K_SW128", "SmemLayoutAtomKind.K_SW64"),
    in_fp8_consumer("        if k_blocks > 0:\n            pass"),
])
def test_honest_fp8_variants_pass(src):
    assert reason(src) == ""


@pytest.mark.parametrize("src, why", [
    # TMA stores, reductions and multicast, clusters: not allowed
    (fp8_swap(FP8_TMA, FP8_TMA.replace("G2SOp", "S2GOp")), "is not allowed"),
    (fp8_swap(FP8_TMA, FP8_TMA.replace("G2SOp", "G2SMulticastOp")), "is not allowed"),
    (fp8_swap(FP8_TMA, FP8_TMA.replace("TileG2SOp", "TileReduceS2GOp")), "is not allowed"),
    (fp8_swap("(BM, BK))\n", "(BM, BK), num_multicast=2)\n"), "no clusters or multicast"),
    (fp8_swap("tx_count=(BM + BN) * BK)", "tx_count=(BM + BN) * BK, cta_layout_vmnk=cute.make_layout(2))"),
     "no clusters or multicast"),
    (fp8_swap("                                                     stream=stream)",
              "                                                     stream=stream, cluster=(2, 1, 1))"), "no clusters"),
    (in_fp8_kernel("    r = cute.arch.block_idx_in_cluster()"), "is not allowed"),
    (in_fp8_kernel("    cute.nvgpu.cpasync.update_tma_descriptor(tma_a, mA, bars)"), "is not allowed"),
    (in_fp8_kernel("    cute.nvgpu.cpasync.fence_tma_desc_acquire(tma_a)"), "is not allowed"),
    # unknown warpgroup / pipeline attributes, privates, IR escapes
    (in_fp8_kernel("    cute.nvgpu.warpgroup.mma_async(tma_a)"), "is not allowed"),
    (in_fp8_kernel("    f = cute.nvgpu.warpgroup.Field.NEGATE_A"), "is not allowed"),
    (in_fp8_kernel("    g = cute.nvgpu.warpgroup.OperandSource"), "is not allowed"),
    (in_fp8_kernel("    p = cutlass.pipeline._private"), "starting with '_'"),
    (in_fp8_kernel("    p = cutlass.pipeline.PipelineTmaStore.create(num_stages=1)"), "is not allowed"),
    (in_fp8_kernel("    g = cutlass.pipeline.CooperativeGroup(cutlass.pipeline.Agent.ThreadBlockCluster)"),
     "is not allowed"),
    (in_fp8_kernel("    q = pipe.sync_object_full"), "attribute .sync_object_full"),
    (in_fp8_kernel("    cute.copy(tma_a, mA, mA, _raw=1)"), "starting with '_'"),
    (in_fp8_kernel("    cute.copy(tma_a, mA, mA, ptx_hint=1)"), "IR-level escape"),
    (in_fp8_kernel("    cute.arch.setmaxregister_ptx(40)"), "IR-level escape"),
    (fp8_swap("a_layout: cute.ComposedLayout,", "a_layout: cute.Swizzle,"), "annotation cute.Swizzle"),
    # C4 holds in the GEMM: k-tile counts, layouts and atoms are metadata
    (in_fp8_kernel("    if n_rows == 4096:\n        pass"), "constant 4096"),
    (in_fp8_consumer("        if k_blocks == 4:\n            pass"), "constant 4"),
    (in_fp8_kernel("    if cute.size(a_layout.outer) == 65536:\n        pass"), "constant 65536"),
    (in_fp8_kernel("    if cute.size(gA, mode=[2]) - 42 == 0:\n        pass"), "constant folded in"),
    # a shape matched through a method call (review of the tenth session: .index was allowed for pipeline states)
    (in_fp8_kernel("    sel = out.shape.index(21504)\n    if sel == 1:\n        pass"), "is a field"),
    (in_fp8_kernel("    sel = (out.shape + (21504,)).index(21504)"), "is a field"),
    (in_fp8_kernel("    sel = out.shape.count(21504)"), "is not allowed"),
    (in_fp8_kernel("    q = out.layout.reshape(21504)"), "method of tensor metadata"),
    # a shape test through a loop's trip count or an index (the tenth session's adversary pass)
    (in_fp8_kernel("    for j in cutlass.range_constexpr(n_cols // 21504):\n        pass"), "loop bound"),
    (in_fp8_kernel("    for j in cutlass.range(n_cols // 21504):\n        pass"), "loop bound"),
    (in_fp8_kernel("    for j in range(n_cols - 21503):\n        pass"), "loop bound"),
    (in_fp8_kernel("    q = (0, 1)[n_cols // 21504]"), "an index"),
    (in_fp8_kernel("    out[(n_rows - 4096, 0)] = 0.0"), "selects by shape"),     # a store's index too
    # an iterator (a tensor's pointer) is metadata: no fingerprinting a buffer's address
    (in_fp8_kernel("    if out.iterator == 4096:\n        pass"), "only cute.make_tensor's first argument"),
    # multicast through positional arguments
    (fp8_swap("(BM, BK))\n", "(BM, BK), 2)\n"), "no clusters or multicast"),
    (fp8_swap("tma_partition(tma_a, 0, cute.make_layout(1),", "tma_partition(tma_a, 0, cute.make_layout(2),"),
     "no clusters or multicast"),
    (fp8_swap("cute.make_tensor(x8.iterator,", "cute.make_tensor(x8.iterator + 1000000,"), "no pointer arithmetic"),
    (in_fp8_kernel("    t = cute.make_tensor(bars, cute.make_layout(1 << 20))"),
     "only the tensor argument of make_tiled_tma_atom"),
    (fp8_swap("cute.make_tensor(x8.iterator,", "cute.make_tensor(x8,"), "no other pointer"),
    (in_fp8_kernel("    v = cute.make_tensor(out.iterator, cute.make_layout(1 << 20))\n    v[5] = 0.0"),
     "only the tensor argument of make_tiled_tma_atom"),
    (fp8_swap("    tma_a, mA = ", "    xa = cute.make_tensor(x8.iterator, cute.make_layout(1))\n    tma_a, mA = "),
     "only the tensor argument of make_tiled_tma_atom"),
])
def test_fp8_cheats_are_rejected(src, why):
    r = reason(src)
    assert r, f"accepted: {why}"
    assert why in r, r


def test_the_prompt_rules_name_cute():
    rules = "\n".join(contract_rules())
    assert "K.cute_launch" in rules and "@cute.kernel" in rules
    assert "CopyBulkTensorTileG2SOp" in rules and "no TMA stores, clusters or multicast" in rules


def test_every_allowed_name_exists_in_cutlass_dsl():
    """The allow-lists name what CuTe DSL 4.8.1 has (skipped without the [cute] extra)."""
    pytest.importorskip("cutlass.cute")
    import cutlass
    import cutlass.pipeline
    import cutlass.utils
    from cutlass import cute

    from rsi.harness import static_cute as S

    missing = [f"cute.{n}" for n in S.CUTE_NAMES if not hasattr(cute, n)]
    missing += [f"cutlass.{n}" for n in S.CUTLASS_NAMES if not hasattr(cutlass, n)]
    for chains, root in ((S.CUTE_CHAINS, cute), (S.CUTLASS_CHAINS, cutlass)):
        for path, names in chains.items():
            obj = root
            for sub in path:
                obj = getattr(obj, sub)
            missing += [f"{'.'.join(path)}.{n}" for n in names if not hasattr(obj, n)]
    assert not missing, missing


ATTN = template_source("attention_cute")   # two GEMMs, P from registers, a document's rows by cute.domain_offset
ATTN_CONSUMER_LINE = "            wg = ctid // 128\n"


def attn_swap(old: str, new: str) -> str:
    assert ATTN.count(old) == 1, old
    return ATTN.replace(old, new)


def in_attn_consumer(line: str) -> str:
    return attn_swap(ATTN_CONSUMER_LINE, ATTN_CONSUMER_LINE + line + "\n")


def test_the_attention_template_passes_and_is_cute():
    assert reason(ATTN) == ""
    assert kernel_language(ATTN) == "cute"


@pytest.mark.parametrize("src, why", [
    # the fifteenth session admitted cute.domain_offset and the shared-memory proxy fence, nothing around them
    (in_attn_consumer("            cute.arch.fence_proxy(kind='async.global')"), "is not allowed"),
    (in_attn_consumer("            cute.arch.fence_acq_rel_cluster()"), "is not allowed"),
    (in_attn_consumer("            cute.arch.fence_view_async_tmem_load()"), "is not allowed"),
    # domain_offset is layout algebra: a shape-derived coordinate in it is still a shape test
    (in_attn_consumer("            t = cute.domain_offset((cute.size(acc_s) - 64, 0), out)"), "selects by shape"),
    (in_attn_consumer("            t = cute.local_tile(out, (1, 1, 1), (cute.size(acc_s) - 64, 0, 0))"),
     "selects by shape"),
    # a store index is an index: the fifteenth session found `out[(cute.size(x) - 64, 0, 0)] = v` accepted (reads
    # were refused); stores are refused the same way now
    (in_attn_consumer("            out[(cute.size(acc_s) - 64, 0, 0)] = 0.0"), "selects by shape"),
    (in_attn_consumer("            if cute.size(tScS) == 64:\n                pass"), "constant 64"),
    # the register views of the softmax are compositions: an index computed from metadata stays refused
    (in_attn_consumer("            r = cute.size(acc_s) // 64\n            row_max[r] = 0.0"), "selects by shape"),
    # host code: a head-dim test is a shape test (the template serves the op's head dim 128 only, by dispatch)
    (attn_swap("    out = K.empty((n_rows, n_heads, head_dim)",
               "    if head_dim == 64:\n        return q\n    out = K.empty((n_rows, n_heads, head_dim)"),
     "constant 64"),
])
def test_attention_cheats_are_rejected(src, why):
    r = reason(src)
    assert r, f"accepted: {why}"
    assert why in r, r



# ---- run-time numbers (thirty-first session): a cutlass-dtype parameter is a run-time value, not metadata
MOD = template_source("modulate_fp8_cute")
MOD_HOST = ("K.cute_launch(_modulate_fp8_host, x, w, shift, scale, idx, h8, h_scale, float(n_cols), THREADS=THREADS,"
            "\n                      CHUNKS=CHUNKS, VEC=VEC)")
MOD_RSTD = "    rstd = 1.0 / cute.math.sqrt(ss / n_cols + EPS)\n"


def mod_swap(old: str, new: str) -> str:
    assert MOD.count(old) == 1, old
    return MOD.replace(old, new)


def test_run_time_numbers_pass():
    """modulate_fp8_cute divides the row's sum of squares by H, a host number (float(n_cols)) passed to a
    cutlass.Float32 parameter: a run-time value of the compiled kernel, as a Triton kernel's arguments are, so what
    is computed from it with data (rstd, h, the amax's comparisons) is data. A body may compare it, as a Triton body
    may branch on a size (docs/design.md)."""
    assert reason(MOD) == ""
    assert reason(mod_swap(MOD_RSTD, MOD_RSTD + "    if n_cols > 4096.0:\n        rstd = rstd * 1.0\n")) == ""


@pytest.mark.parametrize("src, why", [
    # a shape passed to a dtype-annotated parameter would shed its taint there (the kernel's n_cols, in the jit)
    (mod_swap("qscale, n_cols, THREADS, CHUNKS, VEC).launch(",
              "qscale, cutlass.Float32(x.shape[1]), THREADS, CHUNKS, VEC).launch("), "shed their taint"),
    # the host may pass a size, but not one with a constant folded in (n - 5376 compared with 0 in the body)
    (mod_swap(MOD_HOST, MOD_HOST.replace("float(n_cols)", "float(n_cols - 5376)")), "constant folded in"),
    # a tensor to a number
    (mod_swap(MOD_HOST, MOD_HOST.replace("float(n_cols)", "x")), "takes a number"),
    # the static shape, in the body, is still metadata: H recomputed from it and compared is refused
    (mod_swap(MOD_RSTD, "    rstd = 1.0 / cute.math.sqrt(ss / cutlass.Float32(n_vec * VEC) + EPS)\n"),
     "special-casing shapes"),
])
def test_run_time_number_cheats_rejected(src, why):
    assert why in reason(src)
