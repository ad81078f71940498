#!/usr/bin/env bash
# H200 run 38 (ninth session): FlashAttention-4 (flash-attn-4 4.0.0b36, CuTe DSL, SM90 forward) as the `fa4`
# attention incumbent, timed with runtime/bench_attention.py beside SDPA cuDNN, SDPA flash, the runtime's dense path
# and cuDNN's FP8 attention at h3_full, h3_stage1 and ltx_video; and the cuDNN FP8 GPU test again (its torch
# emulation put its output on the CPU in run 37). Two calls to one warm machine (the CuTe DSL is over one call's
# 64 MiB; reports/h200/cute_carry.sh and device_deps.sh make the carry):
#   call 1, carry [".whl", ".whl-fa4", ".cute/part1"]:  bash reports/h200/run38.sh part1
#   call 2 at once, carry [".cute/part2", ".cute/extra", ".rsi/src.tgz"]:
#                                            RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run38.sh bench
set -o pipefail
STEP=${1:?usage: run38.sh part1|bench}
if [ "$STEP" = part1 ]; then
  mkdir -p /root/cute && cp .cute/part1/* /root/cute/ &&
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .whl/*.whl .whl-fa4/*.whl && echo "part1 ok"; exit $?
fi
[ -f .rsi/src.tgz ] && tar -xzf .rsi/src.tgz
cp .cute/part2/cu13.part_* /root/cute/ &&
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .cute/part2/*.whl &&
cat /root/cute/cu13.part_* | xz -d | tar -x -C /tmp/site || exit 1
python3 -c "import cuda.bindings.driver" 2>/dev/null || { echo "installing .cute/extra (cuda-bindings missing)";
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .cute/extra/*.whl || exit 1; }
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache PYTHONPATH=/tmp/site:/tmp/site/nvidia_cutlass_dsl/dsl_packages:$PWD
OUT=${OUT:-/tmp/out}; R=/tmp/run38; mkdir -p "$R" "$OUT"
echo "commit ${RSI_COMMIT:-unknown} dirty ${RSI_DIRTY:-unknown}" > "$R/commit.txt"
sha256sum verified_kernels/LOCK.json > "$R/lock.txt"
python3 -c "import flash_attn.cute; print('flash_attn.cute imports')" 2>&1 | tail -3 | tee "$R/versions.txt"
run() {  # name, cap (s), command...
  local name=$1 cap=$2; shift 2
  local t0=$SECONDS
  timeout -s INT "$cap" "$@" > "$R/$name.log" 2>&1; echo "$name exit $? in $((SECONDS - t0)) s"
  grep -v "Warning\|warnings.warn" "$R/$name.log" | tail -14
}
run gpu_test 150 python3 -m pytest tests/unit/test_attention_fp8_cudnn_gpu.py -v -p no:xdist -p no:cacheprovider \
  -o addopts=""
run bench_attention 330 python3 -m runtime.bench_attention --buckets h3_full h3_stage1 ltx_video --reps 20 \
  --out "$R/bench_attention.json"
tar -czf "$OUT/run38.tgz" -C /tmp run38
