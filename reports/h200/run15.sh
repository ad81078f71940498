#!/usr/bin/env bash
# H200 run 15 (exact command), one device call: offline searches of the LTX-2 refiner op groups in this
# repository's root (promotions go into verified_kernels/, brought back as a tarball), then the refiner bench:
# diffusers' LTX2VideoTransformer3DModel.forward vs ours (reference ops, the kernels just promoted), same process.
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONUNBUFFERED=1 RSI_BWRAP=$PWD/.tools/bwrap PYTHONPATH=/tmp/site:$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/run15"
for op in ltx_modulate ltx_gate_residual_modulate ltx_qk_norm_rope gelu_tanh; do
  timeout -s INT 105 python3 -m rsi search --op-group $op --gpu h200 --budget 3 --reps 20 --quiet \
    --summary-out "$OUT/run15/search_$op.json" > "$OUT/run15/search_$op.log" 2>&1
  echo "$op exit $?"; tail -14 "$OUT/run15/search_$op.log"
done
tar -czf "$OUT/run15/verified_kernels.tgz" verified_kernels
timeout -s INT 110 python3 -m runtime.bench_refiner --layers 8 --out "$OUT/run15/bench_refiner.json" \
  > "$OUT/run15/bench_refiner.log" 2>&1; echo "bench_refiner exit $?"; tail -6 "$OUT/run15/bench_refiner.log"
