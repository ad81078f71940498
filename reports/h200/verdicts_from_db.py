"""The verdicts of a device run's store (``.rsi/rsi.db``, copied back beside the run's logs but not committed:
``*.db`` is ignored) as JSON: per evaluation its run, candidate, config, status, reason, tolerance (with the
observed errors), correctness plan, incumbents' vetting, judge wall time and per bucket the p50 and every
baseline's paired ratio with its CI, read through ``rsi.store.Store``.
Usage: python reports/h200/verdicts_from_db.py STORE.db OUT.json"""
import json
import shutil
import sys
import tempfile

from rsi.store import Store


def main():
    tmp = tempfile.mkdtemp()
    shutil.copy(sys.argv[1], f"{tmp}/rsi.db")           # the store opens its file for writing (WAL): a copy
    store = Store(f"{tmp}/rsi.db", tmp)
    configs = {c["hash"]: json.loads(c["config_json"]) for c in store.iter_table("rsi_candidates")}
    out = []
    for run in sorted(store.runs(limit=1000), key=lambda r: r.id):
        for e in store.evaluations(run.id):
            v, d = e["verdict"], e["verdict"].get("details", {})
            out.append({"run_id": run.id, "seq": e["seq"], "candidate": e["candidate"],
                        "config": configs.get(e["candidate"]), "status": e["status"], "stage": e["stage"],
                        "reason": e["reason"], "objective": e["objective"], "tolerance": v.get("tolerance"),
                        "correctness": d.get("correctness"), "incumbents": d.get("incumbents"),
                        "judge_wall_s": d.get("judge_wall_s"), "timing_wall_s": d.get("timing_wall_s"),
                        "timings": [{"bucket": r["bucket"], "p50_us": r["p50_us"],
                                     "vs": {k: {"p50_us": b.get("p50_us"), "speedup": b.get("speedup"),
                                                "ci95": b.get("ci95")} for k, b in r["baselines"].items()}}
                                    for r in v.get("timings", [])]})
    store.close()
    with open(sys.argv[2], "w") as f:
        json.dump(out, f, indent=1)
    print(f"{len(out)} verdicts -> {sys.argv[2]}")


if __name__ == "__main__":
    main()
