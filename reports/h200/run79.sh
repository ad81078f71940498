#!/usr/bin/env bash
# Device run 79 (twenty-third session): the fused producers after the quantiser changes of 1005a0e and deb8a41
# (reports/h200/probe79.py).
#   p: the producers' GPU tests (TESTS=0: none), then probe 79 (outside the judge; REPS, default 15):
#      modulate_fp8, gate_residual_modulate_fp8 and swiglu_fp8, the locked kernels beside the templates' configs,
#      against the bf16 ops
#   j: for each op group of OPS (default swiglu_fp8, the nearest the goal, then gate_residual_modulate_fp8 and
#      modulate_fp8), the judged search of probe 79's fastest bitwise variant (geometric mean over the buckets;
#      --first: a sweep's config, not the search's; --reps 20 as runs 74 b and 75) where it is faster than the
#      locked kernel there; needs p's probe79.json (same warm machine, or reports/h200/run79/probe79.json)
#   pj: p's probe (no tests), then j, in one call
# On an H200 (the judges' huge shapes do not fit an H100's 80 GB), carry [".whl", ".tools"]:
#   RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run79.sh p   (then j)
STEP=${1:?usage: run79.sh p|j|pj}
. reports/h200/lib.sh
setup_run run79
install_whl .whl || exit 1
export RSI_BWRAP=$PWD/.tools/bwrap COLUMNS=160
detect_target
if [ "$STEP" = p ] && [ "${TESTS:-1}" = 1 ]; then   # the six producer templates bitwise on this GPU (NaN rows too)
  echo "python3 -m pytest tests/unit/test_fp8_gpu.py -k producer -v -p no:xdist -p no:cacheprovider -o addopts=''" \
    >> "$R/commands.txt"
  run gputests 150 python3 -m pytest tests/unit/test_fp8_gpu.py -k producer -v -p no:xdist -p no:cacheprovider \
    -o addopts=''
fi
if [ "$STEP" = p ] || [ "$STEP" = pj ]; then
  echo "python3 reports/h200/probe79.py probe79.json ${REPS:-15}" >> "$R/commands.txt"
  run probe79 380 python3 reports/h200/probe79.py "$R/probe79.json" "${REPS:-15}"
  cp "$R/probe79.json" "$R/probe79.log" "$R/gputests.log" "$R/commands.txt" "$R/gpu.txt" "$R/commit.txt" \
    "$R/lock.txt" "$OUT/" 2>/dev/null
  [ "$STEP" = pj ] || exit 0
fi
J=$R/probe79.json; [ -e "$J" ] || J=reports/h200/run79/probe79.json
for OP in ${OPS:-swiglu_fp8 gate_residual_modulate_fp8 modulate_fp8}; do
  read -r NAME TPL FIRST < <(probe_choice "$J" "$OP")
  echo "$OP: ${NAME:-no variant faster than the locked kernel}"
  [ -n "$FIRST" ] || continue
  judge_first "$OP" "$TPL" "$FIRST" 175
  # after every judge (the call's 600 s may end the next one): its verdicts and the lock so far
  [ -e .rsi/rsi.db ] && python3 reports/h200/verdicts_from_db.py .rsi/rsi.db "$R/verdicts.json" 2>/dev/null
  cp "$R/commands.txt" "$OUT/"
  tar -czf "$OUT/run79j.tgz" -C /tmp run79 -C "$PWD" verified_kernels
done
