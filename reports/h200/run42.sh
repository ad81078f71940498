#!/usr/bin/env bash
# H200 run 42 (ninth session): `rsi bench` of attention_fp8 and attention with the new incumbents installed: the
# judge's vetting (rsi/harness/incumbents.py: each incumbent run once per shape and compared with the reference and
# the fp64 oracle under the op group's class) and the interleaved timing of cudnn_fp8 (cuDNN's FP8 attention) and
# fa4 (FlashAttention-4) beside the SDPA backends and FlexAttention. Two calls to one warm machine:
#   call 1, carry [".whl", ".cute/part1"]:                bash reports/h200/run39.sh part1
#   call 2 at once, carry [".cute/part2", ".cute/extra", ".whl-fa4"]:
#                                            RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run42.sh
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .whl-fa4/*.whl || exit 1
cp .cute/part2/cu13.part_* /root/cute/ &&
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .cute/part2/*.whl 2>/dev/null &&
cat /root/cute/cu13.part_* | xz -d | tar -x -C /tmp/site || exit 1
python3 -c "import cuda.bindings.driver" 2>/dev/null || { echo "installing .cute/extra (cuda-bindings missing)";
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .cute/extra/*.whl || exit 1; }
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache COLUMNS=160 \
  PYTHONPATH=/tmp/site:/tmp/site/nvidia_cutlass_dsl/dsl_packages:$PWD
OUT=${OUT:-/tmp/out}; R=/tmp/run42; mkdir -p "$R" "$OUT"
echo "commit ${RSI_COMMIT:-unknown} dirty ${RSI_DIRTY:-unknown}" > "$R/commit.txt"
sha256sum verified_kernels/LOCK.json > "$R/lock.txt"
for op in attention_fp8 attention; do
  t0=$SECONDS
  timeout -s INT 270 python3 -m rsi bench --op-group $op --reps 10 --warmup 2 --out "$R/bench_$op.json" \
    --markdown "$R/bench_$op.md" > "$R/bench_$op.log" 2>&1
  echo "$op exit $? in $((SECONDS - t0)) s"; grep -v "Warning\|warnings.warn" "$R/bench_$op.log" | tail -25
done
tar -czf "$OUT/run42.tgz" -C /tmp run42
