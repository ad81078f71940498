#!/usr/bin/env bash
# H200 run 14 (exact command), one device call:
#  1. the strict producer sandbox on the GPU (reports/h200/run14/probe.py); if CUDA IPC fails under it, the rest
#     runs with RSI_JAIL=compat and says so;
#  2. a fresh gate_residual_modulate search in an empty workspace with the side-stream gap measured by events on
#     both sides of the synchronization (run 13's host-clock gap rejected both candidates);
#  3. the GPU cheats run 13 did not reach (int32 indexing at > 2^31 elements, atomics split reduction).
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONUNBUFFERED=1 RSI_BWRAP=$PWD/.tools/bwrap PYTHONPATH=/tmp/site:$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/run14"
timeout -s INT 60 python3 reports/h200/run14/probe.py 2>&1 | tee "$OUT/run14/probe.log" | tail -3
if ! grep -q "probe bwrap (strict) accepted" "$OUT/run14/probe.log"; then export RSI_JAIL=compat; echo "RSI_JAIL=compat"; fi
ws=$(mktemp -d)
timeout -s INT 140 python3 -m rsi --root "$ws" search --op-group gate_residual_modulate --gpu h200 --budget 2 \
  --reps 20 --quiet --summary-out "$OUT/run14/search_summary.json" > "$OUT/run14/search.log" 2>&1
echo "search exit $?"; tail -22 "$OUT/run14/search.log"
tar -C "$ws" -czf "$OUT/run14/search_workspace.tgz" verified_kernels .rsi 2>/dev/null
timeout -s INT 110 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_adversarial_gpu.py -rA \
  -k "int32 or atomic" > "$OUT/run14/tests_gpu_adversarial.log" 2>&1; echo "adversarial exit $?"
tail -8 "$OUT/run14/tests_gpu_adversarial.log"
