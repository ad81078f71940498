#!/usr/bin/env bash
# H200 run 43 (ninth session): reports/h200/probe43.py, the kernel-time breakdown of cuDNN's FP8 attention path.
# Run as `RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run43.sh` with carry [".whl"].
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD TRITON_CACHE_DIR=/tmp/triton_cache
OUT=${OUT:-/tmp/out}; R=/tmp/run43; mkdir -p "$R" "$OUT"
echo "commit ${RSI_COMMIT:-unknown} dirty ${RSI_DIRTY:-unknown}" > "$R/commit.txt"
timeout -s INT 150 python3 reports/h200/probe43.py 2>&1 | grep -v "Warning\|warnings.warn" | tee "$R/probe43.log"
tar -czf "$OUT/run43.tgz" -C /tmp run43
