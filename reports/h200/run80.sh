#!/usr/bin/env bash
# Device run 80 (twenty-fifth session): issue 12's producers on the H200.
#   p: probe 80 (reports/h200/probe80.py, outside the judge; REPS, default 15): gate_residual_modulate_fp8_warp with
#      the row loop (PERSIST) beside one program a row and the h200 lock's kernel, against the bf16 op
#   j: the judged searches (--first: a sweep's config, not the search's), each where the probe's fastest bitwise
#      variant is faster than the locked kernel: gate_residual_modulate_fp8 from probe 80 (--reps 20; without probe 80,
#      from run 79's probe: one warp, RELOAD 1), then swiglu_fp8's
#      one-piece PART config from run 79's probe again with JREPS repetitions (default 40: run 79's judge at 20 left
#      its stage1 and per_rank CIs inside A/A bands of 0.215 and 0.128)
#   pj: p then j, in one call
# On an H200 (the judges' huge shapes do not fit an H100's 80 GB), carry [".whl", ".tools"]:
#   RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 OPS=gate_residual_modulate_fp8 bash reports/h200/run80.sh pj
#   RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 OPS=swiglu_fp8 bash reports/h200/run80.sh j   (the same warm machine)
STEP=${1:?usage: run80.sh p|j|pj}
. reports/h200/lib.sh
setup_run run80
install_whl .whl || exit 1
export RSI_BWRAP=$PWD/.tools/bwrap COLUMNS=160
detect_target
if [ "$STEP" = p ] || [ "$STEP" = pj ]; then
  echo "python3 reports/h200/probe80.py probe80.json ${REPS:-15}" >> "$R/commands.txt"
  run probe80 240 python3 reports/h200/probe80.py "$R/probe80.json" "${REPS:-15}"
  cp "$R/probe80.json" "$R/probe80.log" "$R/commands.txt" "$R/gpu.txt" "$R/commit.txt" "$R/lock.txt" "$OUT/" 2>/dev/null
  [ "$STEP" = pj ] || exit 0
fi
J=$R/probe80.json; [ -e "$J" ] || J=reports/h200/run80/probe80.json
[ -e "$J" ] || { J=reports/h200/run79/probe79.json; echo "no probe 80: gate_residual_modulate_fp8's variant from $J"; }
for OP in ${OPS:-gate_residual_modulate_fp8 swiglu_fp8}; do
  if [ "$OP" = swiglu_fp8 ]; then
    read -r NAME TPL FIRST < <(probe_choice reports/h200/run79/probe79.json "$OP"); CAP=260; export JREPS=${JREPS:-40}
  else
    read -r NAME TPL FIRST < <(probe_choice "$J" "$OP"); CAP=175
  fi
  echo "$OP: ${NAME:-no variant faster than the locked kernel}"
  [ -n "$FIRST" ] || continue
  judge_first "$OP" "$TPL" "$FIRST" "$CAP"
  # after every judge (the call's 600 s may end the next one): its verdicts and the lock so far
  [ -e .rsi/rsi.db ] && python3 reports/h200/verdicts_from_db.py .rsi/rsi.db "$R/verdicts.json" 2>/dev/null
  cp "$R/commands.txt" "$OUT/"
  tar -czf "$OUT/run80j.tgz" -C /tmp run80 -C "$PWD" verified_kernels
done
