#!/usr/bin/env bash
# H200 run 5 (exact command), exploration before the final searches: every valid config of the modulate,
# head_merge, gate_residual_modulate and qk_norm_rope spaces timed against torch.compile, copy_ at each op's own
# byte count, and a launch-overhead check (reports/h200/run5/sweep.py).
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv > "$OUT/nvidia_smi.txt"
timeout -s INT 480 python3 reports/h200/run5/sweep.py "$OUT/sweep.json" 2>&1 | tee "$OUT/sweep.log"
