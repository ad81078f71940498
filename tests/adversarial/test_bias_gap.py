"""What the rounding-bias test lets through (Tolerance docstring, "The limit"): truncating every other entry's last
rounding costs about -0.25 ulp, inside the bound, and about 1.6x the reference's error, inside the aggregates. Kept
as a strict xfail so that closing the gap (or widening it) shows up."""

from __future__ import annotations

import pytest

from rsi.refs import get_op_group
from tests.unit.test_check_elementwise import _directed, _expected, _judge


@pytest.mark.xfail(strict=True, reason="known gap: truncating at most half of the entries passes the bias test")
def test_half_truncated_swiglu_rejected():
    g = get_op_group("swiglu")
    for shape in g.interp_shapes:
        for seed in range(2):
            inputs = g.make_inputs(shape, seed, "cpu")
            refs, orcs, terms = _expected("swiglu", inputs)
            t = _directed(orcs[0], refs[0].dtype, False)
            half = refs[0].clone().view(-1)
            half[::2] = t.reshape(-1)[::2]
            (ok, _stats, _why), = _judge("swiglu", inputs, (half.view(refs[0].shape),), (refs, orcs, terms))
            assert not ok, f"{shape.key()} seed {seed}: half-truncated output accepted"
