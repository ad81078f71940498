#!/usr/bin/env bash
# H200 run 10 (exact command): the H3 runtime at full size on the final lock (modulate from run 8, the rest from
# run 2; head_merge is not on the single-GPU path), reference vs verified kernels, as run 3 did with run 2's lock.
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl .h3rt_whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/run10"
timeout -s INT 150 python3 -m runtime.bench_h200 --out "$OUT/run10/bench_h200.json" --mp4 /tmp/req.mp4 \
  > "$OUT/run10/runtime_bench.log" 2>&1
echo "runtime exit $?"; tail -30 "$OUT/run10/runtime_bench.log"
