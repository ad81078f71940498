#!/usr/bin/env bash
# H200 run 4 (exact command): `rsi bench` for every op group, one invocation per op so that each finished op is
# kept if the call's time runs out; the README's performance table is generated from these outputs.
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/bench"
for op in gate_residual_modulate qk_norm_rope modulate swiglu qkv_pack lora_consumer head_merge; do
  timeout -s INT 40 python3 -m rsi bench --op-group $op --gpu h200 --reps 15 --out "$OUT/bench/$op.json" \
    --markdown "$OUT/bench/$op.md" > "$OUT/bench/$op.log" 2>&1; echo "$op exit $?"
done
tar czf "$OUT/bench.tgz" -C "$OUT" bench
