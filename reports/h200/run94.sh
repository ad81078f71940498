#!/usr/bin/env bash
# Device run 94 (thirty-fourth session, on an H200): where a machine may come for one call only, the judge that
# needs no CuTe DSL first, in the call that also stashes the CuTe carry's first part:
#   here, once: bash reports/h200/device_deps.sh && bash reports/h200/cute_carry.sh
#   call 1, carry [".whl", ".cute/part1", ".tools"]:  RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run94.sh s
#      s: .cute/part1 stashed and .whl installed (run 93's step a), then the judged search of swiglu_fp8's one-piece
#         PART config (run 93's g, second half; JREPS, default 40): run 79 accepted it and did not promote it
#         (stage1's and per_rank's CIs inside wide A/A bands at 20 repetitions, with the 500k-cycle spin)
#   then, warm, carry [".cute/part2", ".cute/extra", ".tools"]: run93.sh m, k (the CuTe producers' judges), run76.sh c
STEP=${1:?usage: run94.sh s}
. reports/h200/lib.sh
[ "$STEP" = s ] || { echo "unknown step $STEP"; exit 2; }
stash_cute_part1 && install_whl .whl || exit 1
setup_run run94
export RSI_BWRAP=$PWD/.tools/bwrap COLUMNS=160
detect_target
RUN=run94
judge_swiglu_part
