"""Verified-kernel store: records, the lock, environment mismatch rules, shape buckets, `rsi verify`."""

from __future__ import annotations

import json

import pytest

from rsi.contract import Candidate, sha256_text
from rsi.spaces import template_source
from rsi.verified import bucket_of, env_mismatch, lock_kernel, locked_kernel, read_lock, resolve, write_record

ENV = {"compute_capability": "9.0", "triton": "3.6.0", "driver": "580.159.04", "torch": "2.11.0", "cuda": "13.0"}


def _promote(root, config=None, **extra):
    cand = Candidate("swiglu", template_source("swiglu"), config or {"FLAT": 1, "BLOCK_F": 512, "num_warps": 4})
    record = {"schema": 1, "op": "swiglu", "candidate_hash": cand.hash, "source_sha256": sha256_text(cand.source),
              "config": dict(cand.config), "env": dict(ENV), "search": {"parent": None},
              "shapes": [{"shape": {"name": "per_rank", "dims": {"rows": 9562, "ffn": 14336}}, "bucket": "per_rank",
                          "dtype": "bfloat16"},
                         {"shape": {"name": "full", "dims": {"rows": 38248, "ffn": 14336}}, "bucket": "full",
                          "dtype": "bfloat16"}], **extra}
    d = write_record(root, cand, "swiglu", record)
    lock_kernel(root, "h200", "swiglu", d)
    return cand, d


def test_lock_round_trip_and_tamper(tmp_path):
    cand, d = _promote(tmp_path)
    lock = read_lock(tmp_path)
    assert lock["targets"]["h200"]["swiglu"]["kernel"] == f"swiglu/swiglu-{cand.hash[:12]}"
    vk = locked_kernel(tmp_path, "h200", "swiglu")
    assert vk.candidate.hash == cand.hash and locked_kernel(tmp_path, "h100", "swiglu") is None
    rec = json.loads((d / "record.json").read_text())
    rec["config"]["BLOCK_F"] = 64
    (d / "record.json").write_text(json.dumps(rec))
    with pytest.raises(ValueError, match="does not match the hash pinned"):
        locked_kernel(tmp_path, "h200", "swiglu")


def test_same_kernel_for_a_second_target_keeps_the_first_record(tmp_path):
    """One candidate promoted for h100, then for h200 (run 73's modulate_fp8_warp), then recorded for b200 and as a
    proxy for h200: each target's lock entry resolves to its own record; no later write overwrites a pinned one."""
    cand = Candidate("swiglu", template_source("swiglu"), {"FLAT": 1, "BLOCK_F": 512, "num_warps": 4})
    dirs = {}
    for target in ("h100", "h200"):
        record = {"schema": 1, "op": "swiglu", "candidate_hash": cand.hash, "source_sha256": sha256_text(cand.source),
                  "config": dict(cand.config), "env": {**ENV, "gpu_name": target}, "search": {"parent": None},
                  "shapes": []}
        dirs[target] = write_record(tmp_path, cand, "swiglu", record, target=target)
        lock_kernel(tmp_path, target, "swiglu", dirs[target])
    assert dirs["h100"].name == f"swiglu-{cand.hash[:12]}" and dirs["h200"].name == f"swiglu-{cand.hash[:12]}-h200"
    for target in ("h100", "h200"):
        assert locked_kernel(tmp_path, target, "swiglu").record["env"]["gpu_name"] == target
    record = {**locked_kernel(tmp_path, "h200", "swiglu").record, "verified_at": "again"}
    assert write_record(tmp_path, cand, "swiglu", record, target="h200") == dirs["h200"]   # same target: same dir
    lock_kernel(tmp_path, "h200", "swiglu", dirs["h200"])
    third = write_record(tmp_path, cand, "swiglu", {**record, "env": {**ENV, "gpu_name": "b200"}}, target="b200")
    assert third.name == f"swiglu-{cand.hash[:12]}-b200"
    # a proxy record (never locked) takes no pinned directory, its own target's included
    proxy = write_record(tmp_path, cand, "swiglu", {**record, "proxy": True}, target="h200")
    assert proxy.name == f"swiglu-{cand.hash[:12]}-h200-proxy"
    for target in ("h100", "h200"):
        assert locked_kernel(tmp_path, target, "swiglu").record["env"]["gpu_name"] == target


def test_env_mismatch_hard_and_soft(tmp_path):
    _promote(tmp_path)
    vk = locked_kernel(tmp_path, "h200", "swiglu")
    assert env_mismatch(vk.record, ENV, vk.source) == ([], [])
    hard, soft = env_mismatch(vk.record, {**ENV, "compute_capability": "10.0", "driver": "590"}, vk.source)
    assert hard and "compute capability" in hard[0] and soft and "driver" in soft[0]
    hard, _ = env_mismatch(vk.record, ENV, vk.source + "\n# edited\n")
    assert "source_sha256" in hard[0]
    hard, _ = env_mismatch(vk.record, {**ENV, "triton": "4.0.0"}, vk.source)
    assert "Triton major" in hard[0]


