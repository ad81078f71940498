"""Shape special-casing in CuTe bodies through the doors the fifteenth session's review pass found open (a
speed-rewarded adversary's view of rsi/harness/static_cute.py rule C4): a value computed from tensor metadata with a
constant folded in (``cute.size(acc_s) - 64``, zero at one shape only) must not choose a store index, a coordinate,
a tile, a named barrier or its thread count, and must not be passed into a @cute.jit helper, where the parameter
counts as plain metadata and the folded constant would be forgotten (the helper could then store at it). Each was
accepted before the fix; each is a one-line change of the CuTe attention template, which itself passes. Pure AST."""

from __future__ import annotations

import pytest

from rsi.harness.static import check_source
from rsi.spaces import template_source

ATTN = template_source("attention_cute")
LINE = "            wg = ctid // 128\n"
HELPER = "@cute.jit\ndef _st(out, k):\n    out[(k, 0, 0)] = 0.0\n\n\n"


def _inject(body: str, helper: str = "") -> str:
    assert ATTN.count(LINE) == 1
    src = ATTN.replace(LINE, LINE + body + "\n", 1)
    return src.replace("@cute.kernel\ndef _attention_kernel(", helper + "@cute.kernel\ndef _attention_kernel(", 1)


def test_template_passes():
    assert check_source(ATTN).ok


@pytest.mark.parametrize("body, helper, why", [
    ("            out[(cute.size(acc_s) - 64, 0, 0)] = 0.0", "", "selects by shape"),
    ("            k = cute.size(acc_s) - 64\n            out[(k, 0, 0)] = 0.0", "", "selects by shape"),
    ("            t = cute.domain_offset((cute.size(acc_s) - 64, 0, 0), out)", "", "selects by shape"),
    ("            t = cute.local_tile(out, (cute.size(acc_s) - 63, 1, 1), (0, 0, 0))", "", "selects by shape"),
    ("            cute.arch.barrier(barrier_id=cute.size(acc_s) - 63, number_of_threads=128)", "", "selects by shape"),
    ("            cute.arch.barrier_arrive(barrier_id=3, number_of_threads=cute.size(acc_s) * 4 - 0)", "",
     "selects by shape"),
    ("            _st(out, cute.size(acc_s) - 64)", HELPER, "constant folded in"),
    ("            _zero_v_rows(sV, 0, cute.size(acc_s) - 64, wg_tid, 1, BN, D)", "", "constant folded in"),
])
def test_shape_steering_rejected(body, helper, why):
    r = check_source(_inject(body, helper))
    assert not r.ok, f"accepted: {body.strip()}"
    assert why in r.reason, r.reason
