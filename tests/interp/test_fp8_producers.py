"""The fused fp8 producers (modulate_fp8, gate_residual_modulate_fp8, swiglu_fp8, head_merge_fp8) on the CPU: their canonical intermediates
against the base op groups and independent computations, the heuristic templates bitwise (e4m3 bytes and row
scales) on every layout and special case, the in-kernel quantiser against the independent one on crafted rows
(ties, saturation, zero / NaN / Inf / subnormal rows), and producers whose bytes differ by one rounding rejected."""

from __future__ import annotations

import importlib.util
import os
import tempfile

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from rsi.harness import check
from rsi.refs import get_op_group, modulate_fp8, swiglu_fp8
from rsi.refs import modulate as M
from rsi.refs.fp8_common import quantize_rows
from rsi.spaces import load_space, template_source
from tests.interp.test_fp8_linear import independent_quantize

pytestmark = pytest.mark.interpreter
PRODUCERS = ("modulate_fp8", "gate_residual_modulate_fp8", "swiglu_fp8", "head_merge_fp8")


def _module(src: str, name: str):
    path = os.path.join(tempfile.mkdtemp(prefix="rsi-fp8-"), f"{name}.py")
    with open(path, "w") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _bitwise(outs, refs) -> str:
    for i, (o, r) in enumerate(zip(check.as_tuple(outs), check.as_tuple(refs))):
        ok, _, why = check.compare(o, r, None, get_op_group("head_merge_fp8").tolerance)
        if not ok:
            return f"output {i}: {why}"
    return ""


