"""The approximate class (rsi.contract.Approximate) on a small synthetic op group: an fp8 (e4m3) matmul judged
against the exact product's fp64 oracle. Honest lossy outputs pass with their error distribution recorded; a cruder
quantiser (e5m2), noise past the declared budget and a moved NaN fail with their reasons; a search space or judge
option may tighten the bounds, never loosen them."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from rsi.contract import Approximate, OpGroup, Shape, tighten
from rsi.harness import check

E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2
CLASS = Approximate(max_rel_l2=0.1, min_cosine=0.99, max_abs_frac=0.2, factor=1.5, floor_rel_l2=1e-3)


def _quant(t: torch.Tensor, dtype, dim: int | None = None) -> torch.Tensor:
    """t rounded to an fp8 format with a per-tensor (dim None) or per-slice scale, back in fp32."""
    amax = t.abs().amax() if dim is None else t.abs().amax(dim=dim, keepdim=True)
    s = amax / torch.finfo(dtype).max
    return (t / s).to(dtype).float() * s


def reference(x, w):
    """The declared lossy algorithm: per-tensor e4m3 inputs, fp32 product, one bf16 rounding."""
    return (_quant(x.float(), E4M3) @ _quant(w.float(), E4M3)).to(torch.bfloat16)


def oracle(x, w):
    return x.double() @ w.double()


def make_inputs(shape: Shape, seed: int, device, layout: int = 0):
    g = torch.Generator().manual_seed(seed)
    m, k, n = shape.dims["m"], shape.dims["k"], shape.dims["n"]
    return (torch.randn(m, k, generator=g).to(torch.bfloat16).to(device),
            torch.randn(k, n, generator=g).to(torch.bfloat16).to(device))


SHAPE = Shape("small", {"m": 64, "k": 96, "n": 48})
OP = OpGroup(name="fp8_matmul_test", reference=reference, oracle=oracle, make_inputs=make_inputs, tolerance=CLASS,
             shapes=(SHAPE,), odd_shapes=(), interp_shapes=(SHAPE,), special_cases=(),
             bytes_moved=lambda s: 2 * (s.dims["m"] * s.dims["k"] + s.dims["k"] * s.dims["n"] + s.dims["m"] * s.dims["n"]))


def _case(seed: int = 0):
    x, w = make_inputs(SHAPE, seed, "cpu")
    return x, w, reference(x, w), oracle(x, w)


def test_honest_lossy_outputs_pass_with_the_distribution_recorded():
    x, w, ref, orc = _case()
    # a finer quantiser than declared (per-row scales for x): less lossy than the reference, still lossy
    out = (_quant(x.float(), E4M3, dim=1) @ _quant(w.float(), E4M3)).to(torch.bfloat16)
    for o in (ref, out):
        ok, st, why = check.compare(o, ref, orc, CLASS)
        assert ok, why
        assert 0.005 < st["rel_l2"] < 0.06 and st["cosine"] > 0.998
        assert 0.0 < st["err_frac_p50"] <= st["err_frac_p99"] <= st["max_abs_frac"] < CLASS.max_abs_frac
        for key in ("ref_rel_l2", "ref_cosine", "vs_ref_rel_l2", "vs_ref_max_abs", "lossier_bound"):
            assert math.isfinite(st[key]), key
    ok, st, _ = check.compare(ref, ref, orc, CLASS)
    assert st["vs_ref_rel_l2"] == 0.0 and st["vs_ref_max_abs"] == 0.0 and st["rel_l2"] == st["ref_rel_l2"]
    ok, st, _ = check.compare(out, ref, orc, CLASS)
    assert st["vs_ref_rel_l2"] > 0.005 and st["vs_ref_max_abs"] > 0.0


def test_error_percentiles_are_the_distribution():
    """|out - oracle| / max|oracle| at p50 and p99, to bf16 precision (rounded down), max exact."""
    orc = torch.ones(1000, dtype=torch.float64)
    orc[0] = 4.0                                          # max|oracle| = 4
    err = torch.arange(1000, dtype=torch.float64) / 1000  # 0, 0.001, ..., 0.999
    out = orc + err
    ok, st, why = check.compare(out, orc.clone(), orc, Approximate(max_rel_l2=1.0, min_cosine=0.0,
                                                                    max_abs_frac=1.0, floor_rel_l2=1.0))
    assert ok, why
    for key, want in (("err_frac_p50", 0.499 / 4), ("err_frac_p99", 0.989 / 4), ("max_abs_frac", 0.999 / 4)):
        assert want * (1 - 2**-7) <= st[key] <= want * (1 + 1e-12), (key, st[key], want)


def test_lossier_than_the_declared_algorithm_fails():
    x, w, ref, orc = _case()
    crude = (_quant(x.float(), E5M2) @ _quant(w.float(), E5M2)).to(torch.bfloat16)   # 2 mantissa bits, not 3
    ok, st, why = check.compare(crude, ref, orc, CLASS)
    assert st["rel_l2"] < CLASS.max_rel_l2 and st["cosine"] > CLASS.min_cosine        # inside the budget ...
    assert not ok and "lossier than the declared algorithm" in why                     # ... but not the algorithm
    assert st["rel_l2"] > st["lossier_bound"] == pytest.approx(1.5 * st["ref_rel_l2"] + 1e-3)


def test_beyond_the_error_budget_fails():
    x, w, ref, orc = _case()
    noisy = (orc * (1 + 0.15 * torch.randn(orc.shape, generator=torch.Generator().manual_seed(1)))).bfloat16()
    ok, st, why = check.compare(noisy, ref, orc, CLASS)
    assert not ok and "relative-L2 error vs the exact op" in why and st["rel_l2"] > CLASS.max_rel_l2
    # the reference itself fails a tightened budget below its own error
    tight = tighten(CLASS, {"max_rel_l2": 0.02})
    ok, _, why = check.compare(ref, ref, orc, tight)
    assert not ok and "> 0.02" in why
    ok, _, why = check.compare(ref, ref, orc, tighten(CLASS, {"min_cosine": 0.99999}))
    assert not ok and "cosine vs the exact op" in why
    ok, _, why = check.compare(ref, ref, orc, tighten(CLASS, {"max_abs_frac": 1e-4}))
    assert not ok and "of max|exact|" in why


def test_nan_positions_must_match_the_reference():
    x, w, ref, orc = _case()
    moved = ref.clone()
    moved[3, 5] = math.nan
    ok, _, why = check.compare(moved, ref, orc, CLASS)
    assert not ok and "NaN pattern" in why
    # NaN where the reference has NaN is judged on the finite entries
    ref_nan = ref.clone()
    ref_nan[3, 5] = math.nan
    ok, st, why = check.compare(ref_nan.clone(), ref_nan, orc, CLASS)
    assert ok, why
    ok, _, why = check.compare(ref.clone(), ref_nan, orc, CLASS)
    assert not ok and "NaN pattern" in why


def test_worst_takes_the_minimum_of_similarities():
    a = {"rel_l2": 0.01, "cosine": 0.999, "ref_cosine": 0.9995, "err_frac_p99": 0.02}
    b = {"rel_l2": 0.02, "cosine": 0.9999, "ref_cosine": 0.999, "err_frac_p99": 0.01}
    assert check.worst([a, b]) == {"rel_l2": 0.02, "cosine": 0.999, "ref_cosine": 0.999, "err_frac_p99": 0.02}


def test_worst_keeps_the_sign_of_the_largest_bias():
    a = {"bias_ulps": 0.1, "ref_bias_ulps": -0.02}
    b = {"bias_ulps": -0.5, "ref_bias_ulps": 0.01}
    assert check.worst([a, b]) == {"bias_ulps": -0.5, "ref_bias_ulps": -0.02}


# ---------------------------------------------------------------------------------------------- tightening
def test_tighten_only_tightens():
    t = tighten(CLASS, {"max_rel_l2": 0.05, "min_cosine": 0.995, "max_abs_frac": 0.1})
    assert (t.max_rel_l2, t.min_cosine, t.max_abs_frac, t.factor) == (0.05, 0.995, 0.1, CLASS.factor)
    assert tighten(CLASS, {}) == CLASS
    for bad, words in (({"max_rel_l2": 0.2}, "loosens"), ({"min_cosine": 0.9}, "loosens"),
                       ({"max_abs_frac": 0.5}, "loosens"), ({"factor": 1.0}, "unknown"),
                       ({"max_rel_l2": math.nan}, "finite"), ({"max_rel_l2": "0.01"}, "finite")):
        with pytest.raises(ValueError, match=words):
            tighten(CLASS, bad)
    from rsi.refs import get_op_group

    with pytest.raises(ValueError, match="only an approximate class"):
        tighten(get_op_group("swiglu").tolerance, {"max_rel_l2": 0.01})


def _space(tmp_path, op: str, table: str) -> None:
    (tmp_path / f"{op}.toml").write_text(f'[{op}]\ntemplate = "swiglu"\nheuristic = "elementwise_16B"\nbuckets = []\n'
                                         f'[{op}.axes]\nnum_warps = [4]\n{table}')


def test_space_table_tightens_and_refuses_looser(tmp_path, monkeypatch):
    import rsi.refs
    from rsi.spaces import load_space

    monkeypatch.setattr(rsi.refs, "get_op_group", lambda name: OP if name == OP.name else pytest.fail(name))
    _space(tmp_path, OP.name, f"[{OP.name}.approximate]\nmax_rel_l2 = 0.05\nmin_cosine = 0.995\n")
    sp = load_space(OP.name, tmp_path)
    assert sp.approximate == {"max_rel_l2": 0.05, "min_cosine": 0.995}
    _space(tmp_path, OP.name, f"[{OP.name}.approximate]\nmax_rel_l2 = 0.5\n")
    with pytest.raises(ValueError, match=r"approximate\].*max_rel_l2 = 0.5 loosens the op group's 0.1"):
        load_space(OP.name, tmp_path)
    _space(tmp_path, OP.name, f"[{OP.name}.approximate]\nmin_cosine = 0.9\n")
    with pytest.raises(ValueError, match="loosens"):
        load_space(OP.name, tmp_path)
    assert load_space("swiglu").approximate == {}


def test_space_table_on_an_exact_op_group_is_refused(tmp_path):
    from rsi.spaces import load_space

    _space(tmp_path, "swiglu", "[swiglu.approximate]\nmax_rel_l2 = 0.01\n")
    with pytest.raises(ValueError, match="only an approximate class"):
        load_space("swiglu", tmp_path)


def test_judge_uses_the_tightened_class_and_refuses_a_looser_one(monkeypatch):
    from rsi.harness import judge as J

    monkeypatch.setattr(J, "get_op_group", lambda name: OP if name == OP.name else pytest.fail(name))
    with J.Judge(J.JudgeOptions(approximate={OP.name: {"max_rel_l2": 0.05}})) as j:
        assert j.tolerance_of(OP) == replace(CLASS, max_rel_l2=0.05)
        other = replace(OP, name="other_op")
        assert j.tolerance_of(other) == CLASS
    with pytest.raises(ValueError, match="loosens"):
        J.Judge(J.JudgeOptions(approximate={OP.name: {"max_rel_l2": 0.5}}))


def test_search_display_labels_approximate_verdicts(capsys):
    """The live table's line of an approximate verdict says so, with its error against the exact op; the speed-up
    column is against the fastest declared incumbent where the op group has any."""
    from types import SimpleNamespace

    from rsi.contract import Candidate
    from rsi.search.display import SearchDisplay

    opts = SimpleNamespace(op=OP.name, backend="cuda", target="h200", proxy=False)
    verdict = {"candidate": "c" * 64, "status": "accepted", "stage": "accepted", "reason": "correct",
               "tolerance": {**CLASS.describe(), "observed": {"rel_l2": 0.0312, "cosine": 0.99951}},
               "timings": [{"bucket": "small", "p50_us": 50.0,
                            "baselines": {"compile": {"speedup": 3.0}, "sdpa_cudnn": {"speedup": 0.8},
                                          "flex": {"speedup": 1.2}}}]}
    from rich.console import Console

    d = SearchDisplay(opts, "run", ("small",), incumbents=("sdpa_cudnn", "flex"))
    d.console = Console(width=500)
    with d:
        d.add(0, verdict, Candidate(op=OP.name, source="x"))
        d.add(1, {**verdict, "tolerance": {"class": "tolerance", "observed": {"rel_l2": 0.1, "cosine": 0.9}}},
              Candidate(op=OP.name, source="y"))
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("#")]
    assert "accepted (approximate: rel_l2 3.12e-02, cosine 0.99951 vs the exact op)" in lines[0]
    assert "vs incumbent 0.800x" in lines[0]
    assert "approximate" not in lines[1]
