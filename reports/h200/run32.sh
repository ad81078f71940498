#!/usr/bin/env bash
# H200 run 32 (seventh session; run twice, 32a and 32b): swiglu_fp8 judged again after run 31, now with the unfused path as an incumbent
# (swiglu_then_quantize: ATen swiglu + the compiled quantiser, rsi/refs/swiglu_fp8.py): the heuristic config, the
# kernel run 31 promoted, must now be timed against it and not be promoted.
# Run as `RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run32.sh` with carry [".whl", ".tools", ".rsi/src.tgz"].
set -o pipefail
[ -f .rsi/src.tgz ] && tar -xzf .rsi/src.tgz
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONUNBUFFERED=1 RSI_BWRAP=$PWD/.tools/bwrap PYTHONPATH=/tmp/site:$PWD TRITON_CACHE_DIR=/tmp/triton_cache COLUMNS=160
OUT=${OUT:-/tmp/out}; R=/tmp/run32${RUN_TAG:-}; mkdir -p "$R" "$OUT"
timeout -s INT 170 python3 -m rsi search --op-group swiglu_fp8 --gpu h200 --budget 1 --reps 10 \
  --summary-out "$R/search_swiglu_fp8.json" > "$R/search_swiglu_fp8.log" 2>&1
echo "search exit $?"; grep -v "Warning\|warnings.warn" "$R/search_swiglu_fp8.log" | tail -20
python3 - > "$R/verdicts.txt" 2>&1 <<'PY'
import json, sqlite3
c = sqlite3.connect(".rsi/rsi.db")
for row in c.execute("select r.op, e.run_id, e.candidate, e.status, e.stage, e.reason, e.objective, e.verdict_json "
                     "from rsi_evaluations e join rsi_runs r on r.id = e.run_id where r.op = 'swiglu_fp8' order by e.id"):
    print(" | ".join(str(x) for x in row[:7]))
    try:
        v = json.loads(row[7]); print("  incumbents:", json.dumps(v.get("details", {}).get("incumbents"))[:1500])
        for t in v.get("timings", []):
            print("  ", t.get("bucket"), {k: (round(b.get("p50_us", 0), 1), round(b.get("speedup", 0), 3)) for k, b in t.get("baselines", {}).items()})
    except Exception as e:
        print("  (verdict json:", e, ")")
PY
cut -c1-1600 "$R/verdicts.txt"
tar -czf "$OUT/run32.tgz" -C /tmp run32${RUN_TAG:-} -C "$PWD" verified_kernels/LOCK.json
