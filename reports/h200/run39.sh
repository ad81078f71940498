#!/usr/bin/env bash
# H200 run 39 (ninth session), after run 38: the runtime with FlashAttention-4 installed (flash-attn-4 4.0.0b36 on
# the CuTe DSL), so that `--attention dense` runs FA4's varlen kernel (runtime/attention.py), and cuDNN's FP8
# attention with its subnormal fixes (scales below 2^-100 lifted by 2^64, the score descale floored at 2^-126):
#  1. the cuDNN FP8 GPU test (tests/unit/test_attention_fp8_cudnn_gpu.py), which run 38 failed on the subnormal case;
#  2. one H3 block at 38,248 rows (runtime/bench_h200.py, 2-block model): dense (FA4) and fp8 (cuDNN) attention,
#     bf16 and e4m3 linears, against run 37's block with SDPA cuDNN;
#  3. the same block with RSI_FA4=0 (SDPA cuDNN), in the same call, for the side-by-side ratio.
# Two calls to one warm machine (the tree had grown: run 38's split no longer fit 64 MiB; the clean tree is the
# commit, so no src.tgz):
#   call 1, carry [".whl", ".cute/part1"]:                bash reports/h200/run39.sh part1
#   call 2 at once, carry [".cute/part2", ".cute/extra", ".whl-fa4"]:
#                                            RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run39.sh bench
set -o pipefail
STEP=${1:?usage: run39.sh part1|bench}
if [ "$STEP" = part1 ]; then
  mkdir -p /root/cute && cp .cute/part1/* /root/cute/ &&
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .whl/*.whl && echo "part1 ok"; exit $?
fi
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .whl-fa4/*.whl || exit 1
cp .cute/part2/cu13.part_* /root/cute/ &&
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .cute/part2/*.whl 2>/dev/null &&
cat /root/cute/cu13.part_* | xz -d | tar -x -C /tmp/site || exit 1
python3 -c "import cuda.bindings.driver" 2>/dev/null || { echo "installing .cute/extra (cuda-bindings missing)";
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .cute/extra/*.whl || exit 1; }
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache PYTHONPATH=/tmp/site:/tmp/site/nvidia_cutlass_dsl/dsl_packages:$PWD
OUT=${OUT:-/tmp/out}; R=/tmp/run39; mkdir -p "$R" "$OUT"
echo "commit ${RSI_COMMIT:-unknown} dirty ${RSI_DIRTY:-unknown}" > "$R/commit.txt"
sha256sum verified_kernels/LOCK.json > "$R/lock.txt"
run() {  # name, cap (s), command...
  local name=$1 cap=$2; shift 2
  local t0=$SECONDS
  timeout -s INT "$cap" "$@" > "$R/$name.log" 2>&1; echo "$name exit $? in $((SECONDS - t0)) s"
  grep -v "Warning\|warnings.warn" "$R/$name.log" | tail -12
}
run gpu_test 150 python3 -m pytest tests/unit/test_attention_fp8_cudnn_gpu.py -v -p no:xdist -p no:cacheprovider \
  -o addopts=""
run block_fa4 200 python3 -m runtime.bench_h200 --modes verified --attention dense fp8 --precision bf16 fp8 \
  --skip-request --blocks 2 --forward-reps 1 --out "$R/bench_block_fa4.json"
RSI_FA4=0 run block_sdpa 200 python3 -m runtime.bench_h200 --modes verified --attention dense --precision bf16 \
  --skip-request --blocks 2 --forward-reps 1 --out "$R/bench_block_sdpa.json"
tar -czf "$OUT/run39.tgz" -C /tmp run39
