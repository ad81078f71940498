#!/usr/bin/env bash
# H200 run 23 (sixth session; issues 11 and 12): the measurements, on the lock run 22 left (.rsi/vk22 on the warm
# device; committed afterwards). 1) The H3 block at 38,248 rows (2-block model) with dense and FP8 attention, bf16
# and then e4m3 linears (runtime/bench_h200.py --precision bf16 fp8), 2) the four H3 linears FP8 vs bf16 and the
# fused producers vs the bf16 ops (runtime/bench_fp8.py), 3) the full refiner's end-to-end quality and attention
# time: dense vs Sol-Attn at the report's tau schedule, vs FP8 attention, vs FP8 linears (rsi attention-quality).
# Run as `RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run23.sh` with carry [".whl", ".tools"].
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONUNBUFFERED=1 RSI_BWRAP=$PWD/.tools/bwrap PYTHONPATH=/tmp/site:$PWD TRITON_CACHE_DIR=/tmp/triton_cache
OUT=${OUT:-/tmp/out}; R=/tmp/run23; mkdir -p "$R" "$OUT"
if [ -d .rsi/vk22 ]; then rm -rf verified_kernels && cp -r .rsi/vk22 verified_kernels; fi
sha256sum verified_kernels/LOCK.json > "$R/lock.txt"
run() {  # name, cap (s), command...
  local name=$1 cap=$2; shift 2
  timeout -s INT "$cap" "$@" > "$R/$name.log" 2>&1; echo "$name exit $?"; grep -v "Warning\|warnings.warn" "$R/$name.log" | tail -10
}
run block 140 python3 -m runtime.bench_h200 --modes verified --attention dense fp8 --precision bf16 fp8 \
  --skip-request --blocks 2 --forward-reps 1 --out "$R/bench_block.json"
run fp8 90 python3 -m runtime.bench_fp8 --rows 38248 --out "$R/bench_fp8.json"
run quality_sol 110 python3 -m rsi attention-quality --config full --attention sol --sol-tau 1.0,1.25,1.5 \
  --json "$R/quality_sol.json"
run quality_fp8_attention 80 python3 -m rsi attention-quality --config full --attention fp8 --json "$R/quality_fp8_attention.json"
run quality_fp8_linears 80 python3 -m rsi attention-quality --config full --attention dense --precision fp8 \
  --json "$R/quality_fp8_linears.json"
tar -czf "$OUT/run23.tgz" -C /tmp run23
