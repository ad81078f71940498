"""rsi search --first: configs judged before the heuristic (a config a sweep or probe measured), completed with the
heuristic's values, checked against the template's axes before a run is recorded, and only for a new offline run."""

from __future__ import annotations

import pytest

from rsi import kernel as K
from rsi.cli import main
from rsi.search.loop import SearchError, SearchOptions, run_search
from rsi.search.propose import check_first, first_configs, offline_proposer, runnable
from rsi.spaces import load_space


@pytest.mark.parametrize("argv", [
    ["search", "--op-group", "swiglu", "--first", "BLOCK_F", "--dry-run"],
    ["search", "--op-group", "swiglu", "--first", "=4", "--dry-run"],
    ["search", "--op-group", "swiglu", "--first", "ROWS=2", "--proposer", "replay", "--dry-run"],
    ["search", "--op-group", "swiglu", "--first", "ROWS=2", "--resume", "--dry-run"],
])
def test_bad_first_is_a_usage_error(argv, capsys):
    assert main(argv) == 2
    assert "--first" in capsys.readouterr().err


def test_first_configs_come_before_the_heuristic(tmp_path):
    space = load_space("attention").select("attention_cute")
    given = ({"BN": 64, "OVERLAP": 0}, {"BN": 64, "STAGES": 3})
    p = offline_proposer([space], f"sqlite:///{tmp_path}/optuna.db", "attention:run", first=given)
    seen = []
    for _ in range(4):
        prop = p.propose()
        seen.append(dict(prop.candidate.config))
        p.feedback(prop, {"status": "accepted"}, 1.0)
    h = space.heuristic()
    assert seen[:3] == [{**h, **given[0]}, {**h, **given[1]}, h]
    assert seen[3] not in seen[:3]


def test_first_goes_to_the_template_that_admits_it(monkeypatch, tmp_path):
    monkeypatch.setattr(K, "cute_unavailable", lambda backend: "")   # as on a GPU with the extra
    spaces, _ = runnable(load_space("attention"), "cuda")
    assert [s.template for s in spaces] == ["attention", "attention_cute"]
    given = ({"PINGPONG": 1},)
    check_first(spaces, given)
    assert first_configs(spaces[0], given) == () and first_configs(spaces[1], given)[0]["PINGPONG"] == 1
    p = offline_proposer(spaces, f"sqlite:///{tmp_path}/optuna.db", "attention:run", first=given)
    configs = []
    for _ in range(2):
        prop = p.propose()
        configs.append((prop.meta["template"], dict(prop.candidate.config)))
        p.feedback(prop, {"status": "accepted"}, 1.0)
    assert ("attention_cute", {**spaces[1].heuristic(), "PINGPONG": 1}) in configs


@pytest.mark.parametrize("given, words", [({"BN": 96}, "BN [128, 64]"), ({"BLOCK_M": 64}, "no template")])
def test_first_off_the_axes_is_refused(given, words):
    space = load_space("attention").select("attention_cute")
    with pytest.raises(ValueError, match=r"\[128, 64\]|no template") as e:
        check_first([space], (given,))
    assert words in str(e.value)


def test_a_refused_first_records_no_run(tmp_path):
    opts = SearchOptions(op="swiglu", backend="interpret", target=None, root=str(tmp_path), first=({"ROWS": 3},))
    with pytest.raises(SearchError, match="ROWS"):
        run_search(opts)
    assert not (tmp_path / ".rsi").exists()


def test_a_first_config_equal_to_the_heuristic_is_judged_once(tmp_path):
    space = load_space("attention").select("attention_cute")
    p = offline_proposer([space], f"sqlite:///{tmp_path}/optuna.db", "attention:run", first=({"DYNAMIC": 0},))
    configs = []
    for _ in range(3):
        prop = p.propose()
        configs.append(dict(prop.candidate.config))
        p.feedback(prop, {"status": "accepted"}, 1.0)
    assert configs[0] == space.heuristic() and space.heuristic() not in configs[1:]


@pytest.mark.parametrize("text, words", [("FLAT=--1", "no template"), ("num_warps=x", "no template"),
                                         ("BLOCK_F=512,BLOCK_F=1024", "given twice")])
def test_odd_first_values_are_clear_errors(tmp_path, text, words, capsys):
    code = main(["--root", str(tmp_path), "search", "--op-group", "swiglu", "--backend", "interpret",
                 "--first", text, "--budget", "1"])
    assert code == 2 and words in capsys.readouterr().err
    assert not (tmp_path / ".rsi").exists()


def test_an_empty_value_is_the_empty_string():
    from rsi.cli import _parse_config

    assert _parse_config("EVICT=,ROWS=2") == {"EVICT": "", "ROWS": 2}
