"""The nightly report as a person sees it: report.html rendered by headless Chromium (screenshot and DOM), plus
report.md, results.csv and repro.sh, on a recorded history of four nights and a night with a slowed stage."""

import csv
import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from rsi.nightly import findings as F
from rsi.nightly import report
from rsi.nightly.compare import aa_of
from rsi.nightly.extract import STAGES
from rsi.nightly.figure import Figure
from rsi.nightly.history import NightlyRun
from rsi.nightly.next import rank
from rsi.nightly.tables import Report
from rsi.search.stats import paired_ratio_ci

ROUTE = "two-stage"
SETUP = "full 1344x768 5s two-stage steps=4"


def _night(seed: int, slow_stage1: float = 1.0) -> dict[str, Figure]:
    rng = random.Random(seed)

    def noisy(x: float, n: int) -> list[float]:
        return [x * rng.lognormvariate(0, 0.01) for _ in range(n)]

    a, b = noisy(200.0, 30), noisy(200.0, 30)
    figs = [Figure("verify/modulate/stage1", "modulate", "modulate stage1: locked kernel", "us", tuple(a),
                   paired_ratio_ci(b, a), True, "reps=30", {"pct_copy": 80 + rng.random(), "kernel": "modulate-x"})]
    base = {"text": 0.01, "stage1": 2.0, "upscale": 0.1, "adapt": 0.1, "stage2": 3.0, "decode_video": 1.5,
            "decode_audio": 0.2, "mux": 0.8}
    base["stage1"] *= slow_stage1
    for st in STAGES[ROUTE]:
        if st in base:
            xs = noisy(base[st], 7)
            figs.append(Figure(f"pipeline/{ROUTE}/{st}", f"pipeline/{ROUTE}", f"{ROUTE}: {st}", "s", tuple(xs),
                               aa_of([[x] for x in xs]), True, SETUP, {"route": ROUTE, "stage": st}))
    xs = noisy(sum(base.values()), 7)
    figs.append(Figure(f"pipeline/{ROUTE}/request_total", f"pipeline/{ROUTE}", f"{ROUTE}: request_total", "s",
                       tuple(xs), aa_of([[x] for x in xs]), True, SETUP, {"route": ROUTE, "stage": "request_total"}))
    dims = {"rows": 10250, "hidden": 5376, "table": 6}
    xs = noisy(0.05 * slow_stage1, 7)
    figs.append(Figure(f"pipeline/{ROUTE}/op/modulate/x", "modulate", f"{ROUTE}: modulate per request", "s",
                       tuple(xs), aa_of([[x] for x in xs]), True, SETUP,
                       {"route": ROUTE, "op": "modulate", "dims": dims, "calls": 400, "kernel": "modulate-x"}))
    return {f.key: f for f in figs}


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    out = tmp_path_factory.mktemp("nightly")
    hist = [NightlyRun(f"2026010{k}-030000-abc{k}", float(k), {}, {"verdicts": []}, _night(k), "store")
            for k in range(4, 0, -1)]                          # newest first
    figs = _night(99, slow_stage1=1.5)
    comps = F.comparisons(figs, hist[0], hist)
    verdicts = [{"target": "h200", "op": "modulate", "kernel": "modulate-x", "status": "accepted",
                 "reason": "[accepted] ok", "timed": True}]
    phases = [{"name": "verify:modulate", "kind": "verify", "status": "ok", "rc": 0, "wall_s": 12.0,
               "command": ["python", "-m", "rsi", "verify", "--op-group", "modulate", "--out", f"{out}/work/v.json"],
               "log": "logs/verify-modulate.log", "error": ""}]
    finds = F.assess(figs, comps, phases, verdicts, {"env": {}, "lock": {}}, hist[0])
    state = {"run_id": "20260105-030000-tonite", "argv": ["nightly", "--gpu", "h200", "--out", "x"],
             "env": {"gpu_name": "NVIDIA H200", "torch": "2.13.0", "triton": "3.6.0", "rsi_commit": "abc"},
             "lock": {"sha256": "f" * 64}, "repro_env": {"RSI_BWRAP": "/opt/bwrap"}}
    rep = Report(out, state, figs, comps, finds, verdicts, rank(figs, "h200", 4000.0), phases, hist[0], hist,
                 F.exit_code(finds))
    return rep, report.write_all(rep)


