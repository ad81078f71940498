#!/usr/bin/env bash
# H200 run 16 (exact command), one device call: the full-size two-stage route (5 s, 1344x768; H3 33B + LTX-2
# 18.9B, random weights) with run 15's kernels, committed.
#  P1 cold Triton cache, no warm-up, 2 requests: the true first request (JIT inside) and the steady state;
#  P2 warm on-disk Triton cache, --warmup, 2 requests: the warm-up phase reported apart, then requests;
#  P3 --kernels reference, 2 requests: the side-by-side baseline of the same route;
#  P4 the single-stage route at 672x384 decoded by diffusers' H3 video VAE (its decode time).
# Run as `RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run16.sh`: the device's copy carries a stale .git
# (run 17's records name the session's first commit, dirty), so the launching commit is passed in.
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/run16"
P="a red fox runs through fresh snow at dawn, wind noise"
common=(--config full --prompt "$P" --duration 5 --prompt-cache /tmp/pc)
export TRITON_CACHE_DIR=/tmp/triton_cache
timeout -s INT 150 python3 -m runtime.cli run-pipeline "${common[@]}" --resolution 1344x768 --two-stage --repeat 2 \
  --kernels verified --out /tmp/p1.mp4 --json "$OUT/run16/p1_cold_verified.json" > "$OUT/run16/p1.log" 2>&1
echo "P1 exit $?"; grep -E "first request|peak GPU|request total" "$OUT/run16/p1.log"
timeout -s INT 150 python3 -m runtime.cli run-pipeline "${common[@]}" --resolution 1344x768 --two-stage --repeat 2 \
  --warmup --kernels verified --out "$OUT/run16/two_stage.mp4" --json "$OUT/run16/p2_warm_verified.json" \
  > "$OUT/run16/p2.log" 2>&1
echo "P2 exit $?"; tail -75 "$OUT/run16/p2.log"
timeout -s INT 130 python3 -m runtime.cli run-pipeline "${common[@]}" --resolution 1344x768 --two-stage --repeat 2 \
  --kernels reference --out /tmp/p3.mp4 --json "$OUT/run16/p3_reference.json" > "$OUT/run16/p3.log" 2>&1
echo "P3 exit $?"; grep -E "first request|peak GPU|request total" "$OUT/run16/p3.log"
timeout -s INT 100 python3 -m runtime.cli run-pipeline "${common[@]}" --resolution 672x384 --stage1-only \
  --kernels verified --out /tmp/p4.mp4 --json "$OUT/run16/p4_stage1_672.json" > "$OUT/run16/p4.log" 2>&1
echo "P4 exit $?"; grep -E "decode|denoise step|peak GPU" "$OUT/run16/p4.log"
