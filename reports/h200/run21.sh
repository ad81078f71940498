#!/usr/bin/env bash
# H200 run 21 (issue 11, part 2; NOT YET RUN). One device call after run 20's promotions are committed: the H3
# block at 38,248 rows with dense and FP8 attention (runtime/bench_h200.py --attention dense fp8: block time,
# attention ms per block, the FP8 block's error against dense), the refiner's attention quality at full size
# (dense vs Sol-Attn at the report's tau schedule and a denser one, vs FP8: latent rel-L2 and decoded-frame PSNR
# per update, density per update, attention seconds), and the two-stage request with --attention sol.
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONUNBUFFERED=1 RSI_BWRAP=$PWD/.tools/bwrap PYTHONPATH=/tmp/site:$PWD
OUT=${OUT:-/tmp/out}; R=/tmp/run21; mkdir -p "$R" "$OUT"
timeout -s INT 150 python3 -m runtime.bench_h200 --modes verified --attention dense fp8 --skip-request \
  --blocks 2 --forward-reps 1 --out "$R/bench_block_attention.json" > "$R/bench_block_attention.log" 2>&1
echo "block exit $?"; tail -6 "$R/bench_block_attention.log"
timeout -s INT 150 python3 -m rsi attention-quality --config full --sol-tau 1.0,1.25,1.5 --sol-tau 0.5,0.75,1.0 \
  --json "$R/quality_sol.json" > "$R/quality_sol.log" 2>&1; echo "quality sol exit $?"; tail -16 "$R/quality_sol.log"
timeout -s INT 100 python3 -m rsi attention-quality --config full --attention fp8 --json "$R/quality_fp8.json" \
  > "$R/quality_fp8.log" 2>&1; echo "quality fp8 exit $?"; tail -10 "$R/quality_fp8.log"
timeout -s INT 180 python3 -m rsi run-pipeline --prompt "a red fox runs through snow" --config full \
  --resolution 1344x768 --attention sol --warmup --repeat 2 --no-mux --json "$R/two_stage_sol.json" \
  > "$R/two_stage_sol.log" 2>&1; echo "two-stage sol exit $?"; tail -45 "$R/two_stage_sol.log"
tar -czf "$OUT/run21.tgz" -C /tmp run21
