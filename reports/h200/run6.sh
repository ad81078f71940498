#!/usr/bin/env bash
# H200 run 6 (exact command): `rsi search --op-group all --gpu h200` in one invocation (every op group in turn,
# offline proposer, 5 candidates or 1 minute per group), against the kernels locked by run 2 as incumbents.
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/logs"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv > "$OUT/logs/nvidia_smi.txt"
timeout -s INT 540 python3 -m rsi search --op-group all --gpu h200 --budget 5,1m --quiet \
  --summary-out "$OUT/logs/{op}_summary.json" 2>&1 | tee "$OUT/logs/search_all.log"
echo "search exit $?" | tee -a "$OUT/logs/search_all.log"
python3 -m rsi show --limit 40 > "$OUT/logs/show.txt" 2>&1
tar czf "$OUT/results.tgz" verified_kernels candidates .rsi/rsi.db 2>/dev/null
tar czf "$OUT/logs.tgz" -C "$OUT" logs; ls -la "$OUT"
