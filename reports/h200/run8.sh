#!/usr/bin/env bash
# H200 run 8 (exact command): the STREAM axis of the row kernels (row loads .cg, stores .cs): a filtered sweep
# (4096 + 2048 columns, one row per program), then searches of modulate and gate_residual_modulate whose first
# candidate is the STREAM = 1 heuristic, against the kernels locked by run 2, then `rsi bench` of both.
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/run8"
timeout -s INT 150 python3 reports/h200/run5/sweep.py "$OUT/run8/sweep.json" modulate@BLOCK_H=4096,ROWS=1,SEQ=1 \
  gate_residual_modulate@BLOCK_H=4096,ROWS=1,SEQ=1 2>&1 | tee "$OUT/run8/sweep.log"
for op in modulate gate_residual_modulate; do
  timeout -s INT 130 python3 -m rsi search --op-group $op --gpu h200 --budget 8,1.5m --quiet \
    --summary-out "$OUT/run8/${op}_summary.json" > "$OUT/run8/${op}_search.log" 2>&1
  echo "$op search exit $?"; tail -14 "$OUT/run8/${op}_search.log"
done
for op in modulate gate_residual_modulate; do
  timeout -s INT 45 python3 -m rsi bench --op-group $op --gpu h200 --reps 15 --out "$OUT/run8/bench_$op.json" \
    --markdown "$OUT/run8/bench_$op.md" > "$OUT/run8/bench_$op.log" 2>&1; echo "$op bench exit $?"
done
tar czf "$OUT/run8.tgz" -C "$OUT" run8
tar czf "$OUT/results.tgz" verified_kernels candidates 2>/dev/null
