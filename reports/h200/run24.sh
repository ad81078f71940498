#!/usr/bin/env bash
# H200 run 24 (sixth session): reports/h200/explore24.py (exploration of the attention, attention_fp8, fp8_linear
# and sol_attn templates against their incumbents, outside the judge). Carry [".whl", ".tools"].
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD TRITON_CACHE_DIR=/tmp/triton_cache
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
timeout -s INT 300 python3 reports/h200/explore24.py "$OUT/explore24.json" 2>&1 | grep -v "Warning\|warnings.warn" | tee "$OUT/explore24.log" | tail -30
