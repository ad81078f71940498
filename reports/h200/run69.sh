#!/usr/bin/env bash
# H200 run 69 (seventeenth session), three calls to one warm machine:
#   b: probe 69's smoke test of the CuTe FP8 attention template (rsi/templates/attention_fp8_cute.py: its pieces
#      against the reference's quantiser and attention at small shapes and the special cases; first GPU run); then
#      the judged search of attention_cute on its own buckets (h3_full, h3_per_rank: search_spaces/attention.toml),
#      seed 0, one candidate: run 68's fastest schedule, BN 128 OVERLAP 1 with DYNAMIC 1 (--first: a sweep's config,
#      not the search's), on the real lock; if the lock changed, one H3 block at 1344x768 (38,248 rows) with
#      --kernels reference and verified side by side (runtime/bench_h200.py); then, if the smoke test passed, probe
#      69's timing of the FP8 template beside SDPA cuDNN and cuDNN's FP8 attention.
#   c: if the smoke test passed, the judged search of attention_fp8 with the CuTe template (seed 0, its heuristic
#      first, at most 2 candidates, none started after 3 minutes).
#   here, once: bash reports/h200/device_deps.sh && bash reports/h200/cute_carry.sh
#   call 1, carry [".whl", ".cute/part1"]:                           bash reports/h200/run69.sh a
#   call 2 at once, carry [".cute/part2", ".cute/extra", ".tools"]:  RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run69.sh b
#   call 3 at once, carry [".tools"]:                                RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run69.sh c
STEP=${1:?usage: run69.sh a|b|c}
. reports/h200/lib.sh
if [ "$STEP" = a ]; then
  stash_cute_part1 && install_whl .whl && echo "part1 ok"; exit $?
fi
setup_run run69
python3 -c "import cutlass.cute" 2>/dev/null || install_cute || exit 1
export RSI_BWRAP=$PWD/.tools/bwrap COLUMNS=160
smoke_ok() {
  python3 -c "import json,sys; r=json.load(open('$R/probe69_smoke.json'))['pieces']; sys.exit(0 if r and all(
    'error' not in x and x['launch_vs_ref'] < 0.05 and x['nonfinite_where_ref_finite'] == 0
    and x['finite_where_ref_nonfinite'] == 0 for x in r) else 1)" 2>/dev/null
}
if [ "$STEP" = b ]; then
  run smoke 120 python3 reports/h200/probe69.py "$R/probe69_smoke.json" --smoke
  run dense 280 python3 -m rsi search --op-group attention --template attention_cute --gpu h200 --seed 0 \
    --first DYNAMIC=1 --budget 1,4m --summary-out "$R/search_attention_cute.json"
  cp .rsi/rsi.db "$R/rsi_dense.db"
  if ! sha256sum -c --quiet "$R/lock.txt" 2>/dev/null; then
    run block 75 python3 -m runtime.bench_h200 --out "$R/bench_block.json" --blocks 2 --skip-request --block-reps 5
    cp -r verified_kernels "$R/verified_kernels_after"
  fi
  smoke_ok && run probe 110 python3 reports/h200/probe69.py "$R/probe69.json" 8 --timing-only
else
  smoke_ok || { echo "smoke test failed: no FP8 search"; exit 0; }
  run fp8search ${SEARCH_CAP:-300} python3 -m rsi search --op-group attention_fp8 --template attention_fp8_cute \
    --gpu h200 --seed 0 --budget 2,3m --summary-out "$R/search_attention_fp8_cute.json"
  cp .rsi/rsi.db "$R/rsi_fp8.db"
fi
tar -czf "$OUT/run69.tgz" -C /tmp run69
