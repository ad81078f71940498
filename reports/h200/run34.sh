#!/usr/bin/env bash
# H200 run 34 (eighth session; 34b re-ran it with more configs, 34c with PROBE_ARGS="--only swiglu_fp8"): where swiglu_fp8's and modulate_fp8's time goes (reports/h200/probe34.py: template
# variants with one piece replaced, timed against the bf16 kernel each replaces; nothing promoted).
# Run as `[RUN_TAG=b] RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run34.sh` with carry [".whl", ".tools", ".rsi/src.tgz"].
set -o pipefail
[ -f .rsi/src.tgz ] && tar -xzf .rsi/src.tgz
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD TRITON_CACHE_DIR=/tmp/triton_cache
OUT=${OUT:-/tmp/out}; R=/tmp/run34${RUN_TAG:-}; mkdir -p "$R" "$OUT"
sha256sum verified_kernels/LOCK.json > "$R/lock.txt"
timeout -s INT 400 python3 reports/h200/probe34.py --out "$R/probe34.json" ${PROBE_ARGS:-} > "$R/probe34.log" 2>&1
echo "probe exit $?"; grep -v "Warning\|warnings.warn" "$R/probe34.log" | tail -30
tar -czf "$OUT/run34.tgz" -C /tmp run34${RUN_TAG:-}
