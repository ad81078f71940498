import json
import sqlite3

from rsi.contract import Candidate
from rsi.store import Store


def test_wal_and_round_trip(tmp_path):
    st = Store(tmp_path / "rsi.db", tmp_path)
    assert st.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    run = st.create_run("swiglu", "h200", "cuda", "offline", {"budget_candidates": 3}, {"torch": "x"})
    cand = Candidate("swiglu", "def launch(x):\n    return x\n", {"BLOCK_F": 1024})
    d = st.save_candidate(cand)
    assert (d / "kernel.py").read_text() == cand.source
    meta = json.loads((d / "candidate.json").read_text())
    assert meta["hash"] == cand.hash and d.parts[-3:] == ("swiglu", cand.hash[:2], cand.hash)
    verdict = {"candidate": cand.hash, "status": "rejected", "stage": "correctness", "reason": "x differs",
               "tolerance": {"class": "tolerance"}, "timings": [
                   {"bucket": "full", "p20_us": 1.0, "p50_us": 2.0, "p80_us": 3.0, "gbps": 4.0, "pct_copy": 5.0,
                    "baselines": {"eager": {"p20_us": 2, "p50_us": 3, "p80_us": 4, "gbps": 1, "pct_copy": 1}}}],
               "details": {}}
    st.record_evaluation(run, 0, verdict, None)
    ev = st.evaluations(run)
    assert len(ev) == 1 and ev[0]["verdict"] == verdict and ev[0]["reason"] == "x differs"
    rows = list(st.iter_table("rsi_measurements"))
    assert {r["impl"] for r in rows} == {"candidate", "eager"}
    assert (d / f"verdict-{run}.json").exists()
    assert st.load_candidate(cand.hash) == Candidate("swiglu", cand.source, {"BLOCK_F": 1024})
    assert st.find_verdict(cand.hash, "cuda")["reason"] == "x differs"
    st.remember("swiglu", "failure", "correctness", {"reason": "r"}, run)
    assert st.recall("failure", "swiglu")[0]["reason"] == "r"
    st.finish_run(run, "finished", {"ok": 1})
    assert st.get_run(run).status == "finished" and st.get_run(run).summary == {"ok": 1}
    st.close()
    # a second connection (another process) sees everything committed
    c = sqlite3.connect(tmp_path / "rsi.db")
    assert c.execute("SELECT COUNT(*) FROM rsi_evaluations").fetchone()[0] == 1


def test_candidate_folders_are_write_once(tmp_path):
    st = Store(tmp_path / "rsi.db", tmp_path)
    cand = Candidate("swiglu", "a = 1\n", {})
    d = st.save_candidate(cand)
    (d / "kernel.py").chmod(0o444)
    st.save_candidate(cand)  # saving again neither fails nor rewrites
    assert (d / "kernel.py").read_text() == "a = 1\n"
