#!/usr/bin/env bash
# rsi nightly 20261201-064618-c01417: CPU, no GPU on vm; torch 2.13.0+cpu, Triton 3.6.0, CUDA None, driver -, Python 3.11.7
# rsi commit d19cb1a24cd15cbb963f2de11df0c9fd384dab3f (dirty); verified_kernels/LOCK.json sha256 65af06b4378e5a71ade5672f73b4c5f5602a40e323c62c249c2731a46fbf924e
# Run from the repository root at that commit. A nightly resumes the phases already done in OUT: set OUT to a new folder for a fresh run.
set -euo pipefail
export OMP_NUM_THREADS=1
export TRITON_INTERPRET=1
PY=${PY:-python}
OUT=${OUT:-/work/main/reports/nightly/cpu-2026-12-01}
# the nightly:
"$PY" -m rsi nightly --out "$OUT"
# the phases it ran (each can be run alone):
# "$PY" -m rsi verify --op-group swiglu --reps 30 --out "$OUT"/work/verify-swiglu.json
# "$PY" -m rsi verify --op-group modulate --reps 30 --out "$OUT"/work/verify-modulate.json
# "$PY" -m rsi verify --op-group gate_residual_modulate --reps 30 --out "$OUT"/work/verify-gate_residual_modulate.json
# "$PY" -m rsi verify --op-group qk_norm_rope --reps 30 --out "$OUT"/work/verify-qk_norm_rope.json
# "$PY" -m rsi verify --op-group qkv_pack --reps 30 --out "$OUT"/work/verify-qkv_pack.json
# "$PY" -m rsi verify --op-group head_merge --reps 30 --out "$OUT"/work/verify-head_merge.json
# "$PY" -m rsi verify --op-group lora_consumer --reps 30 --out "$OUT"/work/verify-lora_consumer.json
# "$PY" -m rsi verify --op-group ltx_modulate --reps 30 --out "$OUT"/work/verify-ltx_modulate.json
# "$PY" -m rsi verify --op-group ltx_gate_residual_modulate --reps 30 --out "$OUT"/work/verify-ltx_gate_residual_modulate.json
# "$PY" -m rsi verify --op-group ltx_qk_norm_rope --reps 30 --out "$OUT"/work/verify-ltx_qk_norm_rope.json
# "$PY" -m rsi verify --op-group gelu_tanh --reps 30 --out "$OUT"/work/verify-gelu_tanh.json
# "$PY" -m rsi run-pipeline --prompt 'a red fox runs through fresh snow at dawn, wind noise' --config tiny --resolution 128x64 --duration 0.5 --two-stage --warmup --repeat 9 --kernels verified --out "$OUT"/work/pipeline-two-stage.mp4 --json "$OUT"/work/pipeline-two-stage.json
# "$PY" -m rsi run-pipeline --prompt 'a red fox runs through fresh snow at dawn, wind noise' --config tiny --resolution 64x32 --duration 0.2 --stage1-only --steps 8 --kernels verified --out "$OUT"/work/pipeline-single-stage.mp4 --json "$OUT"/work/pipeline-single-stage.json
