#!/usr/bin/env bash
# The exact command run on the lent H200 for the swiglu search (issue 2). Run from the repository root.
# Wheels for packages the device image lacks (optuna and its deps, liger-kernel) travel in .whl/.
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv | tee "$OUT/nvidia_smi.txt"
python3 -m rsi env --json > "$OUT/env.txt" 2>&1
python3 -m rsi search --op-group swiglu --gpu h200 --budget "${BUDGET:-14},7m" --quiet \
  --summary-out "$OUT/swiglu_summary.json" 2>&1 | tee "$OUT/swiglu_search.log"
python3 -m rsi show --limit 5 > "$OUT/show.txt" 2>&1
tar czf "$OUT/results.tgz" verified_kernels candidates .rsi/rsi.db
