#!/usr/bin/env bash
# H200 run 11 (exact command): `rsi verify` of every kernel in the final lock (modulate from run 8, head_merge from
# run 7, the rest from run 2) and the GPU tests.
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/run11"
timeout -s INT 150 python3 -m rsi verify --gpu h200 > "$OUT/run11/verify.log" 2>&1; echo "verify exit $?"
timeout -s INT 60 python3 -m pytest -q tests/gpu -p no:cacheprovider > "$OUT/run11/tests_gpu.log" 2>&1
echo "tests/gpu exit $?"; tail -2 "$OUT/run11/tests_gpu.log"; tail -25 "$OUT/run11/verify.log"
