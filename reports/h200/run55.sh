#!/usr/bin/env bash
# H200 run 55 (twelfth session's plan, run in the thirteenth), carry [".whl", ".tools"]:
#   RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run55.sh
# The tolerance class gained a rounding-bias test (rsi/harness/check.py, BIAS_*): every locked kernel of a tolerance
# op group re-judged on the GPU with fresh seeds (`rsi verify`, huge shapes included), each row with the worst
# observed statistics (bias_ulps beside elem_worst_ratio), and the GPU adversarial tests.
# As run: the caps add up to more than one call's 600 s. Call 1 (828e298, clean) finished the eight verifies and was
# cut in the adversarial step; call 2, on the still-warm machine, tarred /tmp/run55 and re-ran only the `run
# gpu_adversarial` line below with a cap of 480 s, then the final tar (docs/results.md, runs 55-57).
. reports/h200/lib.sh
setup_run run55
install_whl .whl || exit 1
export RSI_BWRAP=$PWD/.tools/bwrap COLUMNS=160
for op in swiglu gelu_tanh modulate gate_residual_modulate qk_norm_rope ltx_modulate ltx_gate_residual_modulate \
    ltx_qk_norm_rope; do
  run "verify_$op" 120 python3 -m rsi verify --op-group "$op" --gpu h200 --reps 5 --out "$R/verify_$op.json"
done
run gpu_adversarial 200 python3 -m pytest tests/gpu/test_adversarial_gpu.py -q -p no:xdist -p no:cacheprovider \
  -o addopts=""
tar -czf "$OUT/run55.tgz" -C /tmp run55
