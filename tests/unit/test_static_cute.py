"""The CuTe DSL rules of the static check (rsi/harness/static_cute.py): the gelu_tanh CuTe template passes, and each
cheat below, a one-line change of it, is rejected with its reason. Pure AST: cutlass need not be installed."""

from __future__ import annotations

import pytest

from rsi.harness.static import check_source, contract_rules
from rsi.harness.static_cute import kernel_language
from rsi.spaces import template_source

TEMPLATE = template_source("gelu_tanh_cute")
HOST_LAUNCH = "    K.cute_launch(_gelu_host, x, out, VEC=VEC, THREADS=THREADS, UNROLL=UNROLL, MATH=MATH)\n"
KERNEL_LINE = "    total = n_rows * n_vec\n"
JIT_LINE = "    gout = cute.zipped_divide(out, (1, VEC))\n"


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
    (in_kernel("    q = gx.iterator"), "not allowed"),
    (in_kernel("    gx.shape = 1"), "only names"),
    (in_kernel("    if n_vec == 2048:\n        pass"), "constant 2048"),
    (in_kernel("    if cute.arch.grid_dim()[0] == 7:\n        pass"), "constant 7"),
    (in_kernel("    k = n_vec - 2048\n    if k == 0:\n        pass"), "constant folded in"),
    (in_kernel("    if cute.elem_less(gx.shape, (9, 9)):\n        pass"), "constant 9"),
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


def test_the_prompt_rules_name_cute():
    rules = "\n".join(contract_rules())
    assert "K.cute_launch" in rules and "@cute.kernel" in rules


def test_every_allowed_name_exists_in_cutlass_dsl():
    """The allow-lists name what CuTe DSL 4.8.1 has (skipped without the [cute] extra)."""
    pytest.importorskip("cutlass.cute")
    import cutlass
    import cutlass.utils
    from cutlass import cute

    from rsi.harness import static_cute as S

    missing = [f"cute.{n}" for n in S.CUTE_NAMES if not hasattr(cute, n)]
    missing += [f"cutlass.{n}" for n in S.CUTLASS_NAMES if not hasattr(cutlass, n)]
    for chains, root in ((S.CUTE_CHAINS, cute), (S.CUTLASS_CHAINS, cutlass)):
        for (sub,), names in chains.items():
            missing += [f"{sub}.{n}" for n in names if not hasattr(getattr(root, sub), n)]
    assert not missing, missing
