#!/usr/bin/env bash
# H200 run 18 (exact command), one device call: run 16's two-stage requests again after its fixes: every request
# muxes (run 16 muxed only the last, so first and steady totals were not comparable), libx264 preset veryfast
# (run 16's default preset took 8.9 s on the noise frames), the MP4 check demuxes instead of decoding every frame,
# and the H3 AdaLN release happens before the LTX-2 refiner is built (run 16 peaked at 134.5 GiB).
#  P1 cold Triton cache, no warm-up, 2 requests (the true first request, JIT inside; then the steady state);
#  P2 warm on-disk Triton cache, --warmup, 2 requests;  P3 --kernels reference, 2 requests (same route).
# Run as `RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run18.sh` (the device's .git is stale).
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD TRITON_CACHE_DIR=/tmp/triton_cache
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/run18"
P="a red fox runs through fresh snow at dawn, wind noise"
common=(--config full --prompt "$P" --duration 5 --prompt-cache /tmp/pc --resolution 1344x768 --two-stage --repeat 2)
timeout -s INT 150 python3 -m runtime.cli run-pipeline "${common[@]}" --kernels verified --out /tmp/p1.mp4 \
  --json "$OUT/run18/p1_cold_verified.json" > "$OUT/run18/p1.log" 2>&1
echo "P1 exit $?"; grep -E "first request|peak GPU|request total|generation" "$OUT/run18/p1.log"
timeout -s INT 150 python3 -m runtime.cli run-pipeline "${common[@]}" --warmup --kernels verified --out /tmp/p2.mp4 \
  --json "$OUT/run18/p2_warm_verified.json" > "$OUT/run18/p2.log" 2>&1
echo "P2 exit $?"; tail -80 "$OUT/run18/p2.log" | head -45
timeout -s INT 130 python3 -m runtime.cli run-pipeline "${common[@]}" --kernels reference --out /tmp/p3.mp4 \
  --json "$OUT/run18/p3_reference.json" > "$OUT/run18/p3.log" 2>&1
echo "P3 exit $?"; grep -E "first request|peak GPU|request total|generation" "$OUT/run18/p3.log"
