"""--allow-proxy: records are labelled proxy and never enter the target's lock; a real promotion is locked."""

from __future__ import annotations

import json

from rsi.contract import Candidate
from rsi.refs import get_op_group
from rsi.search.loop import SearchOptions, _promote
from rsi.search.promote import decide
from rsi.spaces import load_space, template_source
from rsi.store import Store
from rsi.verified import read_lock


def _verdict(cand: Candidate) -> dict:
    rows = []
    for b in ("stage1", "per_rank", "full"):
        base = {k: {"p50_us": 300.0, "speedup": 1.5, "ci95": [1.4, 1.6], "pct_copy": 60.0, "gbps": 2500.0}
                for k in ("eager", "compile")}
        base["aa"] = {"p50_us": 200.0, "speedup": 1.0, "ci95": [0.995, 1.005], "pct_copy": 94.0, "gbps": 4000.0}
        rows.append({"shape": {"name": b, "dims": {"rows": 9562, "ffn": 14336}}, "bucket": b, "method": "m",
                     "warmup": 5, "iters": 40, "p20_us": 190.0, "p50_us": 200.0, "p80_us": 210.0, "gbps": 4000.0,
                     "pct_copy": 94.0, "copy_gbps": 4250.0, "baselines": base})
    return {"candidate": cand.hash, "status": "accepted", "stage": "accepted", "reason": "ok",
            "tolerance": {"class": "tolerance"}, "timings": rows, "details": {"correctness": {"trials": 60}}}


def _run(tmp_path, proxy: bool):
    store = Store(tmp_path / "rsi.db", tmp_path)
    opts = SearchOptions(op="swiglu", backend="cuda", target="h200", proxy=proxy, root=str(tmp_path))
    cand = Candidate("swiglu", template_source("swiglu"), {"FLAT": 1, "BLOCK_F": 1024})
    store.save_candidate(cand)
    v = _verdict(cand)
    space = load_space("swiglu")
    dec = decide(v, space.buckets, False)
    assert dec.promote
    vk = _promote(store, opts, "run-1", get_op_group("swiglu"), space, cand, v, dec, {"gpu_name": "x"})
    return store, vk


def test_proxy_is_recorded_but_never_locked(tmp_path):
    store, vk = _run(tmp_path, proxy=True)
    rec = json.loads((vk.path / "record.json").read_text())
    assert rec["proxy"] is True
    assert read_lock(tmp_path)["targets"] == {}
    assert store.promotions()[0]["locked"] == 0


def test_real_promotion_is_locked_with_provenance(tmp_path):
    store, vk = _run(tmp_path, proxy=False)
    rec = json.loads((vk.path / "record.json").read_text())
    assert rec["proxy"] is False and rec["reference"]["module"] == "rsi.refs.swiglu:reference"
    assert [s["bucket"] for s in rec["shapes"]] == ["stage1", "per_rank", "full"]
    assert rec["timings"][0]["vs"]["compile"]["speedup"] == 1.5 and rec["search"]["run_id"] == "run-1"
    assert read_lock(tmp_path)["targets"]["h200"]["swiglu"]["kernel"].startswith("swiglu/swiglu-")
    assert store.promotions()[0]["locked"] == 1


def test_locked_kernel_is_never_promoted_over_itself(tmp_path):
    from rsi.search.loop import promotion_decision

    _store, vk = _run(tmp_path, proxy=False)  # locks the candidate of _run
    opts = SearchOptions(op="swiglu", backend="cuda", target="h200", root=str(tmp_path))
    same = Candidate("swiglu", template_source("swiglu"), {"FLAT": 1, "BLOCK_F": 1024})
    v = _verdict(same)
    for row in v["timings"]:  # timed 1.03x faster than itself (H200 run 6 saw that with a rotating order)
        row["baselines"]["best"] = {"p50_us": 206.0, "speedup": 1.03, "ci95": [1.01, 1.04], "pct_copy": 90.0}
    d = promotion_decision(opts, load_space("swiglu"), same, v, vk)
    assert d is not None and not d.promote and "itself" in d.reason()
    other = Candidate("swiglu", template_source("swiglu"), {"FLAT": 1, "BLOCK_F": 2048})
    assert promotion_decision(opts, load_space("swiglu"), other, _verdict(other) | {"timings": v["timings"]}, vk).promote
    interp = SearchOptions(op="swiglu", backend="interpret", target=None, root=str(tmp_path))
    assert promotion_decision(interp, load_space("swiglu"), other, v, vk) is None
