"""A space with a CuTe DSL template beside its Triton one (search_spaces/gelu_tanh.toml): where CuTe candidates cannot
run (no GPU, or no [cute] extra, as on CI) the CuTe template is skipped with a note, never proposed or judged; where
they can, the offline proposer takes turns between the two templates. K.cute_launch and the judge say how to get
CuTe when it is missing. No GPU and no cutlass needed."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from rsi import kernel as K
from rsi.cli import main
from rsi.contract import Candidate
from rsi.search.propose import MixedProposer, OfflineProposer, offline_proposer, runnable
from rsi.spaces import load_space, template_source


@pytest.fixture
def no_cutlass(monkeypatch):
    """CuTe DSL absent, whether or not this machine has it (the import check finds no cutlass package)."""
    real = importlib.util.find_spec
    monkeypatch.setattr(K.importlib.util, "find_spec", lambda name, *a: None if name == "cutlass" else real(name, *a))


def test_cute_template_is_skipped_off_the_gpu():
    spaces, notes = runnable(load_space("gelu_tanh"), "interpret")
    assert [s.template for s in spaces] == ["gelu_tanh"] and not spaces[0].alternatives
    assert len(notes) == 1 and "gelu_tanh_cute (CuTe DSL) skipped" in notes[0] and "GPU only" in notes[0]


def test_cute_template_is_skipped_without_the_extra(no_cutlass):
    spaces, notes = runnable(load_space("gelu_tanh"), "cuda")
    assert [s.template for s in spaces] == ["gelu_tanh"]
    assert len(notes) == 1 and "pip install -e '.[cute]'" in notes[0]
    spaces, notes = runnable(load_space("swiglu"), "cuda")   # a Triton-only space: as before
    assert [s.template for s in spaces] == ["swiglu"] and notes == []


def test_proposer_takes_turns_between_the_templates(monkeypatch, tmp_path):
    monkeypatch.setattr(K, "cute_unavailable", lambda backend: "")   # as on a GPU with the extra
    space = load_space("gelu_tanh")
    spaces, notes = runnable(space, "cuda")
    assert [s.template for s in spaces] == ["gelu_tanh", "gelu_tanh_cute"] and notes == []
    p = offline_proposer(spaces, f"sqlite:///{tmp_path}/optuna.db", "gelu_tanh:run", seed=0)
    assert isinstance(p, MixedProposer)
    seen, hashes = [], {"gelu_tanh": set(), "gelu_tanh_cute": set()}
    for _ in range(4):
        prop = p.propose()
        seen.append((prop.meta["template"], dict(prop.candidate.config)))
        hashes[prop.meta["template"]].add(prop.candidate.hash)
        assert prop.candidate.source == template_source(prop.meta["template"])
        p.feedback(prop, {"status": "accepted"}, 1.0)
    assert [t for t, _ in seen] == ["gelu_tanh", "gelu_tanh_cute"] * 2
    triton, cute = space.heuristic(), space.select("gelu_tanh_cute").heuristic()
    assert {k: seen[0][1][k] for k in triton} == triton and seen[1][1] == cute   # each study starts at its own
    studies = p.by_template["gelu_tanh"].study, p.by_template["gelu_tanh_cute"].study
    assert [s.study_name for s in studies] == ["gelu_tanh:run", "gelu_tanh:run:gelu_tanh_cute"]
    for template, sub in p.by_template.items():   # each study got the feedback of its own proposals
        assert set(sub._seen) == hashes[template] and len(hashes[template]) == 2


def test_one_template_keeps_the_plain_proposer(tmp_path):
    spaces, _ = runnable(load_space("gelu_tanh"), "interpret")
    p = offline_proposer(spaces, f"sqlite:///{tmp_path}/optuna.db", "gelu_tanh:run")
    assert isinstance(p, OfflineProposer) and p.study.study_name == "gelu_tanh:run"


def test_search_of_an_unrunnable_or_unknown_template_is_a_usage_error(tmp_path, capsys):
    base = ["--root", str(tmp_path), "search", "--op-group", "gelu_tanh", "--backend", "interpret", "--budget", "1"]
    assert main([*base, "--template", "gelu_tanh_cute"]) == 2
    assert "CuTe DSL candidates run on the GPU only" in capsys.readouterr().err
    assert main([*base, "--template", "nope"]) == 2
    assert "declares gelu_tanh, gelu_tanh_cute" in capsys.readouterr().err
    assert not (tmp_path / ".rsi").exists()   # refused before a run was recorded


def test_a_declared_template_must_exist(tmp_path):
    text = (load_space.__globals__["SPACES_DIR"] / "gelu_tanh.toml").read_text()
    (tmp_path / "gelu_tanh.toml").write_text(text.replace("templates.gelu_tanh_cute", "templates.gelu_tanh_nope"))
    with pytest.raises(ValueError, match="no template rsi/templates/gelu_tanh_nope.py"):
        load_space("gelu_tanh", tmp_path)


def test_cute_launch_without_cutlass_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "cutlass", None)   # import cutlass raises ImportError
    with pytest.raises(ImportError, match=r"pip install -e '\.\[cute\]'"):
        K.cute_launch(lambda x, stream: None, object())


def test_judge_rejects_cute_candidates_it_cannot_run_and_says_why():
    from rsi.harness.judge import Judge, JudgeOptions

    space = load_space("gelu_tanh").select("gelu_tanh_cute")
    with Judge(JudgeOptions(backend="interpret")) as judge:
        v = judge.evaluate(Candidate("gelu_tanh", template_source("gelu_tanh_cute"), space.heuristic()))
    assert (v["status"], v["stage"]) == ("rejected", "compile")
    assert "GPU only" in v["reason"] and v["details"]["kernel_language"] == "cute"


def test_search_skips_the_cute_template_and_judges_the_triton_one(tmp_path):
    from rsi.search.loop import SearchOptions, run_search

    summary = run_search(SearchOptions(op="gelu_tanh", backend="interpret", target=None, budget_candidates=1,
                                       root=str(tmp_path), quiet=True))
    assert (summary["candidates"], summary["accepted"], summary["rejected_by_stage"]) == (1, 1, {})
    note = "template gelu_tanh_cute (CuTe DSL) skipped: CuTe DSL candidates run on the GPU only (backend interpret)"
    assert summary["skipped_templates"] == [note]
