#!/usr/bin/env bash
# H200 run 12 (exact command): first GPU run of the two-process judge. Checks that bubblewrap and CUDA IPC work
# on the device, then judges a hand-written honest swiglu (reports/h200/run12/honest_swiglu.py) at full size with
# short timing, and a call-counting cheat that skips work once timed (must be caught by the sampled checks).
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 RSI_BWRAP=$PWD/.tools/bwrap
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/run12"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout -s INT 420 python3 reports/h200/run12/smoke.py "$OUT/run12/smoke.json" 2>&1 | tee "$OUT/run12/smoke.log"
echo "smoke exit $?"
