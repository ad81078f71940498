from rsi.search.promote import decide


def _row(bucket, cand_p50, comp_ratio, comp_ci, comp_pct, eager_ci=(3.0, 3.2), best=None):
    base = {"eager": {"p50_us": cand_p50 * 3.1, "speedup": 3.1, "ci95": list(eager_ci), "pct_copy": 30.0},
            "compile": {"p50_us": cand_p50 * comp_ratio, "speedup": comp_ratio, "ci95": list(comp_ci),
                        "pct_copy": comp_pct}}
    if best:
        base["best"] = {"p50_us": cand_p50 * best[0], "speedup": best[0], "ci95": list(best[1]), "pct_copy": 90.0}
    return {"bucket": bucket, "p50_us": cand_p50, "baselines": base}


def _verdict(rows):
    return {"status": "accepted", "timings": rows}


def test_must_beat_compile_beyond_noise_unless_at_ceiling():
    b = ("a", "b")
    faster = _verdict([_row("a", 100, 1.2, (1.15, 1.25), 59.0), _row("b", 100, 1.1, (1.05, 1.12), 50.0)])
    assert decide(faster, b, False).promote
    noisy = _verdict([_row("a", 100, 1.2, (1.15, 1.25), 59.0), _row("b", 100, 1.01, (0.99, 1.03), 50.0)])
    d = decide(noisy, b, False)
    assert not d.promote and "beyond noise" in d.per_bucket["b"]
    parity = _verdict([_row("a", 100, 0.99, (0.985, 1.002), 99.0), _row("b", 100, 1.0, (0.99, 1.01), 97.0)])
    d = decide(parity, b, False)
    assert d.promote and "parity" in d.per_bucket["a"]
    short = _verdict([_row("a", 100, 0.974, (0.972, 0.975), 100.0), _row("b", 100, 1.0, (0.99, 1.01), 97.0)])
    assert not decide(short, b, False).promote  # the H200 run-1 case: 2.6% behind torch.compile at the ceiling


def test_every_claimed_bucket_must_pass_and_exist():
    v = _verdict([_row("a", 100, 1.2, (1.15, 1.25), 59.0)])
    d = decide(v, ("a", "b"), False)
    assert not d.promote and d.per_bucket["b"] == "bucket not timed"


def test_incumbent_must_be_beaten_beyond_noise():
    v = _verdict([_row("a", 100, 1.5, (1.4, 1.6), 50.0, best=(1.01, (0.99, 1.03)))])
    assert not decide(v, ("a",), True).promote
    v = _verdict([_row("a", 100, 1.5, (1.4, 1.6), 50.0, best=(1.08, (1.05, 1.1)))])
    assert decide(v, ("a",), True).promote


def test_rejected_never_promoted():
    assert not decide({"status": "rejected", "timings": []}, ("a",), False).promote


def test_ceiling_is_the_same_bytes_copy_where_that_is_lower():
    # torch.compile at 92% of the large-buffer copy but as fast as a copy of the op's own bytes (H200 run 5, w4)
    row = _row("a", 100, 0.99, (0.98, 1.01), 92.0)
    row["baselines"]["copy"] = {"p50_us": 98.0, "speedup": 0.98, "ci95": [0.97, 0.99], "pct_copy": 94.0}
    d = decide(_verdict([row]), ("a",), False)
    assert d.promote and "same bytes" in d.per_bucket["a"]
    slow_copy_row = _row("a", 100, 0.99, (0.98, 1.01), 92.0)
    slow_copy_row["baselines"]["copy"] = {"p50_us": 80.0, "speedup": 0.8, "ci95": [0.79, 0.81], "pct_copy": 115.0}
    d = decide(_verdict([slow_copy_row]), ("a",), False)  # compile at 81% of the same-bytes copy: not at ceiling
    assert not d.promote and "beyond noise" in d.per_bucket["a"]
