"""The judge's correctness plan on a GPU (built here without one): a heavy shape (OpGroup.heavy_shapes) gets its
seeds and the refill only, every other named shape also the special cases and the layouts."""

from __future__ import annotations

from types import SimpleNamespace

from rsi.harness.judge import Judge
from rsi.refs import get_op_group


def _plan(op_name: str):
    me = SimpleNamespace(opt=SimpleNamespace(backend="cuda", drawn_shapes=0, huge=False), seeds=[11, 22, 33],
                         run_seed=5)
    return Judge.trial_plan(me, get_op_group(op_name))


def test_heavy_shapes_get_seeds_and_refill_only():
    op = get_op_group("attention")
    assert op.heavy_shapes == ("h3_full", "h3_per_rank")
    plan = _plan("attention")
    by = {}
    for shape, layout, seed, special, refill in plan:
        by.setdefault(shape.name, []).append((layout, special.name if special else None, refill))
    for name in op.heavy_shapes:
        assert by[name] == [(0, None, False)] * 3 + [(0, None, True)]
    specials = {sc.name for sc in op.special_cases}
    for name in ("h3_stage1", "ltx_video"):
        assert {s for _, s, _ in by[name] if s} == specials
        assert {lay for lay, _, _ in by[name]} == set(range(op.n_layouts))


def test_op_groups_without_heavy_shapes_keep_the_full_plan():
    op = get_op_group("modulate")
    assert not op.heavy_shapes
    plan = _plan("modulate")
    for shape in op.shapes:
        got = [p for p in plan if p[0].name == shape.name]
        assert len(got) == 3 + 1 + len(op.special_cases) + (op.n_layouts - 1)
