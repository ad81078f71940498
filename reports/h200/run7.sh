#!/usr/bin/env bash
# H200 run 7 (exact command): a longer head_merge search (14 candidates or 2 minutes; run 6 gave it 5), then
# `rsi bench` for every op group (the README table, with the copy_ of each op's own
# bytes as a column), `rsi verify` of every locked kernel, and the GPU tests (tests/gpu).
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/bench"
timeout -s INT 170 python3 -m rsi search --op-group head_merge --gpu h200 --budget 14,2m --quiet \
  --summary-out "$OUT/bench/head_merge_summary.json" > "$OUT/bench/head_merge_search.log" 2>&1
echo "head_merge search exit $?"; tail -15 "$OUT/bench/head_merge_search.log"
for op in gate_residual_modulate qk_norm_rope modulate swiglu qkv_pack lora_consumer head_merge; do
  timeout -s INT 45 python3 -m rsi bench --op-group $op --gpu h200 --reps 15 --out "$OUT/bench/$op.json" \
    --markdown "$OUT/bench/$op.md" > "$OUT/bench/$op.log" 2>&1; echo "$op exit $?"
done
timeout -s INT 90 python3 -m pytest -q tests/gpu -p no:cacheprovider > "$OUT/bench/tests_gpu.log" 2>&1
echo "tests/gpu exit $?"; tail -3 "$OUT/bench/tests_gpu.log"
timeout -s INT 100 python3 -m rsi verify --gpu h200 > "$OUT/bench/verify.log" 2>&1; echo "verify exit $?"
tar czf "$OUT/bench.tgz" -C "$OUT" bench
tar czf "$OUT/results.tgz" verified_kernels candidates .rsi/rsi.db 2>/dev/null
