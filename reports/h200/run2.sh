#!/usr/bin/env bash
# H200 run 2 (exact command): swiglu search (issue 2) then every other op group (issue 3), each capped in time so
# that the results are packed before the call's limit; a capped search loses nothing (`--resume` continues it).
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/logs"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv > "$OUT/logs/nvidia_smi.txt"
search() {  # op budget seconds
  timeout -s INT "$3" python3 -m rsi search --op-group "$1" --gpu h200 --budget "$2" --quiet \
    --summary-out "$OUT/logs/$1_summary.json" > "$OUT/logs/$1_search.log" 2>&1
  echo "$1 exit $?" | tee -a "$OUT/logs/exits.txt"; tail -12 "$OUT/logs/$1_search.log"
}
search swiglu 10,3m 190
for op in gate_residual_modulate qk_norm_rope modulate; do search $op 3,1m 70; done
for op in qkv_pack head_merge lora_consumer; do search $op 2,1m 45; done
python3 -m rsi show --limit 20 > "$OUT/logs/show.txt" 2>&1
tar czf "$OUT/results.tgz" verified_kernels candidates .rsi/rsi.db "$OUT/logs" 2>/dev/null; ls -la "$OUT"
