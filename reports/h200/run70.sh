#!/usr/bin/env bash
# H200 run 70 (prepared in the seventeenth session, not yet run): the FP8 CuTe attention template's wider key block.
# First probe 70 (reports/h200/probe70.py, outside the judge): each quantisation pass and the attention kernel alone
# at h3_full, at BN 128 and 192. Then the judged search of attention_fp8 with attention_fp8_cute (seed 0, the real
# lock): BN 192 with its heuristic's schedules (PINGPONG 1, OVERLAP 1; V^T's rows then take the 64-byte swizzle; compiled here without spills), then
# STAGES 3 at BN 128 (probe 69: 1.342x SDPA cuDNN at h3_full with PINGPONG 0, against 1.299x at 2 stages), at most 2
# candidates, none started after 3 minutes (run 69d: a verdict took ~250 s). Two calls to one warm machine:
#   here, once: bash reports/h200/device_deps.sh && bash reports/h200/cute_carry.sh
#   call 1, carry [".whl", ".cute/part1"]:                           bash reports/h200/run70.sh a
#   call 2 at once, carry [".cute/part2", ".cute/extra", ".tools"]:  RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run70.sh b
STEP=${1:?usage: run70.sh a|b}
. reports/h200/lib.sh
if [ "$STEP" = a ]; then
  stash_cute_part1 && install_whl .whl && echo "part1 ok"; exit $?
fi
setup_run run70
python3 -c "import cutlass.cute" 2>/dev/null || install_cute || exit 1
export RSI_BWRAP=$PWD/.tools/bwrap COLUMNS=160
run probe 90 python3 reports/h200/probe70.py "$R/probe70.json" 10
run fp8search 490 python3 -m rsi search --op-group attention_fp8 --template attention_fp8_cute --gpu h200 --seed 0 \
  --first BN=192 --first STAGES=3 --budget 2,3m --summary-out "$R/search_attention_fp8_cute.json"
cp .rsi/rsi.db "$R/rsi.db"
tar -czf "$OUT/run70.tgz" -C /tmp run70 -C "$PWD" verified_kernels
