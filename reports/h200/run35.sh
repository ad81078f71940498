#!/usr/bin/env bash
# H200 run 35 (eighth session): the error of swiglu_fp8's fp32 silu (FAST) on the GPU for every bf16 gate
# (reports/h200/probe35.py), to size FAST's near-midpoint window.
# Run as `RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run35.sh` with carry [".whl", ".rsi/src.tgz"].
set -o pipefail
[ -f .rsi/src.tgz ] && tar -xzf .rsi/src.tgz
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD TRITON_CACHE_DIR=/tmp/triton_cache
OUT=${OUT:-/tmp/out}; R=/tmp/run35; mkdir -p "$R" "$OUT"
timeout -s INT 120 python3 reports/h200/probe35.py --out "$R/probe35.json" > "$R/probe35.log" 2>&1
echo "probe exit $?"; tail -14 "$R/probe35.log"
tar -czf "$OUT/run35.tgz" -C /tmp run35
