"""The fp8 op groups on a GPU (skipped without CUDA; H200 runs 33 and 36): the producers' heuristic templates (and
the eight-piece ones of modulate_fp8 and gate_residual_modulate_fp8), with QUOT 0 and 1, give the reference's bytes and scales at a production shape and under every special case, swiglu_fp8
for every bf16 gate value (bytes, and each gate's silu through its row scale), and fp8_linear's heuristic template
and the _scaled_mm incumbent pass the approximate class at an H3 shape, and so does fp8_gemm's Triton TMA template
(device-side descriptors, whose scratch rsi.kernel provides) at every layout of a production and an odd shape."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from rsi.harness import check
from rsi.refs import get_op_group
from rsi.spaces import load_space, template_source

pytestmark = pytest.mark.gpu


def _template(op: str, tmp_path, name: str | None = None):
    """The op group's main template, or its template ``name``, imported from a file (Triton needs the source)."""
    name = name or load_space(op).template
    path = tmp_path / f"tpl_{name}.py"
    path.write_text(template_source(name))
    spec = importlib.util.spec_from_file_location(f"tpl_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _same_bytes(outs, refs) -> bool:
    return all(check.bitwise_equal(o, r) for o, r in zip(check.as_tuple(outs), check.as_tuple(refs)))


@pytest.mark.parametrize("op,template", [("modulate_fp8", None), ("gate_residual_modulate_fp8", None),
                                         ("swiglu_fp8", None), ("head_merge_fp8", None),
                                         ("modulate_fp8", "modulate_fp8_warp"),
                                         ("gate_residual_modulate_fp8", "gate_residual_modulate_fp8_warp")])
@pytest.mark.parametrize("quot", [0, 1])
def test_producer_bitwise_on_cuda(op, template, quot, tmp_path):
    g = get_op_group(op)
    tpl = _template(op, tmp_path, template)
    space = load_space(op).select(template) if template else load_space(op)
    cfg = {**space.heuristic(), **({"QUOT": quot} if "QUOT" in space.axes else {})}
    for seed in (0, 1):
        inputs = g.make_inputs(g.shapes[0], seed, "cuda")
        assert _same_bytes(tpl.launch(*inputs, **cfg), g.reference(*inputs)), (op, seed)
    for lay in range(g.n_layouts):
        for sc in (None, *g.special_cases):
            inputs = g.make_inputs(g.odd_shapes[-1], 2, "cuda", layout=lay)
            if sc is not None:
                inputs = sc.apply(inputs, ())
            assert _same_bytes(tpl.launch(*inputs, **cfg), g.reference(*inputs)), (op, lay, sc and sc.name)


def test_swiglu_fp8_every_bf16_gate_on_cuda(tmp_path):
    """gate = all 65,536 bf16 values over 16 rows of 4096, up = 1 (tests/interp's every_bf16_gate): h is silu_c
    itself, so a kernel silu that differs from the reference's at any bf16 input changes h there (and, unless e4m3
    rounding hides it, the bytes). FAST (fp32 silu on ex2.approx with the fp64 redo), FAST 0, and FAST with MAXN 1
    (the whole-piece fallback)."""
    from tests.interp.test_fp8_producers import every_bf16_gate

    g = get_op_group("swiglu_fp8")
    tpl = _template("swiglu_fp8", tmp_path)
    x = every_bf16_gate("cuda")
    ref = g.reference(x)
    for change in ({"FAST": 1, "ROWS": 1, "TABLE": 0}, {"FAST": 0, "TABLE": 0},
                   {"FAST": 1, "ROWS": 1, "SUB": 32, "MAXN": 1, "TABLE": 0}, {"FAST": 0, "TABLE": 1},
                   {"FAST": 0, "TABLE": 2}, {"FAST": 0, "TABLE": 3}, {"FAST": 0, "TABLE": 2, "FLAT": 1},
                   {"FAST": 0, "TABLE": 2, "FLAT": 1, "PERSIST": 132}, {"FAST": 0, "TABLE": 3, "FLAT": 1,
                                                                       "PERSIST": 132},
                   {"FAST": 0, "TABLE": 2, "FLAT": 1, "PERSIST": 264, "PART": 1, "num_warps": 16, "MAXNREG": 64}):
        assert _same_bytes(tpl.launch(x, **{**load_space("swiglu_fp8").heuristic(), **change}), ref), change


def test_swiglu_fp8_every_bf16_gate_scale_on_cuda(tmp_path):
    """Every finite bf16 gate in its own row (tests/interp's one_gate_rows): the row's scale is |silu_c(g)| / 448
    exactly, so any silu bit that differs from the reference's shows, not only those e4m3 rounding keeps. FAST (small
    and production tiles), FAST 0 and both TABLEs."""
    from tests.interp.test_fp8_producers import FAST_SMALL, one_gate_rows

    g = get_op_group("swiglu_fp8")
    tpl = _template("swiglu_fp8", tmp_path)
    gates = torch.arange(0, 1 << 16, dtype=torch.int32, device="cuda").to(torch.int16).view(torch.bfloat16)
    x = one_gate_rows(gates[torch.isfinite(gates)])
    ref = g.reference(x)
    heur = load_space("swiglu_fp8").heuristic()
    for cfg in (FAST_SMALL, {**heur, "FAST": 1, "ROWS": 1, "num_warps": 16, "TABLE": 0}, {**heur, "TABLE": 0},
                {**heur, "FAST": 0, "TABLE": 1}, {**heur, "FAST": 0, "TABLE": 2}, {**heur, "FAST": 0, "TABLE": 3},
                {**heur, "TABLE": 2, "FLAT": 1, "PERSIST": 132}, {**heur, "TABLE": 3, "FLAT": 1, "num_warps": 16}):
        assert _same_bytes(tpl.launch(x, **cfg), ref), cfg


@pytest.mark.parametrize("table", [1, 2, 3])
def test_swiglu_fp8_table_every_bf16_pattern_on_cuda(table):
    """TABLE's table built on the GPU (fp64 exp from libdevice) and its lookup give silu_c's bits at all 65,536 bf16
    bit patterns, as under the interpreter (tests/interp/test_fp8_producers.py); TABLE 3 with the GPU's fp32 silu
    (ex2.approx, the approximate division)."""
    from rsi.refs.swiglu_fp8 import silu_c
    from tests.interp.test_fp8_producers import _lookup_module, _silu_bits_differ

    allg = torch.arange(0, 1 << 16, dtype=torch.int32, device="cuda").to(torch.int16).view(torch.bfloat16)
    got = _lookup_module(template_source("swiglu_fp8"), f"tpl_swiglu_lookup_cuda{table}").lookup(allg, table)
    assert not _silu_bits_differ(got, silu_c(allg)).any()


def test_fp8_linear_on_cuda(tmp_path):
    g = get_op_group("fp8_linear")
    tpl = _template("fp8_linear", tmp_path)
    shape = next(s for s in g.shapes if s.name == "qkv_stage1")
    inputs = g.make_inputs(shape, 0, "cuda")
    ref, orc = g.reference(*inputs), g.oracle(*inputs)
    for cfg in (load_space("fp8_linear").heuristic(), {"RCP": 0, "PREC": 0, "PERSIST": 132}):
        ok, st, why = check.compare(tpl.launch(*inputs, **cfg), ref, orc, g.tolerance)
        assert ok, (cfg, why, st)
    b = g.baselines[0]
    ok, _, why = check.compare(b.fn(*b.args(inputs)), ref, orc, g.tolerance)
    assert ok, why


def test_fp8_gemm_tma_on_cuda(tmp_path):
    g = get_op_group("fp8_gemm")
    space = next(a for a in load_space("fp8_gemm").alternatives if a.template == "fp8_gemm_tma")
    tpl = _template("fp8_gemm", tmp_path, "fp8_gemm_tma")
    for shape in (next(s for s in g.shapes if s.name == "qkv_stage1"), *g.odd_shapes):
        for lay in range(g.n_layouts):
            inputs = g.make_inputs(shape, 0, "cuda", layout=lay)
            for cfg in (space.heuristic(), {**space.heuristic(), "PERSIST": 0, "BLOCK_M": 64, "num_warps": 4}):
                ok, st, why = check.compare(tpl.launch(*inputs, **cfg), g.reference(*inputs), g.oracle(*inputs),
                                            g.tolerance)
                assert ok, (shape.name, lay, cfg, why, st)
