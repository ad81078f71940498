#!/usr/bin/env bash
# Device run 89 (thirty-first session): the CuTe DSL producers on this card (H200 or H100: the target is the card's).
#   here, once: bash reports/h200/device_deps.sh && bash reports/h200/cute_carry.sh
#   call 1, carry [".whl", ".cute/part1"]:                            bash reports/h200/run89.sh a
#   call 2 at once, carry [".cute/part2", ".cute/extra", ".tools"]:   RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run89.sh p
#      p, in order (the call's 600 s may end it; each step's files go to $OUT as it ends):
#        1. probe 88's timing (modulate_fp8_cute against the bf16 modulate kernel; REPS, default 10)
#        2. the judged search of modulate_fp8_cute's heuristic (--first, a sweep's config; --reps JREPS, default 40)
#        3. probe 89's smoke test (gate_residual_modulate_fp8_cute, bitwise at every layout and special case)
#        4. probe 89's timing
#        5. the judged search of gate_residual_modulate_fp8_cute at 256 threads (run 89 h's fastest at stage1 and
#           per_rank), if probe 89 found it bitwise
#      (run 89 h ran p with the residual's judge at its heuristic, 128 threads, and JREPS 20; since then both
#       judges default to 40 repetitions: run 89 h's A/A bands at 20 were 0.13-0.58)
#      t (instead of p, where device time is short): steps 1 and 4 only (each probe checks its variants bitwise at
#        every bucket before timing them)
#      d (instead of p): the judge's full-bucket question (run 89 h: modulate_fp8_cute 360 us at full in the judge,
#        236 us in probe 88's loop): step 1, then its judge again without the producer sandbox
#        (--unsafe-no-sandbox: the producer still a separate process)
STEP=${1:?usage: run89.sh a|p|t|d}
. reports/h200/lib.sh
if [ "$STEP" = a ]; then
  stash_cute_part1 && install_whl .whl && echo "part1 ok"; exit $?
fi
setup_run run89
python3 -c "import cutlass.cute" 2>/dev/null || install_cute || exit 1
export RSI_BWRAP=$PWD/.tools/bwrap COLUMNS=160
detect_target
cp "$R/commit.txt" "$R/lock.txt" "$R/gpu.txt" "$OUT/"
keep() { cp "$R"/*.json "$R"/*.log "$R/commands.txt" "$OUT/" 2>/dev/null
  [ -e .rsi/rsi.db ] && python3 reports/h200/verdicts_from_db.py .rsi/rsi.db "$R/verdicts.json" 2>/dev/null
  tar -czf "$OUT/run89.tgz" -C /tmp run89 -C "$PWD" verified_kernels; }
echo "python3 reports/h200/probe88.py probe88.json ${REPS:-10}" >> "$R/commands.txt"
run probe88 150 python3 reports/h200/probe88.py "$R/probe88.json" "${REPS:-10}"; keep
if [ "$STEP" = d ]; then
  echo "python3 -m rsi search --op-group modulate_fp8 --template modulate_fp8_cute --first THREADS=128,CHUNKS=8" \
    "--reps 40 --gpu $T --seed 0 --budget 1,3m --unsafe-no-sandbox" >> "$R/commands.txt"
  run search_nosandbox 240 python3 -m rsi search --op-group modulate_fp8 --template modulate_fp8_cute \
    --first THREADS=128,CHUNKS=8 --reps 40 --gpu "$T" --seed 0 --budget 1,3m --unsafe-no-sandbox \
    --summary-out "$R/search_nosandbox.json"
  rm -f "$OUT"/*; tar -czf "$OUT/run89d.tgz" -C /tmp run89
  exit 0
fi
if [ "$STEP" = t ]; then
  echo "python3 reports/h200/probe89.py probe89.json ${REPS:-10}" >> "$R/commands.txt"
  run probe89 120 python3 reports/h200/probe89.py "$R/probe89.json" "${REPS:-10}"
  rm -f "$OUT"/*; tar -czf "$OUT/run89t.tgz" -C /tmp run89   # one file: the tool brings back eight at most
  exit 0
fi
JREPS=${JREPS:-40} judge_first modulate_fp8 modulate_fp8_cute THREADS=128,CHUNKS=8 240; keep
echo "python3 reports/h200/probe89.py probe89_smoke.json --smoke" >> "$R/commands.txt"
run smoke89 120 python3 reports/h200/probe89.py "$R/probe89_smoke.json" --smoke; keep
echo "python3 reports/h200/probe89.py probe89.json ${REPS:-10}" >> "$R/commands.txt"
run probe89 120 python3 reports/h200/probe89.py "$R/probe89.json" "${REPS:-10}"; keep
if python3 -c "import json,sys; sys.exit(0 if all(r['ok'] for r in json.load(open('$R/probe89_smoke.json'))['rows']) else 1)"; then
  JREPS=${JREPS:-40} judge_first gate_residual_modulate_fp8 gate_residual_modulate_fp8_cute THREADS=256,CHUNKS=4 240
  keep
fi
