"""swiglu under the Triton interpreter: the template's configs through the real harness, and the main job
(`rsi search --op-group swiglu --backend interpret --budget 5`) end to end."""

from __future__ import annotations

import json

import pytest

from rsi.cli import main
from rsi.spaces import template_source
from tests.interp.interp_helpers import assert_full_plan, judge

pytestmark = pytest.mark.interpreter


@pytest.mark.parametrize("config", [
    {"FLAT": 1, "BLOCK_F": 512, "num_warps": 4},
    {"FLAT": 0, "BLOCK_F": 64, "ROWS": 2, "num_warps": 2},
    {"FLAT": 0, "BLOCK_F": 128, "ROWS": 1, "num_warps": 4, "EVICT": "evict_first"},
])
def test_template_configs_accepted(config):
    v = judge("swiglu", config)
    assert v["status"] == "accepted", v["reason"]
    corr = v["details"]["correctness"]
    assert_full_plan("swiglu", v)
    assert corr["calls_per_trial"] == 2 and len(set(corr["seeds"])) == 5
    assert v["tolerance"]["observed"]["rel_l2"] <= v["tolerance"]["rtol"] or \
        v["tolerance"]["observed"]["rel_l2"] <= 2 * v["tolerance"]["observed"]["ref_rel_l2"]


def test_wrong_mask_rejected():
    src = template_source("swiglu").replace("mask = offs < n_elem", "mask = offs < n_elem - 1")
    v = judge("swiglu", {"FLAT": 1, "BLOCK_F": 512}, source=src)
    assert v["status"] == "rejected" and v["stage"] == "correctness"


def test_main_job_interpreter_budget_5(tmp_path, capsys):
    out = tmp_path / "summary.json"
    code = main(["--root", str(tmp_path), "search", "--op-group", "swiglu", "--backend", "interpret",
                 "--budget", "5", "--quiet", "--summary-out", str(out)])
    assert code == 0
    s = json.loads(out.read_text())
    assert s["candidates"] == 5 and s["accepted"] >= 1 and s["promoted"] == []
    assert s["best"]["per_shape"] == "timing not measured (interpreter)"
    assert not (tmp_path / "verified_kernels" / "LOCK.json").exists()  # the interpreter never promotes
    assert len(list((tmp_path / "candidates" / "swiglu").glob("*/*/kernel.py"))) == 5
    text = capsys.readouterr().out
    assert "Summary" in text and "Nothing promoted" in text
