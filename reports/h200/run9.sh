#!/usr/bin/env bash
# H200 run 9 (exact command): `rsi bench --op-group all` in one invocation, the README's performance table, on the
# final lock (run 2's kernels, head_merge from run 7, modulate from run 8).
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/run9"
timeout -s INT 380 python3 -m rsi bench --op-group all --gpu h200 --reps 15 --out "$OUT/run9/bench.json" \
  --markdown "$OUT/run9/bench.md" 2>&1 | tee "$OUT/run9/bench.log"
echo "bench exit $?"
