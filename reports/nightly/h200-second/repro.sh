#!/usr/bin/env bash
# rsi nightly 20261201-112434-4c1160: NVIDIA H200 on vm; torch 2.11.0+cu130, Triton 3.6.0, CUDA 13.0, driver 580.159.04, Python 3.12.3
# rsi commit 3ac14dee15a1c5d85b5a7d16d7cb7fb4ee565e8c; verified_kernels/LOCK.json sha256 1b7ec97327360f8b613e799847d4f1ee469310e497f6f549ccaec282306b49bf
# Run from the repository root at that commit. A nightly resumes the phases already done in OUT: set OUT to a new folder for a fresh run.
set -euo pipefail
export PYTHONPATH=/tmp/site:/work/main
export RSI_BWRAP=/work/main/.tools/bwrap
export RSI_COMMIT=3ac14dee15a1c5d85b5a7d16d7cb7fb4ee565e8c
export RSI_DIRTY=0
PY=${PY:-python}
OUT=${OUT:-/work/main/.rsi/nightly/h200-second}
# the nightly:
"$PY" -m rsi nightly --gpu h200 --ops modulate,qk_norm_rope,swiglu --reps 20 --repeat 9 --steps 8 --phase-timeout 540 --no-mux --out "$OUT" --baseline .rsi/nightly/h200-first
# the phases it ran (each can be run alone):
# "$PY" -m rsi verify --op-group modulate --gpu h200 --reps 20 --out "$OUT"/work/verify-modulate.json
# "$PY" -m rsi verify --op-group qk_norm_rope --gpu h200 --reps 20 --out "$OUT"/work/verify-qk_norm_rope.json
# "$PY" -m rsi verify --op-group swiglu --gpu h200 --reps 20 --out "$OUT"/work/verify-swiglu.json
# "$PY" -m rsi bench --op-group modulate --gpu h200 --reps 20 --out "$OUT"/work/bench-modulate.json
# "$PY" -m rsi bench --op-group qk_norm_rope --gpu h200 --reps 20 --out "$OUT"/work/bench-qk_norm_rope.json
# "$PY" -m rsi bench --op-group swiglu --gpu h200 --reps 20 --out "$OUT"/work/bench-swiglu.json
# "$PY" -m rsi run-pipeline --prompt 'a red fox runs through fresh snow at dawn, wind noise' --config full --resolution 1344x768 --two-stage --warmup --repeat 9 --no-mux --kernels verified --out "$OUT"/work/pipeline-two-stage.mp4 --json "$OUT"/work/pipeline-two-stage.json
# "$PY" -m rsi run-pipeline --prompt 'a red fox runs through fresh snow at dawn, wind noise' --config full --resolution 672x384 --stage1-only --steps 8 --no-mux --kernels verified --out "$OUT"/work/pipeline-single-stage.mp4 --json "$OUT"/work/pipeline-single-stage.json
