#!/usr/bin/env bash
# H200 run 7 (exact command): `rsi bench` for every op group (the README table, with the copy_ of each op's own
# bytes as a column), `rsi verify` of every locked kernel, and the GPU tests (tests/gpu).
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/bench"
for op in gate_residual_modulate qk_norm_rope modulate swiglu qkv_pack lora_consumer head_merge; do
  timeout -s INT 45 python3 -m rsi bench --op-group $op --gpu h200 --reps 15 --out "$OUT/bench/$op.json" \
    --markdown "$OUT/bench/$op.md" > "$OUT/bench/$op.log" 2>&1; echo "$op exit $?"
done
timeout -s INT 120 python3 -m rsi verify --gpu h200 > "$OUT/bench/verify.log" 2>&1; echo "verify exit $?"
timeout -s INT 120 python3 -m pytest -q tests/gpu -p no:cacheprovider > "$OUT/bench/tests_gpu.log" 2>&1
echo "tests/gpu exit $?"; tail -3 "$OUT/bench/tests_gpu.log"
tar czf "$OUT/bench.tgz" -C "$OUT" bench