# ------------------------------------------------------------------------------------- canonical intermediates
def test_tree_sum_folds_halves():
    """The canonical sum of squares against a plain fp32 fold written from the docstring (numpy float32 adds)."""
    g = torch.Generator().manual_seed(0)
    for cols in (1, 2, 7, 64, 200, 5376):
        v = (torch.randn(3, cols, generator=g) ** 2).float()
        for r in range(3):
            a = v[r].numpy().astype(np.float32)
            a = np.concatenate([a, np.zeros((1 << (cols - 1).bit_length()) - cols, np.float32)])
            while a.size > 1:
                a = (a[: a.size // 2] + a[a.size // 2:]).astype(np.float32)
            assert modulate_fp8.tree_sum(v)[r].numpy().view(np.int32) == a.view(np.int32)[0]


def _interpreted(cfg: dict) -> dict:
    """A config as the interpreter runs it: without num_warps and MAXNREG (launch options it ignores) and without
    STAGES (the loop's pipelining depth) unless PREFETCH reads it."""
    drop = {"num_warps", "MAXNREG"} | ({"STAGES"} if not cfg.get("PREFETCH") else set())
    return {k: v for k, v in cfg.items() if k not in drop}


def _every_layout_and_case(g):
    """(where, inputs) for every interpreter shape, layout and special case (None: no special values) of g."""
    for s in g.interp_shapes:
        for lay in range(g.n_layouts):
            for sc in (None, *g.special_cases):
                inputs = g.make_inputs(s, 4, "cpu", layout=lay)
                yield (s.name, lay, sc and sc.name), (inputs if sc is None else sc.apply(inputs, ()))


def test_canonical_modulate_within_modulate_class():
    """modulate_canonical is a modulate: it passes modulate's tolerance class against modulate's reference on every
    layout and special case (only rstd's last bits differ)."""
    g = M.OP_GROUP
    for where, inputs in _every_layout_and_case(g):
        out = modulate_fp8.modulate_canonical(*inputs)
        ok, _, why = check.compare(out, g.reference(*inputs), g.oracle(*inputs), g.tolerance, g.term_scale(*inputs)[0])
        assert ok, (where, why)


def test_residual_producer_within_gate_residual_modulate_class():
    """gate_residual_modulate_fp8's r is the eager r bit for bit (spelled out here in fp32 with each bf16 rounding
    explicit, not through either reference), and its canonical h (modulate_canonical of that r) passes
    gate_residual_modulate's tolerance class for h, on every layout and special case: the runtime may take its
    (r, h8) where it took gate_residual_modulate's (r, h)."""
    from rsi.refs import gate_residual_modulate as G

    g, bf = G.OP_GROUP, torch.bfloat16
    for where, inputs in _every_layout_and_case(g):
        res, gate, branch, idx = inputs[0], inputs[1], inputs[2], inputs[6]
        eager = (res.float() + (gate.float()[idx] * branch.float()).to(bf).float()).to(bf)
        r8 = get_op_group("gate_residual_modulate_fp8").reference(*inputs)[0]
        assert torch.equal(r8.view(torch.int16), eager.view(torch.int16)), where
        hc = modulate_fp8.modulate_canonical(r8, *inputs[3:])
        ok, _, why = check.compare(hc, g.reference(*inputs)[1], g.oracle(*inputs)[1], g.tolerance,
                                   g.term_scale(*inputs)[1])
        assert ok, (where, why)


def test_silu_c_every_bf16_input():
    """silu_c over all 65,536 bf16 inputs: the fp64 pipelines of torch and numpy (the interpreter's) give the same
    fp32 value for every finite input, and silu_c is torch's F.silu except where F.silu's fp32 exp(-g) overflows
    (g in [-97, -89]: F.silu gives -0, silu_c the true value, 1e-37 to 1e-40)."""
    g = torch.arange(0, 1 << 16, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)
    fin = torch.isfinite(g)
    g64 = g.double()
    via_torch = torch.div(g64, 1 + torch.exp(-g64)).float()
    gn = g64.numpy()
    with np.errstate(over="ignore", invalid="ignore"):
        via_numpy = torch.from_numpy((gn / (1 + np.exp(-gn))).astype(np.float32))
    assert torch.equal(via_torch.view(torch.int32)[fin], via_numpy.view(torch.int32)[fin])
    c, s = swiglu_fp8.silu_c(g), F.silu(g)
    differ = (c.view(torch.int16) != s.view(torch.int16)) & fin
    assert int(differ.sum()) == 17
    assert (g[differ] <= -89).all() and (g[differ] >= -97).all() and (s[differ] == 0).all()
    assert (c[differ] < 0).all() and (c[differ].float().abs() < 1e-36).all()


# ------------------------------------------------------------------------------------------------ templates
# the heuristic, and the other value of the axes that change the arithmetic (QUOT: the quotient; FAST: swiglu's silu).
# TABLE 3 with two rows a program is not a case: its lookup is checked at every bf16 gate (test_swiglu_table_*,
# test_swiglu_delta_table_*) and two rows' indexing with TABLE 1 and 2, and each TABLE 3 launch builds its table in
# the interpreter (3.4 s); TABLE 2 with one row is the heuristic.
VARIANTS = [(op, {}) for op in PRODUCERS] + [
    ("head_merge_fp8", {"QUOT": 0, "ROWS": 2}),
    ("modulate_fp8", {"QUOT": 0}),
    ("gate_residual_modulate_fp8", {"QUOT": 0, "ROWS": 2, "num_warps": 4}),
    ("swiglu_fp8", {"FAST": 0, "QUOT": 0, "TABLE": 0, "num_warps": 16}),
    ("swiglu_fp8", {"FAST": 1, "QUOT": 0, "SUB": 32, "MAXN": 8, "ROWS": 1, "TABLE": 0, "num_warps": 16}),
    ("swiglu_fp8", {"FAST": 0, "TABLE": 1, "ROWS": 2, "num_warps": 16}),
    ("swiglu_fp8", {"FAST": 0, "TABLE": 2, "ROWS": 2, "RELOAD": 1, "num_warps": 16}),
    ("swiglu_fp8", {"FAST": 0, "TABLE": 3, "ROWS": 1}),
    ("swiglu_fp8", {"FAST": 0, "TABLE": 2, "ROWS": 1, "FLAT": 1, "PERSIST": 132}),
    ("swiglu_fp8", {"FAST": 0, "TABLE": 3, "ROWS": 1, "FLAT": 1, "num_warps": 16}),
    ("swiglu_fp8", {"FAST": 0, "TABLE": 2, "ROWS": 1, "FLAT": 1, "PERSIST": 264, "PART": 1, "num_warps": 16,
                    "MAXNREG": 64}),
]


@pytest.mark.parametrize("op,change", VARIANTS)
def test_heuristic_template_bitwise(op, change):
    """Every interpreter shape in every layout, and every special case (layout 0, last shape): bytes and scales
    equal the reference's."""
    g = get_op_group(op)
    space = load_space(op)
    tpl = _module(template_source(space.template), f"tpl_{op}")
    cfg = {**space.heuristic(), **change}
    assert space.valid(cfg)[0], cfg
    for s in g.interp_shapes:
        for lay in range(g.n_layouts):
            inputs = g.make_inputs(s, 5, "cpu", layout=lay)
            why = _bitwise(tpl.launch(*inputs, **cfg), g.reference(*inputs))
            assert not why, (s.name, lay, why)
    for sc in g.special_cases:
        inputs = sc.apply(g.make_inputs(g.interp_shapes[-1], 6, "cpu"), ())
        why = _bitwise(tpl.launch(*inputs, **cfg), g.reference(*inputs))
        assert not why, (sc.name, why)


WARP = ("modulate_fp8", "gate_residual_modulate_fp8")


@pytest.mark.parametrize("op", WARP)
# The interpreter runs a program's block as a whole, so num_warps, MAXNREG and the loop's pipelining depth (STAGES)
# do not change what it computes: the configs differing only in them (2 and 4 warps, the caps, STAGES 2) are one
# interpreter run, and their builds are checked by tests/unit/test_fp8_compile.py. The cases below differ in what
# the kernel computes; a change that equals the heuristic under the interpreter is skipped.
@pytest.mark.parametrize("change", [{}, {"QUOT": 0}, {"RELOAD": 0, "num_warps": 1}, {"RELOAD": 1, "num_warps": 2},
                                    {"RELOAD": 2, "num_warps": 1}, {"RELOAD": 3, "num_warps": 1},
                                    {"RELOAD": 1, "num_warps": 1, "PERSIST": 2, "STAGES": 2},
                                    {"RELOAD": 0, "num_warps": 1, "PERSIST": 3, "STAGES": 1},
                                    {"RELOAD": 0, "num_warps": 1, "PERSIST": 3, "STAGES": 1, "PREFETCH": 1},
                                    {"RELOAD": 4, "num_warps": 1, "PERSIST": 3, "STAGES": 1}])
def test_warp_template_bitwise(op, change):
    """The eight-piece templates (rsi/templates/<op>_warp.py) at their heuristic, QUOT 0, RELOAD 0-4 (3:
    modulate_fp8_warp only), and PERSIST (fewer programs than rows, each walking several), PREFETCH:
    every interpreter shape in every layout and every special case, bytes and scales equal the reference's."""
    if change.get("RELOAD") == 3 and op != "modulate_fp8":
        pytest.skip("RELOAD 3 is modulate_fp8_warp's")
    g = get_op_group(op)
    space = load_space(op).select(f"{op}_warp")
    tpl = _module(template_source(space.template), f"tpl_{op}_warp_{'_'.join(map(str, change.values()))}")
    # the heuristic as it is ({}: modulate_fp8_warp's PREFETCH row loop), the changes on one program a row unless
    # they name PERSIST
    heur = space.heuristic()
    plain = {"PERSIST": 0, "STAGES": 1, "PREFETCH": 0}
    cfg = {**heur, **(plain if change else {}), **change}
    if change and _interpreted(cfg) == _interpreted(heur):
        pytest.skip(f"{op}_warp's heuristic under the interpreter (the case {{}})")
    for where, inputs in _every_layout_and_case(g):
        why = _bitwise(tpl.launch(*inputs, **cfg), g.reference(*inputs))
        assert not why, (where, why)


@pytest.mark.parametrize("op", WARP)
@pytest.mark.parametrize("hidden", [1700, 2048])
def test_warp_template_seven_and_eight_pieces(op, hidden):
    """Widths whose rows fill seven (1700: pieces of 256) and all eight pieces (2048), which the op groups' shapes do
    not reach (5376 fills six, 1000 five): the whole kernel bitwise with RELOAD 0, 1, 2 (and 3, modulate_fp8's; and 4)."""
    from rsi.contract import Shape

    g = get_op_group(op)
    tpl = _module(template_source(f"{op}_warp"), f"tpl_{op}_warp_np_{hidden}")
    inputs = g.make_inputs(Shape("pieces", {"rows": 3, "hidden": hidden, "table": 6}), 9, "cpu")
    for reload in (0, 1, 2, 3, 4) if op == "modulate_fp8" else (0, 1, 2, 4):
        why = _bitwise(tpl.launch(*inputs, **{**load_space(op).select(f"{op}_warp").heuristic(), "RELOAD": reload}),
                       g.reference(*inputs))
        assert not why, (hidden, reload, why)


@pytest.mark.parametrize("op", WARP)
@pytest.mark.parametrize("hidden", [2304, 2816, 3328, 3840])
def test_warp_template_tail_piece(op, hidden):
    """TAIL 1: the last piece only as wide as the row needs (256 of 512 columns here; 256 of 1024 at H3's 5376), in
    piece 4, 5, 6 and 7 (2304, 2816, 3328, 3840), bitwise with RELOAD 0-2 and 4 (3: modulate_fp8's), UNPACK 0 and 1, the
    row loop, and every special case."""
    from rsi.contract import Shape

    g = get_op_group(op)
    tpl = _module(template_source(f"{op}_warp"), f"tpl_{op}_warp_tail_{hidden}")
    heur = load_space(op).select(f"{op}_warp").heuristic()
    base = {**heur, "PERSIST": 0, "STAGES": 1, "TAIL": 1, "PREFETCH": 0}
    shape = Shape("tail", {"rows": 3, "hidden": hidden, "table": 6})
    inputs = g.make_inputs(shape, 9, "cpu")
    want = g.reference(*inputs)
    for reload in (0, 1, 2, 3, 4) if op == "modulate_fp8" else (0, 1, 2, 4):
        for unpack in (0, 1):
            why = _bitwise(tpl.launch(*inputs, **{**base, "RELOAD": reload, "UNPACK": unpack}), want)
            assert not why, (hidden, reload, unpack, why)
    why = _bitwise(tpl.launch(*inputs, **{**base, "RELOAD": 0, "UNPACK": 1, "PERSIST": 2}), want)
    assert not why, (hidden, "PERSIST 2", why)
    # the row loop with the next row's pieces loaded during the bytes
    why = _bitwise(tpl.launch(*inputs, **{**base, "RELOAD": 0, "UNPACK": 1, "PERSIST": 2, "PREFETCH": 1}), want)
    assert not why, (hidden, "PREFETCH", why)
    # h through the scratch rows of fewer programs than rows
    why = _bitwise(tpl.launch(*inputs, **{**base, "RELOAD": 4, "PERSIST": 2}), want)
    assert not why, (hidden, "RELOAD 4, PERSIST 2", why)
    for sc in g.special_cases:
        inputs = sc.apply(g.make_inputs(shape, 6, "cpu"), ())
        why = _bitwise(tpl.launch(*inputs, **{**base, "UNPACK": 1}), g.reference(*inputs))
        assert not why, (hidden, sc.name, why)


_SUM_KERNEL = """


@triton.jit
def _ld(x_ptr, row, n_cols, K_: tl.constexpr, PIECE: tl.constexpr, NP: tl.constexpr, TW: tl.constexpr):
    c = K_ * PIECE + tl.arange(0, TW if K_ == NP - 1 else PIECE)
    return tl.load(x_ptr + row + c, mask=c < n_cols, other=0.0)


@triton.jit
def sum_kernel(x_ptr, o_ptr, n_cols, PIECE: tl.constexpr, LOG: tl.constexpr, NP: tl.constexpr, TW: tl.constexpr,
               UNPACK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * n_cols
    x0 = _ld(x_ptr, row, n_cols, 0, PIECE, NP, TW)
    x1 = _ld(x_ptr, row, n_cols, 1, PIECE, NP, TW)
    x2 = _ld(x_ptr, row, n_cols, 2, PIECE, NP, TW)
    x3 = _ld(x_ptr, row, n_cols, 3, PIECE, NP, TW)
    x4 = _ld(x_ptr, row, n_cols, 4, PIECE, NP, TW)
    x5 = x0                     # pieces the row does not reach: placeholders, as in the kernels (read: wrong sum)
    x6 = x0
    x7 = x0
    if NP > 5:
        x5 = _ld(x_ptr, row, n_cols, 5, PIECE, NP, TW)
    if NP > 6:
        x6 = _ld(x_ptr, row, n_cols, 6, PIECE, NP, TW)
    if NP > 7:
        x7 = _ld(x_ptr, row, n_cols, 7, PIECE, NP, TW)
    tl.store(o_ptr + tl.program_id(0), _sum_squares(x0, x1, x2, x3, x4, x5, x6, x7, PIECE, LOG, NP, UNPACK))


def sum_squares(x, tail=0, unpack=0):
    n_rows, n_cols = x.shape
    piece = max(triton.next_power_of_2(n_cols) // PIECES, MIN_PIECE)
    n_pieces = max(triton.cdiv(n_cols, piece), PIECES // 2 + 1)
    out = K.empty((n_rows,), dtype=K.float32, device=x.device)
    sum_kernel[(n_rows,)](x, out, n_cols, PIECE=piece, LOG=LOG2_MAX, NP=n_pieces,
                          TW=_tail_width(n_cols, piece, n_pieces) if tail else piece, UNPACK=unpack)
    return out
"""


@pytest.mark.parametrize("op", WARP)
def test_warp_template_sum_is_the_canonical_tree(op):
    """The eight-piece tree (``_sum_squares``) is the reference's ``tree_sum`` bit for bit on rows of squares spread
    over 2**-40 to 2**16 (H3's 5376 columns and odd widths); pairing pieces 0 and 2 first instead of 0 and 4 is not,
    on a row made for it (three squares whose sum rounds differently in the two orders). Random bytes in a kernel's output would rarely show a wrong order (a last-bit
    change of the sum seldom moves a bf16 h), so the sum is checked on its own."""
    gen = torch.Generator().manual_seed(3)
    src = template_source(f"{op}_warp")
    tpl = _module(src + _SUM_KERNEL, f"tpl_{op}_sum")
    # 2304, 2816, 3328 and 3840 end in a 256-column tail in piece 4, 5, 6 and 7 (TAIL 1: a narrower last piece)
    for cols in (5376, 1000, 4096 + 1, 8192, 1700, 7000, 2304, 2816, 3328, 3840):
        mant = torch.rand(6, cols, generator=gen) + 1
        x = (mant * 2.0 ** torch.randint(-20, 8, (6, cols), generator=gen)).to(torch.bfloat16)
        x[0, -1] = -x[0, -1]                             # a negative square's input (UNPACK drops no sign bit wrongly)
        want = modulate_fp8.tree_sum(x.float() * x.float())
        for tail, unpack in ((0, 0), (1, 0), (1, 1)):
            got = tpl.sum_squares(x, tail, unpack)
            assert torch.equal(got.view(torch.int32), want.view(torch.int32)), (cols, tail, unpack)
    old = "    a = _sq(x0, UNPACK) + _sqw(x4, UNPACK, PIECE)"
    assert src.count(old) == 1
    p4, p6 = "_sqw(x4, UNPACK, PIECE)", "_sqw(x6, UNPACK, PIECE)"
    swapped = src.replace(old, "    a = _sq(x0, UNPACK) + _sq(x2, UNPACK)")
    swapped = swapped.replace(f"        a = a + (_sq(x2, UNPACK) + {p6})", f"        a = a + ({p4} + {p6})")
    swapped = swapped.replace("        a = a + _sq(x2, UNPACK)\n", f"        a = a + {p4}\n")
    assert swapped.count("_sq(x0, UNPACK) + _sq(x2, UNPACK)") == 1 and "a = a + _sq(x2" not in swapped
    x = torch.zeros(1, 5376, dtype=torch.bfloat16)       # squares 1, 2**-24, 2.25 * 2**-24 at pieces 0, 2, 4:
    x[0, 0], x[0, 2048], x[0, 4096] = 1.0, 2.0**-12, 1.5 * 2.0**-12   # (1 + p4) + p2 = 1 + 2**-22, (1 + p2) + p4 = 1 + 2**-23
    assert modulate_fp8.tree_sum(x.float() * x.float()).item() == 1 + 2.0**-22
    got = _module(swapped + _SUM_KERNEL, f"tpl_{op}_sum_swapped").sum_squares(x)
    assert not torch.equal(got.view(torch.int32), modulate_fp8.tree_sum(x.float() * x.float()).view(torch.int32))


def every_bf16_gate(device="cpu") -> torch.Tensor:
    """x [17, 8192]: gate = every finite bf16 value (NaN/Inf as 0) over 16 rows of 4096, up = 1, so h = silu_c;
    row 16: gate 1 and up 0 except at nine columns 400 apart with gates -97, -96, ..., -89 (where fp32 exp(-g)
    overflows) and up 1, so its scale is silu_c's tiny amax / 448, not fp32 silu's 1 (amax -0); nine sub-rows to
    redo, fewer than the heuristic's MAXN."""
    gate = torch.arange(0, 1 << 16, dtype=torch.int32, device=device).to(torch.int16).view(torch.bfloat16)
    gate = torch.where(torch.isfinite(gate), gate, torch.zeros_like(gate)).view(16, 4096)
    up = torch.ones_like(gate)
    g16, u16 = torch.ones_like(gate[:1]), torch.zeros_like(up[:1])
    g16[0, 7:3607:400] = torch.arange(-97.0, -88.5, 1.0, device=device).to(torch.bfloat16)
    u16[0, 7:3607:400] = 1.0
    return torch.cat([torch.cat([gate, g16]), torch.cat([up, u16])], dim=1)


@pytest.mark.parametrize("change", [{"FAST": 1, "ROWS": 1, "TABLE": 0},
                                    {"FAST": 1, "ROWS": 1, "SUB": 32, "MAXN": 1, "TABLE": 0}])
def test_swiglu_fast_every_bf16_gate(change):
    """FAST's fp32 silu with its fp64 redo gives silu_c at every bf16 gate (the redo tile, and with MAXN 1 the
    whole-piece fallback); without the redo it does not (g <= -89: fp32 exp overflows)."""
    g = get_op_group("swiglu_fp8")
    src = template_source("swiglu_fp8")
    cfg = {**load_space("swiglu_fp8").heuristic(), **change}
    x = every_bf16_gate()
    assert not _bitwise(_module(src, "tpl_swiglu_every").launch(x, **cfg), g.reference(x))
    old = "        s = tl.where(near, back, sf.to(tl.bfloat16).to(tl.float32))\n"
    assert src.count(old) == 1
    broken = _module(src.replace(old, "        s = sf.to(tl.bfloat16).to(tl.float32)\n"), "tpl_swiglu_no_redo")
    assert _bitwise(broken.launch(x, **{**cfg, "MAXN": 16}), g.reference(x)).startswith("output 0: not bitwise")


_LOOKUP_KERNEL = """
import triton
import triton.language as tl


@triton.jit
def lookup_kernel(g_ptr, t_ptr, v_ptr, o_ptr, TABLE: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    g = tl.load(g_ptr + i[None, :])
    if TABLE == 3:
        s = _silu_delta(g, t_ptr, v_ptr)
    else:
        s = _silu_lookup(g, t_ptr, TABLE)
    tl.store(o_ptr + i[None, :], s.to(tl.bfloat16))


def lookup(g, TABLE):
    table, values = silu_table(TABLE, g)
    out = K.empty_like(g)
    lookup_kernel[(g.numel() // 4096,)](g, table, values, out, TABLE=TABLE, BLOCK=4096)
    return out
"""


def _lookup_module(src: str, name: str):
    """The template with a kernel that writes _silu_lookup's value for each gate (no product, no quantiser)."""
    return _module(src + _LOOKUP_KERNEL, name)


def _silu_bits_differ(got: torch.Tensor, want: torch.Tensor) -> torch.Tensor:
    """Where two bf16 tensors differ in their bits, NaN matching any NaN."""
    return (got.view(torch.int16) != want.view(torch.int16)) & ~(got.isnan() & want.isnan())


@pytest.mark.parametrize("table", [1, 2, 3])
def test_swiglu_table_every_bf16_pattern(table):
    """TABLE's lookup gives silu_c's bits at all 65,536 bf16 bit patterns (NaN for NaN), the compact table's closed
    forms outside exponents -8..7 included; with the compact table's range one binade narrower it does not."""
    allg = torch.arange(0, 1 << 16, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)
    want = swiglu_fp8.silu_c(allg)
    src = template_source("swiglu_fp8")
    got = _lookup_module(src, f"tpl_swiglu_lookup{table}").lookup(allg, table)
    assert not _silu_bits_differ(got, want).any()
    if table == 1:   # the tabulated binades start one higher: exponent -8 takes the g / 2 form, which is wrong there
        old = "TAB_E0 = tl.constexpr(119)"
        assert src.count(old) == 1
        narrow = _lookup_module(src.replace(old, "TAB_E0 = tl.constexpr(120)"), "tpl_swiglu_lookup_narrow")
        assert _silu_bits_differ(narrow.lookup(allg, table), want).any()


@pytest.mark.parametrize("persist,table,part", [(2, 2, 0), (3, 3, 1), (0, 0, 0), (2, 2, 1)])
def test_swiglu_flat_walks_rows(persist, table, part):
    """FLAT with fewer programs than rows (each walks several, loading the next row early; 17 rows leave the
    programs uneven) and with one program a row, at every layout and special case, bitwise."""
    g = get_op_group("swiglu_fp8")
    tpl = _module(template_source("swiglu_fp8"), f"tpl_swiglu_flat{persist}_{part}")
    cfg = {**load_space("swiglu_fp8").heuristic(), "TABLE": table, "FLAT": 1, "PERSIST": persist, "PART": part}
    s = next(s for s in g.interp_shapes if s.name == "odd")
    for lay in range(g.n_layouts):
        for sc in (None, *g.special_cases):
            inputs = g.make_inputs(s, 2, "cpu", layout=lay)
            if sc is not None:
                inputs = sc.apply(inputs, ())
            assert not _bitwise(tpl.launch(*inputs, **cfg), g.reference(*inputs)), (lay, sc and sc.name)


@pytest.mark.parametrize("bump", ["", " * (1.0 + 2.0**-9)", " * (1.0 + 2.0**-6)"])
def test_swiglu_delta_table_corrects_and_falls_back(bump):
    """TABLE 3 gives silu_c at every bf16 pattern however far its fp32 silu is off, because the table is built from
    the same function: numpy's fp32 silu (the interpreter's) rounds to silu_c at every finite gate, so it is also
    perturbed by 2**-9 (a quarter to half a bf16 step: gates one step off, codes 1 and 3) and by 2**-6 (most gates several
    steps off: code 2, the full table). Each is exact with the codes, and not without them: with the correction
    dropped, or the full table never read (code 2 read as a correction), some gates differ."""
    allg = torch.arange(0, 1 << 16, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)
    want = swiglu_fp8.silu_c(allg)
    src = template_source("swiglu_fp8")
    fast = "    return gf / (1.0 + tl.exp(-gf))\n"
    assert src.count(fast) == 1
    src = src.replace(fast, f"    return (gf / (1.0 + tl.exp(-gf))){bump}\n")
    tag = {"": 0, " * (1.0 + 2.0**-9)": 9, " * (1.0 + 2.0**-6)": 6}[bump]
    mod = _lookup_module(src, f"tpl_swiglu_delta{tag}")
    assert not _silu_bits_differ(mod.lookup(allg, 3), want).any()
    words = mod.silu_table(3, allg)[0]
    codes = torch.stack([(words >> (2 * k)) & 3 for k in range(16)], 1).flatten()
    n_fix, n_slow = int(((codes == 1) | (codes == 3)).sum()), int((codes == 2).sum())
    assert n_slow >= int((~torch.isfinite(allg)).sum())
    fix = "    fixed = _bits16(_silu_fast(g.to(tl.float32))) + (code & 1) - (code & 2)\n"
    slow = "    slow = code == SLOW_CODE\n"
    assert src.count(fix) == 1 and src.count(slow) == 1
    never = _lookup_module(src.replace(slow, "    slow = code == 9\n"), f"tpl_swiglu_delta_never{tag}")
    bad = _silu_bits_differ(never.lookup(allg, 3), want)
    assert bad.any() and not torch.isfinite(allg[bad]).all()
    if tag == 9:
        assert n_fix > 1000, n_fix   # 1,600: the gates whose silu is not on the bf16 grid already (g, g / 2, 0)
        plain = _lookup_module(src.replace(fix, "    fixed = _bits16(_silu_fast(g.to(tl.float32)))\n"),
                               "tpl_swiglu_delta_plain")
        assert _silu_bits_differ(plain.lookup(allg, 3), want).any()
    if tag == 6:
        assert n_slow > 30000, n_slow


def test_swiglu_flat_refuses_what_it_cannot_do():
    """FLAT is one row a step with h held and a global gather; PERSIST, PART and MAXNREG need FLAT: other configs
    are errors."""
    tpl = _module(template_source("swiglu_fp8"), "tpl_swiglu_flat_refuse")
    x = torch.zeros(1, 32, dtype=torch.bfloat16)
    small = {"BLOCK_A": 16, "BLOCK_B": 0, "BLOCK_C": 0, "num_warps": 1, "TABLE": 2}
    for bad in ({"FLAT": 1, "ROWS": 2}, {"FLAT": 1, "RELOAD": 1}, {"FLAT": 1, "TABLE": 1}, {"PERSIST": 2},
                {"PART": 1}, {"MAXNREG": 64}):
        with pytest.raises(ValueError, match="FLAT"):
            tpl.launch(x, **{**small, **bad})


def test_swiglu_fast_refuses_table_and_reload():
    """FAST has its own kernel, which neither looks silu up nor re-reads: a config asking for both is an error, not
    TABLE or RELOAD silently dropped."""
    tpl = _module(template_source("swiglu_fp8"), "tpl_swiglu_fast_table")
    x = torch.zeros(1, 32, dtype=torch.bfloat16)
    for extra in ({"TABLE": 2}, {"RELOAD": 1}):
        with pytest.raises(ValueError, match="FAST 0"):
            tpl.launch(x, **{**FAST_SMALL, **extra})


def test_swiglu_table_every_bf16_gate():
    """The whole TABLE kernels (lookup, product, quantiser) on every finite bf16 gate and the g <= -89 row, bitwise
    against the reference."""
    g = get_op_group("swiglu_fp8")
    src = template_source("swiglu_fp8")
    x = every_bf16_gate()
    for table in (1, 2, 3):
        cfg = {**load_space("swiglu_fp8").heuristic(), "FAST": 0, "TABLE": table}
        assert not _bitwise(_module(src, f"tpl_swiglu_table{table}").launch(x, **cfg), g.reference(x))


def one_gate_rows(gates: torch.Tensor) -> torch.Tensor:
    """x [N, 32]: row i has gate gates[i] and up 1 in column 0, gate 0 and up 0 elsewhere, so its scale is
    |silu_c(gates[i])| / 448 exactly: the scale shows every bit of each h, not only what survives e4m3 rounding."""
    x = torch.zeros(gates.numel(), 32, dtype=torch.bfloat16, device=gates.device)
    x[:, 0] = gates
    x[:, 16] = 1.0
    return x


FAST_SMALL = {"BLOCK_A": 16, "BLOCK_B": 0, "BLOCK_C": 0, "ROWS": 1, "num_warps": 1, "FAST": 1, "SUB": 4, "MAXN": 2}


def test_swiglu_fast_window_catches_misrounding():
    """FAST's near-midpoint window at work: the fp32 silu is perturbed up by 2**-20 (8 to 16 ulps, inside the window
    |g| + 16) on gates whose fp32 silu lies 1 to 8 ulps under a bf16 midpoint (numpy's fp32 path, which the
    interpreter runs), so the perturbed value crosses it. With the window the redo restores silu_c at every such
    gate (scales equal the reference's); without it the scales differ."""
    g = get_op_group("swiglu_fp8")
    allg = torch.arange(0, 1 << 16, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)
    allg = allg[torch.isfinite(allg) & (allg.float().abs() < 32) & (allg.float().abs() > 2**-60)]
    gf = allg.float().numpy()
    with np.errstate(over="ignore"):
        sf = (gf / (np.float32(1.0) + np.exp(-gf))).astype(np.float32)
    low = sf.view(np.int32) & 0xFFFF
    pick = torch.from_numpy((low >= 0x8000 - 8) & (low < 0x8000))
    gates = allg[pick]
    assert gates.numel() >= 3          # 3 with numpy 2 (5.5e-3, 7.8e-3, 5.94)
    x = one_gate_rows(gates)
    ref = g.reference(x)
    src = template_source("swiglu_fp8")
    old = "    sf = gf / (1.0 + tl.exp(-gf))\n"
    assert src.count(old) == 1
    bumped = src.replace(old, "    sf = (gf / (1.0 + tl.exp(-gf))) * (1.0 + 2.0**-20)\n")
    assert not _bitwise(_module(bumped, "tpl_swiglu_bumped").launch(x, **FAST_SMALL), ref)
    window = "(dist <= ag + NEAR_ULPS) | "
    assert bumped.count(window) == 1
    blind = _module(bumped.replace(window, ""), "tpl_swiglu_blind")
    assert _bitwise(blind.launch(x, **FAST_SMALL), ref).startswith("output 1: not bitwise")


@pytest.mark.parametrize("quot", [0, 1])
def test_in_kernel_quantiser_on_crafted_rows(quot):
    """head_merge_fp8's kernel is the quantiser alone: rows of exact ties, values at and beyond 448 after division,
    a zero row, -0 rows, NaN and Inf rows, bf16-subnormal rows (subnormal fp32 scales), one-element outliers."""
    tpl = _module(template_source("head_merge_fp8"), "tpl_head_merge_fp8_q")
    W, S, h, D = 2, 9, 2, 128
    rows = torch.randn(S, W * h * D, generator=torch.Generator().manual_seed(1))
    rows[0] = torch.tensor([7.0 * 2.0 ** (k % 40 - 20) for k in range(W * h * D)])      # exact e4m3 ties
    rows[1] = 0.0
    rows[2] = -0.0
    rows[3, 17] = float("nan")
    rows[4, 3] = float("inf")
    rows[5] *= 1e-39                                                                    # bf16 subnormals
    rows[6, 100] = 3e38                                                                  # one huge outlier
    rows[7] = torch.linspace(-448.0, 448.0, W * h * D)
    h_bf = rows.to(torch.bfloat16)
    x = h_bf.view(S, W, h, D).permute(1, 0, 2, 3).contiguous()                          # [W, S, h, D]
    h8, sc = tpl.launch(x, QUOT=quot)
    ref8, refs = quantize_rows(h_bf)
    b, s = independent_quantize(h_bf)
    assert np.array_equal(h8.view(torch.uint8).numpy(), b) and np.array_equal(ref8.view(torch.uint8).numpy(), b)
    assert np.array_equal(sc.view(torch.int32).numpy(), s.view(np.int32))
    assert np.array_equal(refs.view(torch.int32).numpy(), s.view(np.int32))


@pytest.mark.parametrize("op,old,new", [
    # modulate_fp8: the product and the shift added with one rounding (an fma) instead of modulate's two
    ("modulate_fp8", "    p = (n * s1).to(tl.bfloat16).to(tl.float32)\n", "    p = n * s1\n"),
    # modulate_fp8: 1 + scale kept in fp32 instead of rounded to bf16 as modulate's eager code has it
    ("modulate_fp8", "    s1 = (1.0 + sc.to(tl.float32)).to(tl.bfloat16).to(tl.float32)\n",
     "    s1 = 1.0 + sc.to(tl.float32)\n"),
    # gate_residual_modulate_fp8: r = res + gate * branch with one rounding (an fma's) instead of the eager two
    ("gate_residual_modulate_fp8", "    gb = (g * br).to(tl.bfloat16).to(tl.float32)\n", "    gb = g * br\n"),
    # swiglu_fp8: silu not rounded to bf16 before the product
    ("swiglu_fp8", "return (g64 / (1.0 + tl.exp(-g64))).to(tl.float32).to(tl.bfloat16).to(tl.float32)",
     "return (g64 / (1.0 + tl.exp(-g64))).to(tl.float32)"),
    # swiglu_fp8, FAST: the fp32 silu not rounded to bf16 before the product
    ("swiglu_fp8", "s = tl.where(near, back, sf.to(tl.bfloat16).to(tl.float32))", "s = tl.where(near, back, sf)"),
    # head_merge_fp8: the reciprocal quantiser, x * (448 / amax), which differs at exact ties
    ("head_merge_fp8", "        q = tl.div_rn(hf, scale)\n", "        q = hf * tl.div_rn(1.0, scale)\n"),
    # head_merge_fp8, QUOT: the reciprocal quotient without its Markstein correction
    ("head_merge_fp8", "        q = tl.fma(tl.fma(q0, sk, nhk), nr, q0)\n", "        q = q0\n"),
])
def test_one_rounding_off_rejected(op, old, new):
    src = template_source(op)
    assert src.count(old) == 1, old
    tpl = _module(src.replace(old, new), f"tpl_{op}_broken")
    g = get_op_group(op)
    inputs = g.make_inputs(g.interp_shapes[-1], 7, "cpu")
    if op == "head_merge_fp8":   # rows of k * 7/512 with amax 6.125 = 49/8: the quotients are exactly k, ties at odd k > 16
        x = inputs[0]
        vals = ((torch.arange(x[0, 0].numel()) % 60 + 1) * 7 / 512).to(torch.bfloat16)
        x.copy_(vals.view(x.shape[2], x.shape[3])[None, None])
        x[:, :, 0, 0] = 6.125
    cfg = {**load_space(op).heuristic(), **({"QUOT": 0} if "div_rn(hf" in old else {}),
           **({"FAST": 0, "TABLE": 0} if "g64" in old else {}),
           **({"FAST": 1, "ROWS": 1, "TABLE": 0} if "near" in old else {})}
    why = _bitwise(tpl.launch(*inputs, **cfg), g.reference(*inputs))
    assert why.startswith("output 0: not bitwise equal"), why
