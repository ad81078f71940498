#!/usr/bin/env bash
# H200 run 13 (exact command), three parts under hard time caps (one 600 s device call):
#  1. the GPU adversarial tests (tests/gpu/test_adversarial_gpu.py) against the two-process judge;
#  2. `rsi verify` of every locked kernel (the migrated lock, reports/migrate/) under the new judge, with each
#     kernel's judge wall time in verify.json;
#  3. a fresh gate_residual_modulate search in an empty workspace (no lock: a candidate must beat torch.compile
#     beyond the A/A band to be promoted).
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONUNBUFFERED=1 RSI_BWRAP=$PWD/.tools/bwrap PYTHONPATH=/tmp/site:$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/run13"
timeout -s INT 150 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_adversarial_gpu.py -rA \
  > "$OUT/run13/tests_gpu_adversarial.log" 2>&1; echo "adversarial exit $?"; tail -12 "$OUT/run13/tests_gpu_adversarial.log"
timeout -s INT 260 python3 -m rsi verify --gpu h200 --reps 15 --out "$OUT/run13/verify.json" > "$OUT/run13/verify.log" 2>&1
echo "verify exit $?"; tail -22 "$OUT/run13/verify.log"
ws=$(mktemp -d)
timeout -s INT 150 python3 -m rsi --root "$ws" search --op-group gate_residual_modulate --gpu h200 --budget 2 \
  --reps 20 --quiet --summary-out "$OUT/run13/search_summary.json" > "$OUT/run13/search.log" 2>&1
echo "search exit $?"; tail -25 "$OUT/run13/search.log"
tar -C "$ws" -czf "$OUT/run13/search_workspace.tgz" verified_kernels .rsi 2>/dev/null; ls -la "$OUT/run13"