def test_files_say_what_regressed(written):
    rep, files = written
    assert rep.code == 1
    md = files["md"].read_text()
    regressions = md.split("## Regressions")[1].split("## Changes")[0]
    assert "two-stage: stage1" in regressions and "two-stage: decode_video" not in regressions
    rows = list(csv.DictReader(files["csv"].open()))
    assert len(rows) == len(rep.figures)
    row = next(r for r in rows if r["key"] == "pipeline/two-stage/stage1")
    assert row["baseline_status"] == "slower" and float(row["baseline_ratio"]) > 1.3
    assert next(r for r in rows if r["key"] == "pipeline/two-stage/adapt")["baseline_status"] == "within noise"
    repro = files["repro"].read_text()
    assert "export RSI_BWRAP=/opt/bwrap" in repro and '"$PY" -m rsi nightly --gpu h200 --out "$OUT"' in repro
    assert '# python -m rsi verify --op-group modulate --out "$OUT"/work/v.json' in repro
    assert (rep.out / "plots" / "waterfall-two-stage.png").stat().st_size > 5000


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(_chromium() is None, reason="headless Chromium is not installed (.ci/run installs Debian's "
                                                 "chromium package)")
def test_report_html_in_headless_chromium(written, tmp_path):
    import numpy as np
    from PIL import Image

    _, files = written
    url = Path(files["html"]).resolve().as_uri()
    flags = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--window-size=1280,2400"]
    shot = tmp_path / "report.png"
    subprocess.run([*flags, f"--screenshot={shot}", url], capture_output=True, timeout=120, check=True)
    dom = subprocess.run([*flags, "--dump-dom", url], capture_output=True, text=True, timeout=120, check=True).stdout
    img = Image.open(shot).convert("RGB")
    assert img.size == (1280, 2400)
    px = np.asarray(img).reshape(-1, 3)
    assert len(np.unique(px, axis=0)) > 200                       # text, tables and plots, not a blank page
    top = np.asarray(img.crop((0, 0, 1280, 300))).reshape(-1, 3).astype(int)
    assert (np.abs(top - [253, 226, 225]).sum(axis=1) < 12).sum() > 5000     # the red verdict band (.bad)
    for section in ("summary", "regressions", "verify", "next", "pipeline", "op-groups", "phases", "environment"):
        assert f'id="{section}"' in dom
    regressions = dom.split('id="regressions"')[1].split("</section>")[0]
    assert "<table" in regressions and "two-stage: stage1" in regressions
    assert "REGRESSED (exit 1)" in dom
    imgs = re.findall(r'<img alt="([^"]+)" src="data:image/png;base64,([A-Za-z0-9+/=]{2000,})"', dom)
    assert {a for a, _ in imgs} >= {"two-stage waterfall", "two-stage history", "modulate over time"}
    assert dom.count("<table") >= 6


def test_a_skipped_verify_is_a_note_and_a_rejected_one_a_regression():
    """rsi verify skips a CuTe DSL kernel off the GPU: the night notes it; a rejected kernel stays a regression."""
    verdicts = [{"target": "h200", "op": "attention", "kernel": "attention-x", "status": "skipped",
                 "reason": "CuTe DSL candidates run on the GPU only (backend interpret)"},
                {"target": "h200", "op": "modulate", "kernel": "modulate-x", "status": "rejected",
                 "reason": "[correctness] wrong"}]
    finds = F.assess({}, [], [], verdicts, {"env": {}, "lock": {}}, None)
    got = {(f.severity, f.kind, f.what) for f in finds}
    assert ("note", "verify skipped", "attention (attention-x)") in got
    assert ("regression", "verify", "modulate (modulate-x)") in got and F.exit_code(finds) == 1
