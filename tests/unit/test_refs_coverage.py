"""Coverage hooks of every op group (rsi/refs): layouts, special values in every floating input, drawn shapes,
huge shapes, FLOP counts, the runtime dims rule, fakes and schemas."""

from __future__ import annotations

import random

import pytest
import torch

from rsi.contract import Approximate, Bitwise, Tolerance
from rsi.harness import check
from rsi.refs import get_op_group, op_names
from rsi.refs.common import MAX_ROWS

OPS = op_names()
TRITON_REFERENCE = {"lora_consumer"}  # its reference is a Triton kernel: runs under TRITON_INTERPRET=1 only
TENSOR_OPS = {"attention", "sol_attn"}   # bf16 matmul FLOPs: gated by the bf16 tensor-core peak
FP8_OPS = {"attention_fp8", "fp8_linear", "fp8_gemm"}   # e4m3 matmul FLOPs: gated by the fp8 tensor-core peak
# exact (bitwise) or approximate op groups that still do arithmetic (their FLOP count is not 0)
ARITHMETIC = {"lora_consumer", "attention_fp8", "fp8_linear", "fp8_gemm", "modulate_fp8", "swiglu_fp8", "head_merge_fp8",
              "gate_residual_modulate_fp8"}


def _interp() -> bool:
    import os

    return os.environ.get("TRITON_INTERPRET") == "1"


def _runs_reference(name: str) -> bool:
    return name not in TRITON_REFERENCE or _interp()


def _tensors(inputs: tuple) -> list[tuple[int, torch.Tensor]]:
    return [(i, t) for i, t in enumerate(inputs) if torch.is_tensor(t)]


def _layout(t: torch.Tensor) -> tuple:
    return tuple(t.stride()), t.storage_offset()


# ------------------------------------------------------------------------------------------------------ layouts
@pytest.mark.parametrize("name", OPS)
def test_layouts_change_every_strided_input(name):
    """n_layouts >= 2; every input that is a strided view in production, and every 2-D activation, gets at
    least two distinct layouts (strides or storage offset); the values are the same in every layout."""
    g = get_op_group(name)
    assert g.n_layouts >= 2, name
    shape = g.interp_shapes[-1]
    per_layout = [g.make_inputs(shape, 3, "cpu", layout=lay) for lay in range(g.n_layouts)]
    base = per_layout[0]
    strided = [i for i, t in _tensors(base) if not t.is_contiguous()]
    declared = [list(g.input_names).index(n) for n in g.noncontiguous_inputs if n in g.input_names]
    assert set(declared) <= set(strided), f"{name}: declared strided inputs {declared} are contiguous"
    for i, t in _tensors(base):
        seen = {_layout(inputs[i]) for inputs in per_layout}
        if i in strided or t.dim() >= 2:
            assert len(seen) >= 2, f"{name}: input {i} has one layout {seen}"
        for lay, inputs in enumerate(per_layout):
            assert inputs[i].shape == t.shape and inputs[i].dtype == t.dtype
            assert check.bitwise_equal(inputs[i], t), f"{name}: input {i} values differ at layout {lay}"
    # every layout beyond 0 changes at least one input's strides (not only offsets)
    for lay, inputs in enumerate(per_layout[1:], 1):
        assert any(inputs[i].stride() != t.stride() or inputs[i].storage_offset() != t.storage_offset()
                   for i, t in _tensors(base)), f"{name}: layout {lay} is layout 0"
    if _runs_reference(name):
        want = check.as_tuple(g.reference(*base))
        for inputs in per_layout[1:]:
            got = check.as_tuple(g.reference(*inputs))
            assert all(check.bitwise_equal(a, b) for a, b in zip(got, want)), name


