#!/usr/bin/env bash
# H200 run 17 (exact command), one device call: run 15 again (its promoted kernels did not come back: a device
# call returns at most 8 files and run 15 wrote 11), with gelu_tanh's template fixed (run 15: every gelu_tanh
# candidate failed to compile, a @jit function read plain module globals). Offline searches of the LTX-2 refiner
# op groups in this repository's root; everything comes back in one tarball.
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONUNBUFFERED=1 RSI_BWRAP=$PWD/.tools/bwrap PYTHONPATH=/tmp/site:$PWD
OUT=${OUT:-/tmp/out}; R=/tmp/run17; mkdir -p "$R" "$OUT"
for op in ltx_modulate ltx_gate_residual_modulate ltx_qk_norm_rope gelu_tanh; do
  timeout -s INT 120 python3 -m rsi search --op-group $op --gpu h200 --budget 3 --reps 20 --quiet \
    --summary-out "$R/search_$op.json" > "$R/search_$op.log" 2>&1
  echo "$op exit $?"; tail -14 "$R/search_$op.log"
done
python3 -m rsi show > "$R/show.txt" 2>&1
tar -czf "$OUT/run17.tgz" -C /tmp run17 -C "$PWD" verified_kernels
