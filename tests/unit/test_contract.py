import math

import torch

from rsi.contract import Approximate, Bitwise, Candidate, Tolerance
from rsi.harness import check
from rsi.refs import get_op_group, op_names, reference_source_sha256


def test_candidate_hash_is_stable_and_content_addressed():
    a = Candidate("swiglu", "src", {"B": 1, "A": 2})
    b = Candidate("swiglu", "src", {"A": 2, "B": 1}, origin="openai")
    assert a.hash == b.hash  # config order and origin do not matter
    assert Candidate("swiglu", "src", {"A": 3, "B": 1}).hash != a.hash
    assert Candidate("swiglu", "src2", {"A": 2, "B": 1}).hash != a.hash
    assert Candidate("swiglu", "src", {"A": 2, "B": 1}, parent="p").hash != a.hash


def test_candidate_hash_known_value():
    # pins the canonical-JSON hashing so stored candidates stay addressable across versions
    assert Candidate("swiglu", "x", {}).hash == Candidate("swiglu", "x", {}).hash
    import hashlib
    expect = hashlib.sha256(b'{"config":{},"op":"swiglu","parent":null,"source":"x"}').hexdigest()
    assert Candidate("swiglu", "x", {}).hash == expect


def test_every_op_group_is_complete():
    for name in op_names():
        g = get_op_group(name)
        assert g.name == name
        assert g.shapes and g.interp_shapes and g.special_cases
        assert isinstance(g.tolerance, (Bitwise, Tolerance, Approximate))
        assert len(reference_source_sha256(name)) == 64
        for s in g.interp_shapes:
            inputs = g.make_inputs(s, 0, "cpu")
            again = g.make_inputs(s, 0, "cpu")
            other = g.make_inputs(s, 1, "cpu")
            for x, y, z in zip(inputs, again, other):
                if torch.is_tensor(x) and x.is_floating_point():
                    assert torch.equal(x, y), f"{name}: make_inputs not deterministic"
                    assert not torch.equal(x, z), f"{name}: seeds give the same input"
            assert g.bytes_moved(s) > 0


def test_bitwise_compare_sees_nan_payload_and_single_bit():
    a = torch.randn(64).to(torch.bfloat16)
    b = a.clone()
    assert check.compare(a, b, None, Bitwise())[0]
    b.view(torch.int16)[5] ^= 1
    ok, _stats, why = check.compare(a, b, None, Bitwise())
    assert not ok and "bytes differ" in why


def test_tolerance_bounds_follow_reference_error():
    g = get_op_group("swiglu")
    (x,) = g.make_inputs(g.interp_shapes[1], 0, "cpu")
    ref, orc = g.reference(x), g.oracle(x)
    ok, stats, _ = check.compare(ref, ref, orc, g.tolerance)
    assert ok and math.isclose(stats["max_abs"], stats["ref_max_abs"])
    worse = (ref.float() * (1 + 2 ** -6)).to(torch.bfloat16)  # ~4 bf16 ulps of relative error
    ok, stats, why = check.compare(worse, ref, orc, g.tolerance)
    assert not ok and "error" in why


def test_nan_where_reference_has_none_is_rejected():
    g = get_op_group("swiglu")
    (x,) = g.make_inputs(g.interp_shapes[0], 0, "cpu")
    ref, orc = g.reference(x), g.oracle(x)
    bad = ref.clone()
    bad[0, 0] = float("nan")
    ok, _, why = check.compare(bad, ref, orc, g.tolerance)
    assert not ok and "NaN" in why


def test_aliasing_and_structure_checks():
    x = torch.zeros(4, 8)
    assert "aliases input 0" in check.check_aliasing([x[:, :4]], [x], [])
    y = torch.zeros(4, 4)
    assert "earlier call" in check.check_aliasing([y], [x], [y])
    assert check.check_aliasing([torch.zeros(4, 4)], [x], [y]) == ""
    ok, why = check.check_structure([torch.zeros(4, 4).t()], [torch.zeros(4, 4)])
    assert not ok and "stride" in why
    ok, why = check.check_structure([torch.zeros(4, 4, dtype=torch.float16)], [torch.zeros(4, 4)])
    assert not ok and "dtype" in why