def test_padding_around_views_is_nan():
    """A kernel that reads outside a padded view (or assumes production strides) reads NaN."""
    g = get_op_group("modulate")
    x = g.make_inputs(g.interp_shapes[0], 0, "cpu", layout=1)[0]
    storage = x.as_strided((x.untyped_storage().nbytes() // 2,), (1,), 0)
    assert torch.isnan(storage[: x.storage_offset()]).all()
    assert torch.isnan(x.as_strided((x.shape[0] - 1, x.stride(0) - x.shape[1]), (x.stride(0), 1),
                                    x.storage_offset() + x.shape[1])).all()


# ------------------------------------------------------------------------------------------------- special values
@pytest.mark.parametrize("name", OPS)
def test_specials_reach_every_floating_input_and_keep_layout(name):
    """Each special case changes every floating input (strided views included), in place of a storage copy: same
    sizes, strides and storage offset, the original untouched, inputs sharing a storage still share one."""
    g = get_op_group(name)
    assert tuple(g.special_inputs) == (), f"{name}: specials restricted to {g.special_inputs}"
    shape = g.interp_shapes[-1]
    for lay in range(g.n_layouts):
        plain = g.make_inputs(shape, 0, "cpu", layout=lay)
        snapshot = [check.raw_bytes(t).clone() for _, t in _tensors(plain)]
        for sc in g.special_cases:
            special = sc.apply(plain, tuple(g.special_inputs))
            assert len(special) == len(plain)
            for i, t in _tensors(plain):
                s = special[i]
                assert s.shape == t.shape and s.dtype == t.dtype and _layout(s) == _layout(t), (name, sc.name, i)
                if t.is_floating_point():
                    assert not torch.equal(check.raw_bytes(s), check.raw_bytes(t)), \
                        f"{name} layout {lay}: {sc.name} left input {i} unchanged"
                    assert s.untyped_storage().data_ptr() != t.untyped_storage().data_ptr()
                else:
                    assert s is t
            shared = {}
            for i, t in _tensors(plain):
                if t.is_floating_point():
                    shared.setdefault(t.untyped_storage().data_ptr(), set()).add(
                        special[i].untyped_storage().data_ptr())
            assert all(len(v) == 1 for v in shared.values()), f"{name}: a shared storage was split"
        for (_, t), snap in zip(_tensors(plain), snapshot):
            assert torch.equal(check.raw_bytes(t), snap), f"{name}: a special case modified its input"


@pytest.mark.parametrize("name", OPS)
def test_nonfinite_reaches_strided_views(name):
    g = get_op_group(name)
    nonfinite = [sc for sc in g.special_cases if sc.nonfinite]
    assert nonfinite
    nan_only = set(nonfinite[0].nan_only)
    if nan_only:  # documented in the op group's notes
        assert "NaN but no" in g.notes, name
    for lay in range(g.n_layouts):
        inputs = nonfinite[0].apply(g.make_inputs(g.interp_shapes[-1], 0, "cpu", layout=lay), ())
        for i, t in _tensors(inputs):
            if t.is_floating_point():
                t = t.float()   # fp8 inputs (fp8_linear's weight): torch has no isposinf for them
                assert torch.isnan(t).any(), (name, i)
                infs = torch.isposinf(t).any() and torch.isneginf(t).any()
                assert infs == (i not in nan_only), (name, i)


@pytest.mark.parametrize("name", OPS)
def test_reference_comparable_under_specials(name):
    """Under every special case in every layout the reference runs, and (tolerance class) passes against itself
    with its oracle and term scale: non-finite patterns, shapes and term scales line up."""
    if not _runs_reference(name):
        pytest.skip("Triton reference: run with TRITON_INTERPRET=1")
    g = get_op_group(name)
    for lay in range(g.n_layouts):
        for sc in g.special_cases:
            inputs = sc.apply(g.make_inputs(g.interp_shapes[-1], 1, "cpu", layout=lay), ())
            refs = check.as_tuple(g.reference(*inputs))
            if isinstance(g.tolerance, Tolerance):
                orcs = check.as_tuple(g.oracle(*inputs))
                terms = g.term_scale(*inputs) if g.term_scale else (None,) * len(refs)
                for r, q, t in zip(refs, orcs, terms):
                    assert q.dtype == torch.float64 and q.shape == r.shape
                    assert t is None or (t.dtype == torch.float64 and t.shape == r.shape)
                    ok, _, why = check.compare(r, r, q, g.tolerance, t)
                    assert ok, f"{name} layout {lay} {sc.name}: {why}"
            elif isinstance(g.tolerance, Approximate):
                for r, q in zip(refs, check.as_tuple(g.oracle(*inputs))):
                    assert q.dtype == torch.float64 and q.shape == r.shape
                    ok, _, why = check.compare(r, r, q, g.tolerance)
                    assert ok, f"{name} layout {lay} {sc.name}: {why}"
            else:
                assert isinstance(g.tolerance, Bitwise)
                assert all(check.bitwise_equal(a, a.clone()) for a in refs)


# ------------------------------------------------------------------------------------------------- drawn shapes
@pytest.mark.parametrize("name", OPS)
def test_sample_shapes_admissible_and_seeded(name):
    g = get_op_group(name)
    keys = set(g.shapes[0].dims)
    a = g.sample_shapes(random.Random(1), "interpret", 4)
    again = g.sample_shapes(random.Random(1), "interpret", 4)
    b = g.sample_shapes(random.Random(2), "interpret", 4)
    assert [s.key() for s in a] == [s.key() for s in again]
    assert [s.key() for s in a] != [s.key() for s in b], f"{name}: drawn shapes ignore the rng"
    assert [s.name for s in a] == [f"drawn{i}" for i in range(4)]
    named = {s.key() for s in list(g.shapes) + list(g.odd_shapes) + list(g.interp_shapes)}
    for s in a + b:
        assert set(s.dims) == keys and 1 <= s.dims["rows"] <= 24 and s.key() not in named
        inputs = g.make_inputs(s, 0, "cpu")
        assert g.dims_of(inputs) == dict(s.dims)
        if _runs_reference(name):
            refs = check.as_tuple(g.reference(*inputs))
            fakes = check.as_tuple(g.fake(*inputs))
            assert [r.shape for r in refs] == [f.shape for f in fakes]
            if check.needs_oracle(g.tolerance):
                orcs = check.as_tuple(g.oracle(*inputs))
                assert all(torch.isfinite(q).all() for q in orcs)
    cuda = g.sample_shapes(random.Random(1), "cuda", 8)
    assert len({s.key() for s in cuda}) > 1
    bucket_values = {k: {s.dims[k] for s in g.shapes} for k in keys - {"rows"}}
    for s in cuda:
        assert set(s.dims) == keys and 1 <= s.dims["rows"] <= MAX_ROWS
        for k, vals in bucket_values.items():
            if k == "heads" and name == "qk_norm_rope":   # 56 heads over W = 1, 2, 4, 8 Ulysses ranks
                assert 56 % s.dims[k] == 0 and 56 // s.dims[k] in (1, 2, 4, 8)
            elif k == "table":
                assert s.dims[k] in (3, 6, 9)
            elif k == "world":
                assert s.dims[k] in (1, 2, 4, 8) and s.dims["heads"] % s.dims[k] == 0
            else:
                assert s.dims[k] in vals, (name, k, s.dims[k], vals)
        inputs = g.make_inputs(s, 0, "meta")
        assert g.dims_of(inputs) == dict(s.dims)
    with pytest.raises(ValueError):
        g.sample_shapes(random.Random(0), "rocm", 1)


# --------------------------------------------------------------------------------------------------- huge shapes
def _largest(g, shape) -> int:
    inputs = g.make_inputs(shape, 0, "meta")
    sizes = [t.untyped_storage().nbytes() // t.element_size() for _, t in _tensors(inputs)]
    sizes += [t.numel() for t in check.as_tuple(g.fake(*inputs))]
    return max(sizes)


@pytest.mark.parametrize("name", OPS)
def test_huge_shapes_cross_2_31(name):
    """Op groups whose production tensors come within 3x of 2**31 elements declare a huge shape whose largest
    tensor exceeds it; the others declare none."""
    g = get_op_group(name)
    production = max(_largest(g, s) for s in g.shapes)
    if production * 3 > 2 ** 31:
        assert g.huge_shapes, f"{name}: production tensors of {production} elements and no huge shape"
    else:
        assert not g.huge_shapes
    for s in g.huge_shapes:
        assert _largest(g, s) > 2 ** 31, s
        assert set(s.dims) == set(g.shapes[0].dims)
        # inputs + the reference's and the candidate's outputs (bf16), plus the fp64 oracle and term scale of
        # every output, stay well inside an H200
        inputs = g.make_inputs(s, 0, "meta")
        nbytes = sum(t.untyped_storage().nbytes() for _, t in _tensors(inputs))
        outs = check.as_tuple(g.fake(*inputs))
        nbytes += sum(3 * 2 * o.numel() for o in outs)
        if check.needs_oracle(g.tolerance):
            nbytes += sum(2 * 8 * o.numel() for o in outs)
        assert nbytes < 60e9, (name, nbytes)


# ------------------------------------------------------------------------------------------------------ flops
@pytest.mark.parametrize("name", OPS)
def test_flops(name):
    g = get_op_group(name)
    arithmetic = isinstance(g.tolerance, Tolerance) or name in ARITHMETIC
    for s in list(g.shapes) + list(g.interp_shapes):
        f = g.flops(s)
        assert isinstance(f, int)
        # attention's cross-attention with several documents: key documents drawn apart from the query documents
        # can leave every query row without keys, so the smallest work make_inputs can draw is 0 (no bucket has it)
        zero_work = s.dims.get("kv_rows", 0) and s.dims.get("docs", 1) > 1 and s not in g.shapes
        assert (f > 0) == (arithmetic and not zero_work), (name, s, f)
    assert g.flops_kind == ("tensor" if name in TENSOR_OPS else "tensor_fp8" if name in FP8_OPS else "cuda"), name
    if arithmetic and g.flops_kind in ("tensor", "tensor_fp8") and "docs" in g.shapes[0].dims:   # attention: quadratic
        s = next(s for s in g.shapes if s.dims["docs"] == 1)
        double = type(s)(s.name, {**s.dims, "rows": 2 * s.dims["rows"]})
        assert g.flops(double) == 4 * g.flops(s)
        assert g.flops(s) == 4 * s.dims["rows"] ** 2 * s.dims["heads"] * 128
    elif arithmetic:   # linear in rows
        s = g.shapes[0]
        double = type(s)(s.name, {**s.dims, "rows": 2 * s.dims["rows"]})
        assert g.flops(double) == 2 * g.flops(s)
    if "kv_rows" in g.shapes[0].dims:        # cross-attention, one document: every query row against every key
        s = next(s for s in g.shapes if s.dims["kv_rows"])
        assert g.flops(s) == 4 * s.dims["rows"] * s.dims["kv_rows"] * s.dims["heads"] * 128
    if name == "swiglu":
        assert g.flops(g.shapes[0]) == 5 * 10250 * 14336


# ----------------------------------------------------------------------------------------- dims, fakes, schemas
@pytest.mark.parametrize("name", OPS)
def test_dims_of_round_trips(name):
    """dims_of(make_inputs(shape)) == shape.dims for every bucket, odd, interpreter and huge shape, every
    layout (meta tensors: no memory)."""
    g = get_op_group(name)
    for s in list(g.shapes) + list(g.odd_shapes) + list(g.interp_shapes) + list(g.huge_shapes):
        for lay in range(g.n_layouts):
            assert g.dims_of(g.make_inputs(s, 0, "meta", layout=lay)) == dict(s.dims), (name, s.key(), lay)


@pytest.mark.parametrize("name", OPS)
def test_fake_and_schema_live_in_the_op_group(name):
    from rsi import ops_library
    from runtime.kernels import op_dims

    g = get_op_group(name)
    assert ops_library.SCHEMAS[name] == g.schema and ops_library.FAKES[name] is g.fake
    args = g.schema.split("->")[0]
    assert [a.split()[-1] for a in args.strip("() ").split(",")] == list(g.input_names)
    inputs = g.make_inputs(g.shapes[0], 0, "meta")
    assert op_dims(name, inputs) == dict(g.shapes[0].dims)
    for o in check.as_tuple(g.fake(*inputs)):
        # bf16 activations; the fp8 producers return e4m3 bytes and fp32 row scales
        assert o.is_contiguous() and o.dtype in (torch.bfloat16, torch.float8_e4m3fn, torch.float32)


def test_describe_names_the_hooks():
    for name in OPS:
        d = get_op_group(name).describe()
        assert d["n_layouts"] >= 2 and "huge_shapes" in d and d["special_inputs"] == []
        if d["tolerance"]["class"] == "tolerance":
            assert d["tolerance"]["elem_ulps"] > 0 and d["tolerance"]["elem_factor"] >= 1
