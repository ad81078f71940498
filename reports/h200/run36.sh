#!/usr/bin/env bash
# H200 run 36 (eighth session): the fp8 GPU tests at the session's final code (tests/unit/test_fp8_gpu.py: the three
# producers with QUOT 0 and 1 at a production shape and every special case, swiglu_fp8 on every bf16 gate through
# bytes and through each gate's row scale, FAST with SAFE_G 32; fp8_linear), after run 33's ran at 923991d.
# Run as `RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run36.sh` with carry [".whl", ".rsi/src.tgz"].
set -o pipefail
[ -f .rsi/src.tgz ] && tar -xzf .rsi/src.tgz
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD TRITON_CACHE_DIR=/tmp/triton_cache
OUT=${OUT:-/tmp/out}; R=/tmp/run36; mkdir -p "$R" "$OUT"
echo "commit ${RSI_COMMIT:-unknown}" > "$R/commit.txt"
timeout -s INT 300 python3 -m pytest tests/unit/test_fp8_gpu.py -v -p no:xdist -p no:cacheprovider -o addopts="" \
  > "$R/gpu_tests.log" 2>&1
echo "gpu tests exit $?"; grep -E "PASSED|FAILED|ERROR|passed|failed" "$R/gpu_tests.log" | tail -16
tar -czf "$OUT/run36.tgz" -C /tmp run36
