"""`rsi bench` result assembly and the README performance table, on synthetic numbers (no GPU needed)."""

from __future__ import annotations

import argparse

import pytest

from rsi import bench


def _summary(p50, spread=0.05):
    return {"p20_us": p50 * (1 - spread), "p50_us": p50, "p80_us": p50 * (1 + spread), "n": 40}


def _results():
    copy = 4000.0
    rows = [
        bench.assemble_row("modulate", "per_rank", {"rows": 9562, "hidden": 5376, "table": 9}, 205_641_216,
                           {"eager": _summary(960.0), "compile": _summary(85.0), "verified": _summary(62.0)}, copy,
                           verified="modulate-0123456789ab"),
        bench.assemble_row("head_merge", "w1", {"rows": 38248, "heads": 56, "world": 1}, 1_096_679_424,
                           {"eager": _summary(1.3), "compile": _summary(1.3)}, copy,
                           notes={"verified": "no verified kernel at w1: no kernel locked"}),
    ]
    return {"schema": 1, "command": "rsi bench --op-group all --gpu h200 --reps 40", "target": "h200",
            "env": {"gpu_name": "NVIDIA H200", "torch": "2.11.0", "triton": "3.6.0", "rsi_commit": "abcdef0123456",
                    "rsi_dirty": False},
            "copy": {"gbps": copy}, "timing": {"method": "cuda_event+l2_flush+interleaved", "reps": 40},
            "created": "2026-11-30T10:00:00Z", "rows": rows}


def test_assemble_row_bandwidth_and_speedups():
    r = _results()["rows"][0]
    v = r["impls"]["verified"]
    assert v["p20_us"] < v["p50_us"] < v["p80_us"]
    assert v["gbps"] == pytest.approx(205_641_216 / 62e-6 / 1e9)
    assert v["pct_copy"] == pytest.approx(100 * v["gbps"] / 4000.0)
    assert r["verified_vs_compile"] == pytest.approx(85.0 / 62.0)
    assert r["verified_vs_eager"] == pytest.approx(960.0 / 62.0)
    assert "verified_vs_liger" not in r and r["verified_kernel"] == "modulate-0123456789ab"
    assert "verified_vs_compile" not in _results()["rows"][1]


def test_render_markdown_table():
    md = bench.render_markdown(_results())
    assert "rsi bench --op-group all --gpu h200 --reps 40" in md  # the exact command line
    assert "NVIDIA H200" in md and "4000 GB/s" in md and "abcdef0123" in md
    lines = [ln for ln in md.splitlines() if ln.startswith("| modulate")]
    assert len(lines) == 1 and "62.0 µs" in lines[0] and "1.37x" in lines[0]
    assert "| - |" in lines[0]  # no Liger for modulate
    hm = next(ln for ln in md.splitlines() if ln.startswith("| head_merge"))
    assert "‡" in hm and "‡ above the copy bandwidth" in md  # a view, not a copy
    assert "head_merge: no verified kernel at w1" in md


def _args(*argv):
    p = argparse.ArgumentParser()
    p.add_argument("--root", default=".")
    sub = p.add_subparsers()
    bench.add_parser(sub)
    return p.parse_args(["bench", *argv])


def test_cli_usage_errors_and_dry_run(capsys):
    a = _args("--op-group", "nope")
    assert a.fn(a) == 2
    a = _args("--gpu", "h999")
    assert a.fn(a) == 2
    a = _args("--op-group", "modulate", "--dry-run")
    assert a.fn(a) == 0 and "modulate" in capsys.readouterr().out
    assert bench._command_line(_args("--op-group", "all", "--gpu", "h200", "--reps", "20", "--out", "b.json")) == \
        "rsi bench --op-group all --gpu h200 --reps 20 --out b.json"


def test_needs_a_gpu(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(bench.BenchError, match="CUDA GPU"):
        bench.run_bench(["modulate"])
    a = _args("--op-group", "modulate")
    assert a.fn(a) == 2


def test_incumbents_and_approximate_rows():
    """Attention's row names its fastest incumbent and the verified kernel's ratio to it; an approximate op group's
    row says so, with the recorded error against the exact op."""
    from rsi.search.display import approximate_label

    names = ("sdpa_cudnn", "sdpa_flash", "sdpa_efficient", "flex")
    att = bench.assemble_row("attention", "h3_full", {"rows": 38272, "heads": 56, "docs": 2}, 2_194_669_576,
                             {"eager": _summary(1.0e6), "compile": _summary(9.0e5), "verified": _summary(70_000.0),
                              "sdpa_cudnn": _summary(73_900.0), "sdpa_flash": _summary(116_700.0),
                              "flex": _summary(90_000.0)}, 4000.0, verified="attention-0123456789ab",
                             notes={"sdpa_efficient": "sdpa_efficient not timed at h3_full: raised RuntimeError: x"},
                             incumbents=names)
    assert att["fastest_incumbent"] == "sdpa_cudnn"
    assert att["verified_vs_incumbent"] == pytest.approx(73_900.0 / 70_000.0) and att["approximate"] == ""
    tol = {"class": "approximate", "observed": {"rel_l2": 0.0123, "cosine": 0.99992}}
    fp8 = bench.assemble_row("attention_fp8", "h3_full", {"rows": 38272, "heads": 56, "docs": 2}, 2_194_669_576,
                             {"eager": _summary(1.0e6), "verified": _summary(40_000.0),
                              "sdpa_cudnn": _summary(73_900.0)}, 4000.0, incumbents=names,
                             approximate=approximate_label(tol))
    results = _results()
    results["rows"] += [att, fp8]
    md = bench.render_markdown(results)
    row = next(ln for ln in md.splitlines() if ln.startswith("| attention |"))
    assert "sdpa_cudnn: 73900.0 µs" in row and row.endswith("| 1.06x |")
    row = next(ln for ln in md.splitlines() if ln.startswith("| attention_fp8"))
    assert "attention_fp8 (approximate: rel_l2 1.23e-02, cosine 0.99992 vs the exact op)" in row
    assert "sdpa_efficient not timed at h3_full" in md
    modulate = next(ln for ln in md.splitlines() if ln.startswith("| modulate"))
    assert modulate.endswith("| 1.37x | - | - |") and "approximate" not in modulate
    assert approximate_label({"class": "tolerance", "observed": {"rel_l2": 0.1, "cosine": 0.9}}) == ""
    assert approximate_label({"class": "approximate"}) == "approximate"
