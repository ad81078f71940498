#!/usr/bin/env bash
# H200 run 19 (exact command), one device call, on the final lock: the refiner bench again (diffusers' LTX-2
# forward vs ours with the reference ops and with the kernels run 17 promoted, same process), the GPU tests, then
# `rsi verify` of every locked kernel for as long as the call allows (its log says how far it got).
# Run as `RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run19.sh` (the device's .git is stale).
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONUNBUFFERED=1 RSI_BWRAP=$PWD/.tools/bwrap PYTHONPATH=/tmp/site:$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/run19"
timeout -s INT 100 python3 -m runtime.bench_refiner --layers 8 --out "$OUT/run19/bench_refiner.json" \
  > "$OUT/run19/bench_refiner.log" 2>&1; echo "bench_refiner exit $?"; tail -5 "$OUT/run19/bench_refiner.log"
timeout -s INT 150 python3 -m pytest -q tests/gpu -p no:cacheprovider > "$OUT/run19/tests_gpu.log" 2>&1
echo "tests/gpu exit $?"; tail -4 "$OUT/run19/tests_gpu.log"
timeout -s INT 220 python3 -m rsi verify --gpu h200 --out "$OUT/run19/verify.json" > "$OUT/run19/verify.log" 2>&1
echo "verify exit $?"; tail -30 "$OUT/run19/verify.log"
# Follow-up in the same warm session (exact command), after tests/gpu was cut at 150 s with its 7th test failing
# and no traceback kept:
#   RSI_COMMIT=0e9328e... RSI_DIRTY=0 timeout -s INT 150 python3 -m pytest -q -p no:cacheprovider \
#     tests/gpu/test_adversarial_gpu.py -k int32 -rA --tb=short   ->  run19/int32_alone.log (passed, 27.9 s)
