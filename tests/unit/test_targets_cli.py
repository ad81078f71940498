import pytest

from rsi.cli import UsageError, main, parse_budget
from rsi.targets import TARGETS, TargetError, resolve_target


def test_registry_has_the_targets():
    assert set(TARGETS) == {"gb200", "b200", "h200", "h100", "gb10", "rtx5090"}
    assert TARGETS["h200"].arch == "sm90" and not TARGETS["h200"].has("mxfp8")
    assert TARGETS["b200"].has("mxfp8") and TARGETS["gb10"].memory_gb == 119.68


def test_gpu_mismatch_is_a_clear_error_without_gpu():
    with pytest.raises(TargetError, match="--allow-proxy"):
        resolve_target("h200", allow_proxy=False)
    want, local, proxy = resolve_target("h200", allow_proxy=True)
    assert want.name == "h200" and local is None and proxy
    with pytest.raises(TargetError, match="unknown GPU target"):
        resolve_target("a100", allow_proxy=True)


def test_budget_parsing():
    assert parse_budget("20") == (20, None)
    assert parse_budget("30m") == (None, 30.0)
    assert parse_budget("5,1.5m") == (5, 1.5)
    for bad in ("x", "0", "5h"):
        with pytest.raises(UsageError):
            parse_budget(bad)


def test_cli_usage_errors_exit_2(tmp_path, capsys):
    assert main(["--root", str(tmp_path), "search", "--op-group", "nope", "--backend", "interpret"]) == 2
    assert "unknown --op-group" in capsys.readouterr().err
    assert main(["--root", str(tmp_path), "search", "--op-group", "swiglu", "--backend", "cuda"]) == 2
    assert "--backend interpret" in capsys.readouterr().err
    assert main(["--root", str(tmp_path), "show"]) == 2
    assert "rsi search" in capsys.readouterr().err
    assert main(["--root", str(tmp_path), "search", "--op-group", "swiglu", "--backend", "interpret",
                 "--dry-run"]) == 0


def test_env_and_show_ops(capsys):
    assert main(["env"]) == 0
    out = capsys.readouterr().out
    assert "h200" in out and "torch" in out
    assert main(["show", "--ops"]) == 0
    assert "swiglu" in capsys.readouterr().out