def test_buckets_and_resolve(tmp_path):
    _promote(tmp_path)
    vk = locked_kernel(tmp_path, "h200", "swiglu")
    assert bucket_of(vk.record, {"rows": 10250, "ffn": 14336}) == "per_rank"
    assert bucket_of(vk.record, {"rows": 37710, "ffn": 14336}) == "full"
    assert bucket_of(vk.record, {"rows": 100, "ffn": 14336}) is None  # no timing evidence that small
    assert bucket_of(vk.record, {"rows": 9562, "ffn": 128}) is None
    k, why = resolve(tmp_path, "h200", "swiglu", {"rows": 9738, "ffn": 14336}, ENV)
    assert k is not None and "per_rank" in why
    k, why = resolve(tmp_path, "h200", "swiglu", {"rows": 9738, "ffn": 14336}, {**ENV, "compute_capability": "8.0"})
    assert k is None and "refused" in why
    k, why = resolve(tmp_path, None, "swiglu", {"rows": 9738, "ffn": 14336}, ENV)
    assert k is None and "no GPU target" in why


@pytest.mark.interpreter
def test_rsi_verify_interpreter(tmp_path):
    from rsi.verify import verify_all

    _promote(tmp_path)
    results = verify_all(root=str(tmp_path), target="h200", backend="interpret", timeout_s=300)
    assert [(r["op"], r["status"]) for r in results] == [("swiglu", "accepted")]
    # the row carries the worst error statistics seen (swiglu is tolerance class: the rounding bias among them)
    obs = results[0]["observed"]
    assert obs["elem_worst_ratio"] <= 1 and abs(obs["bias_ulps"]) <= obs["bias_bound"], obs
    assert results[0]["observed_special"]


@pytest.mark.interpreter
def test_rsi_verify_fans_out_over_workers(tmp_path):
    """rsi verify --workers 2: the locked kernels judged by two local processes, rows in lock order, each naming
    its worker."""
    from rsi.verified import lock_kernel
    from rsi.verify import verify_all

    _promote(tmp_path)
    lock = json.loads((tmp_path / "verified_kernels" / "LOCK.json").read_text())
    entry = lock["targets"]["h200"]["swiglu"]
    # a second locked entry (the same kernel under a second target) so that both workers get one
    src = tmp_path / "verified_kernels" / entry["kernel"]
    lock_kernel(str(tmp_path), "h100", "swiglu", src)
    results = verify_all(root=str(tmp_path), backend="interpret", timeout_s=300, workers=2)
    assert [(r["target"], r["op"], r["status"]) for r in results] == [("h100", "swiglu", "accepted"),
                                                                        ("h200", "swiglu", "accepted")]
    assert all(r["worker"]["id"] in (0, 1) for r in results)


def _as_cute(tmp_path, monkeypatch, unavailable: str):
    """The locked swiglu kernel's record marked as a CuTe DSL kernel (4.8.1), on a machine where CuTe is
    ``unavailable`` ("" = installed, at another version)."""
    import rsi.kernel

    _promote(tmp_path, kernel_language="cute", cutlass_dsl="4.8.1")
    monkeypatch.setattr(rsi.kernel, "cute_unavailable", lambda backend: unavailable if backend == "cuda" else "GPU")
    monkeypatch.setattr(rsi.kernel, "cutlass_dsl_version", lambda: "4.9.0")
    return locked_kernel(tmp_path, "h200", "swiglu")


def test_a_cute_kernel_without_the_extra_is_refused_and_falls_back(tmp_path, monkeypatch):
    vk = _as_cute(tmp_path, monkeypatch, "CuTe DSL candidates need `pip install -e '.[cute]'`")
    hard, _ = env_mismatch(vk.record, ENV, vk.source)
    assert hard == ["a CuTe DSL kernel: CuTe DSL candidates need `pip install -e '.[cute]'`"]
    got, why = resolve(tmp_path, "h200", "swiglu", {"rows": 38248, "ffn": 14336}, ENV)
    assert got is None and "CuTe DSL kernel" in why


def test_a_cute_kernel_at_another_dsl_version_is_a_soft_mismatch(tmp_path, monkeypatch):
    vk = _as_cute(tmp_path, monkeypatch, "")
    hard, soft = env_mismatch(vk.record, ENV, vk.source)
    assert hard == [] and soft == ["nvidia-cutlass-dsl 4.8.1 != 4.9.0"]


def test_verify_skips_a_cute_kernel_off_the_gpu(tmp_path, monkeypatch):
    import rsi.verify

    _as_cute(tmp_path, monkeypatch, "")
    monkeypatch.setattr(rsi.verify, "cute_unavailable", lambda backend: "CuTe DSL candidates run on the GPU only")

    def no_pool(*a, **k):
        raise AssertionError("nothing to judge")

    monkeypatch.setattr(rsi.verify, "make_pool", lambda *a, **k: type("P", (), {
        "submit": no_pool, "results": lambda self, timeout: [], "close": lambda self: None})())
    rows = rsi.verify.verify_all(root=str(tmp_path), backend="interpret")
    assert [(r["op"], r["status"], r["reason"]) for r in rows] == [
        ("swiglu", "skipped", "CuTe DSL candidates run on the GPU only")]
