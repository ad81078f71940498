"""The LoRA merge diagnostic: how many nonzero updates round back to the bf16 weight."""

from __future__ import annotations

import json

import torch

from rsi.lora_diag import lora_rounding_diag, main, merge_survival, render_markdown


def test_small_updates_round_back_large_ones_survive():
    d = lora_rounding_diag(256, 256, ranks=(64, 128), b_stds=(1e-2, 1e-3, 1e-4), seed=0)
    assert d["weight"]["shape"] == [256, 256] and len(d["results"]) == 6
    for r in d["results"]:
        assert 0.0 <= r["fraction_rounded_back"] <= 1.0 and r["nonzero_updates"] > 0
    by = {(r["rank"], r["b_std"]): r for r in d["results"]}
    for rank in (64, 128):
        fr = [by[(rank, b)]["fraction_rounded_back"] for b in (1e-2, 1e-3, 1e-4)]
        assert fr[0] < fr[1] < fr[2]  # smaller updates vanish more often
        assert fr[2] > 0.5            # a 1e-4 adapter mostly disappears in a merged bf16 weight
    # the update is ~rank-times larger per entry at higher rank (alpha = 2r), so fewer entries vanish
    assert by[(128, 1e-4)]["fraction_rounded_back"] < by[(64, 1e-4)]["fraction_rounded_back"]
    json.dumps(d)  # printable into a record


def test_merge_survival_exact_cases():
    w = torch.tensor([1.0, 1.0, 1.0, 0.0], dtype=torch.bfloat16)
    delta = torch.tensor([1e-4, 0.5, 0.0, 1e-30])  # lost, kept, zero (not counted), representable near 0
    s = merge_survival(w, delta)
    assert s["nonzero_updates"] == 3
    assert abs(s["fraction_rounded_back"] - 1 / 3) < 1e-9


def test_markdown_and_cli(capsys):
    d = lora_rounding_diag(128, 128, ranks=(64,), b_stds=(1e-4,), seed=1)
    md = render_markdown(d)
    assert "| 64 | 1e-04 |" in md and "rounded back" in md
    assert main(["--size", "128", "--ranks", "64", "--b-stds", "1e-4"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["results"][0]["rank"] == 64
