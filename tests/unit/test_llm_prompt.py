"""Prompt assembly, read on its own: every piece of evidence the issue lists lands in the text, deterministically."""

from __future__ import annotations

from rsi.harness import static
from rsi.llm import prompt as P
from rsi.refs import get_op_group
from tests.unit.llm_servers import GOOD_KERNEL

OP = get_op_group("swiglu")
VERDICT_ROWS = [{"bucket": "stage1", "p50_us": 210.5, "gbps": 4188.0, "pct_copy": 97.3,
                 "baselines": {"compile": {"speedup": 1.021}, "eager": {"speedup": 2.5}}}]
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/usr/lib/python3/site-packages/triton/runtime/interpreter.py", line 1357, in __call__\n'
    "    self.fn(**args)\n"
    '  File "/tmp/rsi-judge-abc/rsi-producer-def/rsi_kernel_swiglu.py", line 17, in _kernel\n'
    "    s = (g / (1.0 + tl.expo(-g))).to(tl.bfloat16)\n"
    "AttributeError: module 'triton.language' has no attribute 'expo'\n")


def _ctx(**kw) -> P.PromptContext:
    gpu = P.gpu_facts("h200", "cuda", {"sm_count": 132}, {"gbps": 4305.0})
    base = {
        "op": OP, "reference_source": "def reference(x):\n    return silu(gate) * up\n", "gpu": gpu,
        "best": P.Best("reply 1", GOOD_KERNEL, {"BLOCK_F": 128, "num_warps": 4}, P.times_from_verdict(VERDICT_ROWS)),
        "attempts": (
            P.Attempt("reply 1", {"BLOCK_F": 128}, "accepted", "accepted", "ok",
                      times=P.times_from_verdict(VERDICT_ROWS), objective=0.98),
            P.Attempt("reply 2", {"BLOCK_F": 64}, "rejected", "compile", "InterpreterError: no attribute 'expo'",
                      error=P.trim_error({"traceback": TRACEBACK})),
            P.Attempt("tuning of reply 1", {"BLOCK_F": 256}, "rejected", "correctness",
                      "rel_l2 0.004 > bound 0.001", stats={"max_abs": 0.5, "rel_l2": 0.004}),
        ),
        "stage_counts": {"compile": 1, "correctness": 1},
        "memory": P.Memory(
            slow_fast=({"op": "rmsnorm", "key": "stage1", "slow_us": 120.0, "fast_us": 80.0, "config": {"B": 1}},),
            failures=(("rmsnorm [compile] arange's range must be a power of N", 3),)),
        "last_code": ("reply 2", "def launch(x):\n    return x\n")}
    return P.PromptContext(**(base | kw))


def test_contract_carries_the_tolerance_class_and_the_static_rules():
    text = P.build_prompt(_ctx()).user
    assert "Tolerance class `tolerance`" in text
    assert "atol=1e-06" in text and "rtol=0.0001" in text and "cosine_floor=0.9999" in text
    assert "fp64" in text  # the class's own docstring explains the bounds
    for name in static.ALLOWED_IMPORTS:
        assert name in text
    assert "empty_like" in text and "no try/except" in text
    assert "You may not change *what* is computed" in text


def test_reference_shapes_and_gpu_facts():
    text = P.build_prompt(_ctx()).user
    assert "return silu(gate) * up" in text
    assert "timed `stage1`: {'rows': 10250, 'ffn': 14336}, 881.7 MB" in text
    assert "`odd_ffn`" in text
    assert "## Target GPU `h200`" in text and "sm90" in text and "132 SMs (measured)" in text
    assert "4.8 TB/s (datasheet)" in text and "measured in this run: 4305 GB/s" in text


def test_gpu_facts_fall_back_to_the_datasheet_and_say_when_nothing_was_measured():
    g = P.gpu_facts("b200", "cuda", {}, None)
    assert (g.sm_count, g.sm_source, g.copy_gbps) == (148, "datasheet", None)
    assert "not measured yet in this run" in P.gpu_section(g)
    interp = P.gpu_section(P.gpu_facts(None, "interpret", {}, None))
    assert "interpreter" in interp and "measures no time" in interp


def test_best_with_per_shape_time_and_bandwidth():
    text = P.build_prompt(_ctx()).user
    assert "## Current best: reply 1" in text
    assert "stage1: p50 210.5 us, 4188 GB/s = 97.3% of copy bandwidth (1.021x vs compile, 2.500x vs eager)" in text
    assert "def launch(x, BLOCK_F=128, num_warps=4)" in text


def test_without_a_best_the_template_is_the_starting_point():
    text = P.build_prompt(_ctx(best=None, starting_point="def launch(x, BLOCK=1):\n    pass\n")).user
    assert "None accepted yet" in text and "def launch(x, BLOCK=1)" in text


def test_attempts_with_verdicts_trimmed_errors_and_statistics():
    text = P.build_prompt(_ctx()).user
    assert "reply 2 [BLOCK_F=64]: rejected at stage `compile`" in text
    assert 'File "candidate.py", line 17, in _kernel' in text  # producer paths are not the model's business
    assert "/tmp/rsi-judge" not in text and "interpreter.py" not in text
    assert "AttributeError: module 'triton.language' has no attribute 'expo'" in text
    assert "error statistics: max_abs=0.5, rel_l2=0.004" in text
    assert "Rejections in this run by stage: compile: 1, correctness: 1" in text
    assert "objective 0.980" in text
    assert "The code of reply 2 (rejected" in text


def test_memory_of_pairs_and_failure_signatures():
    text = P.build_prompt(_ctx()).user
    assert "rmsnorm `stage1`: 120.0 us -> 80.0 us" in text
    assert "3x rmsnorm [compile] arange's range must be a power of N" in text
    assert "Nothing recorded yet" in P.build_prompt(_ctx(memory=P.Memory())).user


def test_failure_signature_groups_by_shape_and_numbers():
    a = P.failure_signature("correctness", "rel_l2 0.0041 > 0.001 (output 0) at shape tiny[ffn=96,rows=3] case seed0")
    b = P.failure_signature("correctness", "rel_l2 0.0093 > 0.001 (output 0) at shape odd[ffn=200,rows=17] case large")
    assert a == b


def test_reply_format_is_in_the_system_text():
    s = P.build_prompt(_ctx()).system
    assert "Exactly one fenced ```python code block" in s
    assert "def launch(x, NAME=default, ...)" in s and "TUNABLE" in s


def test_same_evidence_same_prompt_bytes():
    a, b = P.build_prompt(_ctx()), P.build_prompt(_ctx())
    assert a == b and a.sha256 == b.sha256
    assert P.build_prompt(_ctx(stage_counts={})).sha256 != a.sha256
