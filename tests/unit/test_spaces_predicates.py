"""Space predicates learned on the GPU prune what cannot compile there."""

from rsi.spaces import PREDICATES, load_space


def test_stream_loads_never_carry_an_eviction_hint():
    # ptxas: "Modifier '.evict_first' cannot be combined with modifier '.cg'" (reports/h200/run8/sweep.log)
    assert not PREDICATES["stream_no_evict_hint"]({"STREAM": 1, "EVICT": "evict_first"})
    assert PREDICATES["stream_no_evict_hint"]({"STREAM": 1, "EVICT": ""})
    assert PREDICATES["stream_no_evict_hint"]({"STREAM": 0, "EVICT": "evict_first"})
    for op in ("modulate", "gate_residual_modulate"):
        configs = load_space(op).enumerate()
        assert configs and not any(c["STREAM"] and c["EVICT"] for c in configs)
        assert any(c["STREAM"] for c in configs) and any(c["EVICT"] for c in configs)


def test_swiglu_fp8_register_cap_fits_the_sm():
    # a cap of MAXNREG registers a thread for num_warps warps must fit 65,536 registers, or the launch fails
    flat = {"ROWS": 1, "RELOAD": 0, "TABLE": 2, "FLAT": 1}
    assert PREDICATES["fp8_swiglu_flat_rows"]({**flat, "MAXNREG": 64, "num_warps": 32})
    assert PREDICATES["fp8_swiglu_flat_rows"]({**flat, "MAXNREG": 128, "num_warps": 16})
    assert not PREDICATES["fp8_swiglu_flat_rows"]({**flat, "MAXNREG": 128, "num_warps": 32})
    configs = load_space("swiglu_fp8").enumerate()
    assert not any(c["MAXNREG"] * 32 * c["num_warps"] > 65536 for c in configs)
    assert any(c["MAXNREG"] for c in configs)


def test_eight_piece_cap_and_row_loop_only_where_they_apply():
    # MAXNREG caps only the one-warp RELOAD 0/1 builds (255 registers); PERSIST is the row loop at one warp, RELOAD
    # 0/1, uncapped; STAGES > 1 only pipelines that loop (reports/h200/run79h3); RELOAD 4 (h in a scratch row a
    # program) only in the unpipelined loop
    for op in ("modulate_fp8", "gate_residual_modulate_fp8"):
        configs = load_space(op).select(f"{op}_warp").enumerate()
        capped = [c for c in configs if c["MAXNREG"]]
        assert capped and all(c["num_warps"] == 1 and c["RELOAD"] in (0, 1) for c in capped), op
        loops = [c for c in configs if c["PERSIST"]]
        assert loops and all(c["num_warps"] == 1 and c["RELOAD"] in (0, 1, 4) and not c["MAXNREG"] for c in loops), op
        scratch = [c for c in configs if c["RELOAD"] == 4]
        assert scratch and all(c["PERSIST"] and c["STAGES"] == 1 for c in scratch), op
        assert all(c["PERSIST"] for c in configs if c["STAGES"] > 1), op
        assert any(c["STAGES"] == 1 for c in loops) and any(c["STAGES"] == 2 for c in loops), op
