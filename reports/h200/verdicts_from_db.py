"""The verdicts of a device run's store (``.rsi/rsi.db``, copied back beside the run's logs but not committed:
``*.db`` is ignored) as JSON: per evaluation its run, candidate, config, status, reason, tolerance (with the
observed errors), correctness plan, incumbents' vetting, judge wall time and per bucket the p50 and every
baseline's paired ratio with its CI.
Usage: python reports/h200/verdicts_from_db.py STORE.db OUT.json"""
import json
import sqlite3
import sys


def main():
    con = sqlite3.connect(sys.argv[1])
    rows = con.execute("select e.run_id, e.seq, e.candidate, c.config_json, e.status, e.stage, e.reason, "
                       "e.verdict_json, e.objective from rsi_evaluations e join rsi_candidates c "
                       "on c.hash = e.candidate order by e.run_id, e.seq").fetchall()
    out = []
    for run_id, seq, cand, config, status, stage, reason, verdict, objective in rows:
        v = json.loads(verdict)
        d = v.get("details", {})
        out.append({"run_id": run_id, "seq": seq, "candidate": cand, "config": json.loads(config), "status": status,
                    "stage": stage, "reason": reason, "objective": objective, "tolerance": v.get("tolerance"),
                    "correctness": d.get("correctness"), "incumbents": d.get("incumbents"),
                    "judge_wall_s": d.get("judge_wall_s"), "timing_wall_s": d.get("timing_wall_s"),
                    "timings": [{"bucket": r["bucket"], "p50_us": r["p50_us"],
                                 "vs": {k: {"p50_us": b.get("p50_us"), "speedup": b.get("speedup"),
                                            "ci95": b.get("ci95")} for k, b in r["baselines"].items()}}
                                for r in v.get("timings", [])]})
    with open(sys.argv[2], "w") as f:
        json.dump(out, f, indent=1)
    print(f"{len(out)} verdicts -> {sys.argv[2]}")


if __name__ == "__main__":
    main()
