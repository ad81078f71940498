#!/usr/bin/env bash
# H200 run 20 (sixth session; issues 11 and 12). One device call: offline searches of the attention op groups
# against their incumbents (attention: sdpa_cudnn / sdpa_flash / sdpa_efficient / compiled Flex; attention_fp8:
# the dense SDPA backends; sol_attn: sol_flex at ltx_video), of fp8_linear against torch._scaled_mm (eager and
# compiled quantiser), and short searches of the three fused FP8 producers. These op groups do not time their fp32
# reference (OpGroup.reference_timed False), so a candidate's timing loop holds only the incumbents, the A/A pair
# and a same-bytes copy. Everything comes back in one tarball (a call returns at most 8 files).
# Run as `RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run20.sh` with carry [".whl", ".tools"]
# (bash reports/h200/device_deps.sh makes both).
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONUNBUFFERED=1 RSI_BWRAP=$PWD/.tools/bwrap PYTHONPATH=/tmp/site:$PWD TRITON_CACHE_DIR=/tmp/triton_cache
OUT=${OUT:-/tmp/out}; R=/tmp/run20; mkdir -p "$R" "$OUT"
search() {  # op, time cap (s), budget
  timeout -s INT "$2" python3 -m rsi search --op-group "$1" --gpu h200 --budget "$3" --reps 15 --quiet \
    --summary-out "$R/search_$1.json" > "$R/search_$1.log" 2>&1
  echo "$1 exit $?"; tail -14 "$R/search_$1.log"
}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$R/gpu.txt" 2>&1
search attention 150 12,2m
search attention_fp8 100 8,1.3m
search sol_attn 75 6,0.9m
search fp8_linear 110 8,1.4m
for op in modulate_fp8 swiglu_fp8 head_merge_fp8; do search $op 35 4,0.4m; done
python3 -m rsi show > "$R/show.txt" 2>&1
tar -czf "$OUT/run20.tgz" -C /tmp run20 -C "$PWD" verified_kernels
