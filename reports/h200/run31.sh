#!/usr/bin/env bash
# H200 run 31 (seventh session): the first GPU search of swiglu_fp8 (the fused SwiGLU -> e4m3 producer, bitwise
# class), then the producers against the bf16 ops they replace on the resulting lock (runtime/bench_fp8.py).
# Run as `RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run31.sh` with carry [".whl", ".tools", ".rsi/src.tgz"].
set -o pipefail
[ -f .rsi/src.tgz ] && tar -xzf .rsi/src.tgz
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONUNBUFFERED=1 RSI_BWRAP=$PWD/.tools/bwrap PYTHONPATH=/tmp/site:$PWD TRITON_CACHE_DIR=/tmp/triton_cache COLUMNS=160
OUT=${OUT:-/tmp/out}; R=/tmp/run31; mkdir -p "$R" "$OUT"
timeout -s INT 170 python3 -m rsi search --op-group swiglu_fp8 --gpu h200 --budget 3,2.5m --reps 10 \
  --summary-out "$R/search_swiglu_fp8.json" > "$R/search_swiglu_fp8.log" 2>&1
echo "search exit $?"; grep -v "Warning\|warnings.warn" "$R/search_swiglu_fp8.log" | tail -22
python3 - > "$R/verdicts.txt" 2>&1 <<'PY'
import sqlite3
c = sqlite3.connect(".rsi/rsi.db")
for row in c.execute("select r.op, e.run_id, e.candidate, e.status, e.stage, e.reason, e.objective "
                     "from rsi_evaluations e join rsi_runs r on r.id = e.run_id where r.op = 'swiglu_fp8' order by e.id"):
    print(" | ".join(str(x) for x in row))
PY
cut -c1-600 "$R/verdicts.txt"
timeout -s INT 60 python3 -m runtime.bench_fp8 --rows 38248 --out "$R/bench_fp8.json" > "$R/bench_fp8.log" 2>&1
echo "bench_fp8 exit $?"; grep "bench_fp8" "$R/bench_fp8.log" | tail -12
tar -czf "$OUT/run31.tgz" -C /tmp run31 -C "$PWD" verified_kernels
