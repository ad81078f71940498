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
