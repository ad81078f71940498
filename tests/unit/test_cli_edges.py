"""Issue 16, items 12 and 14-16: usage errors exit 2 before any work, the lock is found the documented way, and a
wheel ships the search spaces and the verified kernels."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from rsi.cli import main
from rsi.verified import find_root, installed_root

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("argv", [
    ["search", "--op-group", "swiglu", "--budget", "0m", "--dry-run"],
    ["search", "--op-group", "swiglu", "--budget", "0", "--dry-run"],
    ["search", "--op-group", "swiglu", "--gpu", "tpu9", "--backend", "interpret", "--dry-run"],
    ["verify", "--gpu", "tpu9", "--backend", "interpret"],
    ["search", "--op-group", "nope", "--dry-run"],
])
def test_usage_errors_exit_2(argv, capsys):
    assert main(argv) == 2
    assert "error:" in capsys.readouterr().err


@pytest.mark.parametrize("seed", ["-1", str(2**63), "abc"])
def test_out_of_range_seed_is_a_usage_error(seed):
    with pytest.raises(SystemExit) as e:
        main(["search", "--op-group", "swiglu", "--seed", seed, "--dry-run"])
    assert e.value.code == 2


def test_verify_dry_run_judges_nothing(monkeypatch, capsys):
    import rsi.verify

    def boom(**kw):
        raise AssertionError("verify --dry-run must not judge")

    monkeypatch.setattr(rsi.verify, "verify_all", boom)
    assert main(["--root", str(REPO), "verify", "--backend", "interpret", "--dry-run"]) == 0
    assert "would verify h200 swiglu" in capsys.readouterr().out


def test_find_root_order(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RSI_ROOT", raising=False)
    assert find_root(None) == (installed_root(), "the installed rsi package")
    (tmp_path / "verified_kernels").mkdir()
    (tmp_path / "verified_kernels" / "LOCK.json").write_text("{}")
    assert find_root(None) == (Path("."), "the current directory")
    monkeypatch.setenv("RSI_ROOT", "/somewhere")
    assert find_root(None) == (Path("/somewhere"), "$RSI_ROOT")
    assert find_root("/explicit") == (Path("/explicit"), "--root")


def test_wheel_ships_spaces_templates_and_kernels(tmp_path):
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "--no-build-isolation",
                        "-q", "-w", str(tmp_path)], capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    (whl,) = tmp_path.glob("rsi-*.whl")
    names = set(zipfile.ZipFile(whl).namelist())
    assert {f"search_spaces/{p.name}" for p in (REPO / "search_spaces").glob("*.toml")} <= names
    assert "verified_kernels/LOCK.json" in names and "rsi/templates/swiglu.py" in names
    assert any(n.startswith("verified_kernels/swiglu/") and n.endswith("/kernel.py") for n in names)


def test_resume_takes_an_explicit_budget_equal_to_the_default(tmp_path, capsys):
    """A run saved with 50 candidates, resumed with an explicit --budget 20 (the default's value): 20 is taken;
    without the flag the saved 50 is kept."""
    from rsi.search.loop import SearchOptions, _resume_options
    from rsi.store import Store

    store = Store(tmp_path / "rsi.db", tmp_path)
    saved = SearchOptions(op="swiglu", backend="interpret", target=None, budget_candidates=50)
    run = store.create_run("swiglu", None, "interpret", "offline", {}, {})
    given = SearchOptions(op="swiglu", backend="interpret", target=None, budget_candidates=20,
                          explicit=("budget_candidates",))
    assert _resume_options(store, run, saved, given).budget_candidates == 20
    plain = SearchOptions(op="swiglu", backend="interpret", target=None)
    assert _resume_options(store, run, saved, plain).budget_candidates == 50
    store.close()
