"""A template's own buckets (rsi.spaces): the CuTe attention template claims attention's long self-attention buckets
only, so a candidate from it is promoted on those (the others, where it loses, stay with the incumbents), and the
record it writes lists only those, which are all a verified kernel serves (rsi.verified.bucket_of). A template's
buckets outside the op group's are refused when the space loads. The search loop decides a candidate on its own
template's space (``Space.of``)."""

from __future__ import annotations

import shutil
from types import SimpleNamespace

import pytest

from rsi.search.loop import promotion_decision
from rsi.search.promote import decide
from rsi.spaces import SPACES_DIR, load_space
from rsi.verified import bucket_of


def test_the_cute_attention_template_claims_the_long_self_attention_buckets():
    space = load_space("attention")
    cute = space.select("attention_cute")
    assert space.buckets == ("h3_stage1", "h3_full", "h3_per_rank", "ltx_video", "ltx_text")
    assert cute.buckets == ("h3_full", "h3_per_rank")
    assert space.of(None) is space and space.of("attention") is space
    assert space.of("attention_cute").buckets == cute.buckets and space.of("attention_cute").template == "attention_cute"
    assert load_space("gelu_tanh").select("gelu_tanh_cute").buckets == load_space("gelu_tanh").buckets   # shared


def test_buckets_outside_the_op_groups_are_refused(tmp_path):
    shutil.copy(SPACES_DIR / "attention.toml", tmp_path / "attention.toml")
    path = tmp_path / "attention.toml"
    path.write_text(path.read_text().replace('buckets = ["h3_full", "h3_per_rank"]', 'buckets = ["h3_full", "huge"]'))
    with pytest.raises(ValueError, match="must be a non-empty subset"):
        load_space("attention", tmp_path)
    path.write_text(path.read_text().replace('buckets = ["h3_full", "huge"]', "buckets = []"))
    with pytest.raises(ValueError, match="must be a non-empty subset"):
        load_space("attention", tmp_path)


def _row(bucket: str, rows: int, heads: int, ratio: float) -> dict:
    """A bucket where the candidate runs at ``ratio`` x SDPA cuDNN (CIs tight around it, A/A band 0.01)."""
    return {"shape": {"name": bucket, "dims": {"rows": rows, "heads": heads, "docs": 2}}, "bucket": bucket,
            "p50_us": 100.0, "baselines": {"aa": {"p50_us": 100.0, "speedup": 1.0, "ci95": [0.99, 1.01]},
                                           "sdpa_cudnn": {"p50_us": 100.0 * ratio, "speedup": ratio,
                                                          "ci95": [ratio - 0.01, ratio + 0.01]}}}


def test_a_candidate_is_promoted_on_its_templates_buckets_and_serves_only_those():
    space = load_space("attention")
    rows = [_row("h3_stage1", 10304, 56, 1.01), _row("h3_full", 38272, 56, 1.17), _row("h3_per_rank", 38272, 14, 1.14),
            _row("ltx_video", 16128, 32, 1.04), _row("ltx_text", 16128, 32, 0.63)]
    verdict = {"status": "accepted", "timings": rows}
    assert not decide(verdict, space.buckets, False, ("sdpa_cudnn",)).promote    # all five: ltx_text loses
    dec = decide(verdict, space.of("attention_cute").buckets, False, ("sdpa_cudnn",))
    assert dec.promote and set(dec.per_bucket) == {"h3_full", "h3_per_rank"}
    # the record's shapes are the claimed buckets' (rsi.search.promote.build_record), so the runtime serves them only
    record = {"shapes": [{"shape": r["shape"], "bucket": r["bucket"]} for r in rows
                         if r["bucket"] in space.of("attention_cute").buckets]}
    assert bucket_of(record, {"rows": 38248, "heads": 56, "docs": 2}) == "h3_full"
    assert bucket_of(record, {"rows": 38272, "heads": 14, "docs": 2}) == "h3_per_rank"
    assert bucket_of(record, {"rows": 10304, "heads": 56, "docs": 2}) is None       # h3_stage1: SDPA serves
    assert bucket_of(record, {"rows": 16128, "heads": 32, "docs": 1}) is None       # the refiner: SDPA serves


def test_a_narrower_template_never_replaces_a_wider_locked_kernel():
    """One kernel a target and op: a candidate of attention_cute (two buckets) that wins them would, promoted, take the
    lock from a kernel serving five, and three buckets would lose theirs; it is refused with the reason. Over a
    kernel serving only its own buckets the rule decides as usual."""
    space = load_space("attention")
    cute = space.of("attention_cute")
    rows = [_row(b, 38272, 56, 1.17) for b in space.buckets]
    verdict = {"status": "accepted", "timings": rows}
    opts = SimpleNamespace(backend="cuda", target="h200")
    cand = SimpleNamespace(hash="new")
    wide = SimpleNamespace(record={"candidate_hash": "old", "shapes": [{"bucket": b} for b in space.buckets]})
    dec = promotion_decision(opts, cute, cand, verdict, wide)
    assert not dec.promote and "also serves h3_stage1, ltx_text, ltx_video" in dec.per_bucket["all"]
    narrow = SimpleNamespace(record={"candidate_hash": "old", "shapes": [{"bucket": "h3_full"}]})
    dec = promotion_decision(opts, cute, cand, verdict, narrow)
    assert "all" not in dec.per_bucket and set(dec.per_bucket) == {"h3_full", "h3_per_rank"}
    assert not promotion_decision(opts, space, cand, verdict, wide).per_bucket.get("all")   # the wide template: as before
