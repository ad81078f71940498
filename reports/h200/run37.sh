#!/usr/bin/env bash
# H200 run 37 (ninth session): cuDNN's fused FP8 attention with per-head scales (runtime/attention_fp8_cudnn.py,
# nvidia-cudnn-frontend 1.23.0 from .whl/) against dense cuDNN, in two calls:
#  PART=a  1. cuDNN's versions; the GPU test (tests/unit/test_attention_fp8_cudnn_gpu.py: the class at the odd shapes,
#             every layout and special case, and the torch emulation of the scheme);
#          2. runtime/bench_attention.py at h3_full, h3_stage1 and ltx_video: sdpa_cudnn (twice: A/A), sdpa_flash, the
#             runtime's dense path, cudnn_fp8 and the runtime's --attention fp8 path in one interleaved loop, errors
#             against the exact op in fp64;
#          3. one H3 block at 38,248 rows (runtime/bench_h200.py, 2-block model): dense and fp8 attention, bf16 and
#             e4m3 linears.
#  PART=b  4. the full refiner's end-to-end error with FP8 attention (rsi attention-quality --config full);
#          5. the full-size two-stage request with --attention fp8 (and --precision fp8), same seed as bf16 dense,
#             latents compared (runtime/latent_error.py).
# PART=ab runs both in one call. Run as `PART=a RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run37.sh` with carry [".whl", ".rsi/src.tgz"].
set -o pipefail
[ -f .rsi/src.tgz ] && tar -xzf .rsi/src.tgz
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD TRITON_CACHE_DIR=/tmp/triton_cache
PART=${PART:-a}
OUT=${OUT:-/tmp/out}; R=/tmp/run37$PART; mkdir -p "$R" "$OUT"
echo "commit ${RSI_COMMIT:-unknown} dirty ${RSI_DIRTY:-unknown}" > "$R/commit.txt"
sha256sum verified_kernels/LOCK.json > "$R/lock.txt"
run() {  # name, cap (s), command...
  local name=$1 cap=$2; shift 2
  local t0=$SECONDS
  timeout -s INT "$cap" "$@" > "$R/$name.log" 2>&1; echo "$name exit $? in $((SECONDS - t0)) s"
  grep -v "Warning\|warnings.warn" "$R/$name.log" | tail -12
}
if [[ "$PART" == *a* ]]; then
  python3 -c "import torch, cudnn; print('torch', torch.__version__, 'cudnn backend', torch.backends.cudnn.version(), \
'frontend', cudnn.__version__, cudnn.backend_version_string())" 2>&1 | tee "$R/versions.txt"
  run gpu_test 150 python3 -m pytest tests/unit/test_attention_fp8_cudnn_gpu.py -v -p no:xdist -p no:cacheprovider \
    -o addopts=""
  run bench_attention 200 python3 -m runtime.bench_attention --buckets h3_full h3_stage1 ltx_video --reps 20 \
    --out "$R/bench_attention.json"
  run block 180 python3 -m runtime.bench_h200 --modes verified --attention dense fp8 --precision bf16 fp8 \
    --skip-request --blocks 2 --forward-reps 1 --out "$R/bench_block.json"
fi
if [[ "$PART" == *b* ]]; then
  run quality_fp8_attention 120 python3 -m rsi attention-quality --config full --attention fp8 \
    --json "$R/quality_fp8_attention.json"
  for a in "dense bf16" "fp8 bf16" "fp8 fp8"; do
    set -- $a
    run two_stage_$1_$2 90 python3 -m rsi run-pipeline --prompt "a red fox runs through snow" --config full \
      --resolution 1344x768 --attention $1 --precision $2 --warmup --repeat 2 --no-mux \
      --json "$R/two_stage_$1_$2.json" --save-latents /tmp/lat_$1_$2.pt
  done
  for v in fp8_bf16 fp8_fp8; do
    python3 -m runtime.latent_error /tmp/lat_dense_bf16.pt /tmp/lat_$v.pt --json "$R/two_stage_${v}_error.json" \
      > "$R/two_stage_${v}_error.log" 2>&1; tail -12 "$R/two_stage_${v}_error.log"
  done
fi
tar -czf "$OUT/run37$PART.tgz" -C /tmp run37$PART
