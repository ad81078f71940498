#!/usr/bin/env bash
# Issue 13 on 2x H200 (kind nvidia-h200-x2; NOT YET RUN: the kind was withheld in the session that wrote it).
# 1) the Ulysses exchanges per wire (bf16, int8, fp8) at 38,272 and 10,304 rows, with errors and projections at 50
#    and 25 GB/s (runtime/bench_a2a.py); 2) the full single-stage route at 1344x768 on 1 and then 2 GPUs (its per-step
#    table gives the H3 forward, 50 blocks, on each); 3) the two-stage route at 1344x768 on 1 and 2 GPUs, warm-up and
#    2 requests each. Run as `RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/x2_ulysses.sh` with carry
#    [".whl", ".tools"] (bash reports/h200/device_deps.sh makes both).
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD TRITON_CACHE_DIR=/tmp/triton_cache
OUT=${OUT:-/tmp/out}; R=/tmp/x2; mkdir -p "$R" "$OUT"
nvidia-smi topo -m > "$R/topo.txt" 2>&1
timeout -s INT 120 python3 -m torch.distributed.run --standalone --nproc-per-node=2 -m runtime.bench_a2a \
  --out "$R/a2a.json" > "$R/a2a.log" 2>&1; echo "a2a exit $?"; tail -8 "$R/a2a.log"
for n in 1 2; do
  timeout -s INT 150 python3 -m rsi run-pipeline --prompt "a red fox runs through snow" --config full \
    --resolution 1344x768 --stage1-only --gpus $n --no-mux --json "$R/single_stage_gpus$n.json" \
    > "$R/single_stage_gpus$n.log" 2>&1; echo "single-stage gpus=$n exit $?"; tail -25 "$R/single_stage_gpus$n.log"
done
for n in 1 2; do
  timeout -s INT 200 python3 -m rsi run-pipeline --prompt "a red fox runs through snow" --config full \
    --resolution 1344x768 --gpus $n --warmup --repeat 2 --no-mux --json "$R/two_stage_gpus$n.json" \
    > "$R/two_stage_gpus$n.log" 2>&1; echo "two-stage gpus=$n exit $?"; tail -30 "$R/two_stage_gpus$n.log"
done
tar -czf "$OUT/x2.tgz" -C /tmp x2
