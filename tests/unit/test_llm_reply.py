"""Reply parsing: exactly one code block, an entry point that takes the op's inputs, tunables declared as tuples."""

from __future__ import annotations

import pytest

from rsi.harness.static import check_source
from rsi.llm.reply import parse_reply
from tests.unit.llm_servers import BROKEN_KERNEL, CHEAT_KERNEL, GOOD_KERNEL, reply


def test_good_reply_gives_source_defaults_and_tunables():
    r = parse_reply(reply(GOOD_KERNEL), ["x"])
    assert r.ok, r.reason
    assert r.source == GOOD_KERNEL
    assert r.config == {"BLOCK_F": 128, "num_warps": 4}
    assert r.tunable == (("BLOCK_F", (64, 128, 256)), ("num_warps", (2, 4)))
    assert r.combinations() == 6


def test_tunable_format_passes_the_static_checker():
    # the declaration must survive the contract's own rule (module-level values are immutable constants)
    assert check_source(parse_reply(reply(GOOD_KERNEL), ["x"]).source).ok


def test_reply_without_tunables_has_an_empty_config():
    src = GOOD_KERNEL.replace('TUNABLE = (("BLOCK_F", (64, 128, 256)), ("num_warps", (2, 4)))\n', "")
    r = parse_reply(reply(src), ["x"])
    assert r.ok and r.config == {} and r.tunable == ()


def test_broken_and_cheating_code_still_parse():
    # whether code compiles or honours the contract is for the harness to judge, not the reply parser
    assert parse_reply(reply(BROKEN_KERNEL), ["x"]).ok
    assert parse_reply(reply(CHEAT_KERNEL), ["x"]).ok


@pytest.mark.parametrize("text, words", [
    ("I would tile the rows.", "no fenced code block"),
    ("```python\ndef launch(x):\n    return x\n", "never closed"),
    (reply(GOOD_KERNEL) + "\n```python\nprint(1)\n```\n", "2 code blocks"),
    ("```cuda\n__global__ void k() {}\n```", "tagged 'cuda'"),
    ("```python\ndef launch(x:\n```", "syntax error at line 1"),
    ("```python\ndef run(x):\n    return x\n```", "no top-level `def launch"),
    ("```python\ndef launch(x, y):\n    return x\n```", "2 required positional"),
    ('```python\nTUNABLE = [("B", (1, 2))]\ndef launch(x, B=1):\n    return x\n```', "tuples, not lists"),
    ('```python\nTUNABLE = (("B", (1, 2)),)\ndef launch(x, B=3):\n    return x\n```', "B=3 is not one of"),
    ('```python\nTUNABLE = (("B", (1, 2)),)\ndef launch(x, B=True):\n    return x\n```', "B=True is not one of"),
    ('```python\nTUNABLE = (("C", (1, 2)),)\ndef launch(x, B=1):\n    return x\n```', "'C', which is not a keyword"),
    ('```python\nTUNABLE = (("B", (1, 1)),)\ndef launch(x, B=1):\n    return x\n```', "twice"),
    ('```python\nTUNABLE = (("B", tuple(range(3))),)\ndef launch(x, B=1):\n    return x\n```', "literal"),
])
def test_malformed_replies_are_rejected_with_a_reason(text, words):
    r = parse_reply(text, ["x"])
    assert not r.ok
    assert words in r.reason


def test_varargs_entry_point_is_accepted():
    assert parse_reply("```python\ndef launch(*inputs, B=1):\n    return inputs[0]\n```", ["x"]).ok
