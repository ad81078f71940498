#!/usr/bin/env bash
# H200 run 27 (NOT YET RUN): measurements on the lock run 26 left (.rsi/vk26 on the warm machine; committed after):
# the four H3 linears FP8 vs bf16 with the runtime's compiled quantiser and the producers (runtime/bench_fp8.py), the
# block with fp8 linears (bench_h200 --precision fp8), the refiner's quality and attention time with the promoted
# sol_attn kernel, and the two-stage request with --attention sol --precision fp8 against the dense bf16 one.
# Run as `RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run27.sh` with carry [".whl", ".tools"].
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONUNBUFFERED=1 RSI_BWRAP=$PWD/.tools/bwrap PYTHONPATH=/tmp/site:$PWD TRITON_CACHE_DIR=/tmp/triton_cache
OUT=${OUT:-/tmp/out}; R=/tmp/run27; mkdir -p "$R" "$OUT"
if [ -d .rsi/vk26 ]; then rm -rf verified_kernels && cp -r .rsi/vk26 verified_kernels; fi
sha256sum verified_kernels/LOCK.json > "$R/lock.txt"
run() {  # name, cap (s), command...
  local name=$1 cap=$2; shift 2
  timeout -s INT "$cap" "$@" > "$R/$name.log" 2>&1; echo "$name exit $?"; grep -v "Warning\|warnings.warn" "$R/$name.log" | tail -10
}
run fp8 90 python3 -m runtime.bench_fp8 --rows 38248 10250 --out "$R/bench_fp8.json"
run block 120 python3 -m runtime.bench_h200 --modes verified --attention dense --precision bf16 fp8 \
  --skip-request --blocks 2 --forward-reps 1 --out "$R/bench_block.json"
run quality_sol 100 python3 -m rsi attention-quality --config full --attention sol --sol-tau 1.0,1.25,1.5 \
  --json "$R/quality_sol.json"
for v in "dense bf16" "sol fp8"; do set -- $v
  run two_stage_$1_$2 140 python3 -m rsi run-pipeline --prompt "a red fox runs through snow" --config full \
    --resolution 1344x768 --attention $1 --precision $2 --warmup --repeat 2 --no-mux --json "$R/two_stage_$1_$2.json"
done
tar -czf "$OUT/run27.tgz" -C /tmp run27
