#!/usr/bin/env bash
# H200 run 29 (seventh session): measurements for issues 11 and 12 on the lock at the launching commit, in one call,
# and the first half of the CuTe DSL carry (../shared/docs/CUTE_DSL_ON_H200.md; run 30 follows at once):
#  1. the four H3 linears at 38,248 rows, FP8 (the runtime's Fp8Linear: verified fp8_linear kernel, else the compiled
#     per-row quantiser + torch._scaled_mm) against bf16 F.linear in one loop, and the three fused producers against
#     the bf16 op each replaces (runtime/bench_fp8.py);
#  2. Sol-Attn (verified sol_attn kernel, selection included) against dense cuDNN, forced, in one loop, at the
#     refiner's 16,128 rows per tau of the schedule (runtime/bench_sol.py);
#  3. one H3 block at 38,248 rows with bf16 and with e4m3 linears (runtime/bench_h200.py, 2-block model);
#  4. the full-size two-stage request (1344x768) in bf16 and with --precision fp8, same seed, with the latents saved
#     and compared (runtime/latent_error.py).
# Run as `RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run29.sh` with carry
# [".whl", ".tools", ".cute/part1", ".rsi/src.tgz"] (src.tgz: `git archive` of the commit, unpacked over the tree).
set -o pipefail
[ -f .rsi/src.tgz ] && tar -xzf .rsi/src.tgz
mkdir -p /root/cute && cp .cute/part1/* /root/cute/ 2>/dev/null
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONUNBUFFERED=1 RSI_BWRAP=$PWD/.tools/bwrap PYTHONPATH=/tmp/site:$PWD TRITON_CACHE_DIR=/tmp/triton_cache
OUT=${OUT:-/tmp/out}; R=/tmp/run29; mkdir -p "$R" "$OUT"
sha256sum verified_kernels/LOCK.json > "$R/lock.txt"
run() {  # name, cap (s), command...
  local name=$1 cap=$2; shift 2
  local t0=$SECONDS
  timeout -s INT "$cap" "$@" > "$R/$name.log" 2>&1; echo "$name exit $? in $((SECONDS - t0)) s"
  grep -v "Warning\|warnings.warn" "$R/$name.log" | tail -8
}
run fp8 110 python3 -m runtime.bench_fp8 --rows 38248 --out "$R/bench_fp8.json"
run sol 80 python3 -m runtime.bench_sol --out "$R/bench_sol.json"
run block 100 python3 -m runtime.bench_h200 --modes verified --attention dense --precision bf16 fp8 \
  --skip-request --blocks 2 --forward-reps 1 --out "$R/bench_block.json"
for p in bf16 fp8; do
  run two_stage_$p 75 python3 -m rsi run-pipeline --prompt "a red fox runs through snow" --config full \
    --resolution 1344x768 --precision $p --warmup --repeat 2 --no-mux --json "$R/two_stage_$p.json" \
    --save-latents /tmp/lat_$p.pt
done
python3 -m runtime.latent_error /tmp/lat_bf16.pt /tmp/lat_fp8.pt --json "$R/two_stage_fp8_error.json" \
  > "$R/two_stage_fp8_error.log" 2>&1; cat "$R/two_stage_fp8_error.log"
tar -czf "$OUT/run29.tgz" -C /tmp run29
