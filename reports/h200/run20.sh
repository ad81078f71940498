#!/usr/bin/env bash
# H200 run 20 (issue 11, part 1; NOT YET RUN: written in the session whose device budget was spent). One device
# call: offline searches of the three attention op groups against their incumbents (attention: sdpa_cudnn /
# sdpa_flash / sdpa_efficient / compiled Flex; attention_fp8: its declared incumbents; sol_attn: sol_flex at
# ltx_video), then `rsi bench` of the three. Everything comes back in one tarball (a call returns at most 8 files).
# Run as `RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run20.sh` with carry [".whl", ".tools"]
# (bash reports/h200/device_deps.sh makes both).
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONUNBUFFERED=1 RSI_BWRAP=$PWD/.tools/bwrap PYTHONPATH=/tmp/site:$PWD
OUT=${OUT:-/tmp/out}; R=/tmp/run20; mkdir -p "$R" "$OUT"
for op in attention sol_attn attention_fp8; do
  timeout -s INT 160 python3 -m rsi search --op-group $op --gpu h200 --budget 6,2m --reps 15 --quiet \
    --summary-out "$R/search_$op.json" > "$R/search_$op.log" 2>&1
  echo "$op exit $?"; tail -16 "$R/search_$op.log"
done
timeout -s INT 60 python3 -m rsi bench --op-group attention --reps 15 --out "$R/bench_attention.json" \
  > "$R/bench_attention.log" 2>&1; echo "bench exit $?"; tail -12 "$R/bench_attention.log"
python3 -m rsi show > "$R/show.txt" 2>&1
tar -czf "$OUT/run20.tgz" -C /tmp run20 -C "$PWD" verified_kernels
