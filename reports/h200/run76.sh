#!/usr/bin/env bash
# H200 run 76 (twenty-first session): the FP8 CuTe attention template's QVEC 3 and SINK 1 (and the dense template's SINK 1; the amax and row passes with 8 loads
# in flight a thread, the V^T pass's loads first) and EMU 1, against the promoted config; then the judge.
#   here, once: bash reports/h200/device_deps.sh && bash reports/h200/cute_carry.sh
#   call 1, carry [".whl", ".cute/part1"]:                           bash reports/h200/run76.sh a
#   call 2 at once, carry [".cute/part2", ".cute/extra", ".tools"]:  RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run76.sh b
#      b: probe 76's smoke test (QVEC 3's bytes against the reference's quantiser; every config's launch against the
#         op's reference), then, if it passed, probe 76's timing (reports/h200/probe76.py)
#   call 3 (same carry as call 2, warm machine): ... bash reports/h200/run76.sh c
#      c: the judged search of attention_fp8 with the CuTe template, one candidate: the config of probe 76 with the
#         least geometric-mean time over its buckets (--first: a sweep's config, not the search's), the real lock,
#         REPS repetitions (default 40, as run 71's promotion; 20 where device time is short); if it promoted, one H3 block at 38,272 rows with dense
#         and FP8 attention, bf16 and e4m3 linears (runtime.bench_h200, as run 71 d)
#   t (instead of b, on the H200 after b ran on an H100): probe 76's timing with its second config set (--second)
STEP=${1:?usage: run76.sh a|b|t|c}
. reports/h200/lib.sh
if [ "$STEP" = a ]; then
  stash_cute_part1 && install_whl .whl && echo "part1 ok"; exit $?
fi
setup_run run76
python3 -c "import cutlass.cute" 2>/dev/null || install_cute || exit 1
export RSI_BWRAP=$PWD/.tools/bwrap COLUMNS=160
cp "$R/commit.txt" "$R/lock.txt" "$OUT/"
if [ "$STEP" = b ]; then
  echo "python3 reports/h200/probe76.py probe76_smoke.json --smoke" >> "$R/commands.txt"
  run smoke 190 python3 reports/h200/probe76.py "$R/probe76_smoke.json" --smoke
  cp "$R/probe76_smoke.json" "$R/smoke.log" "$OUT/" 2>/dev/null
  if python3 -c "import json,sys; sys.exit(0 if all(r['ok'] for r in json.load(open('$R/probe76_smoke.json'))['rows']) else 1)"; then
    echo "python3 reports/h200/probe76.py probe76.json 10 --timing" >> "$R/commands.txt"
    run timing 360 python3 reports/h200/probe76.py "$R/probe76.json" 10 --timing
    cp "$R/probe76.json" "$R/timing.log" "$OUT/" 2>/dev/null
  else
    echo "smoke test failed: no timing"
  fi
  cp "$R/commands.txt" "$OUT/"
elif [ "$STEP" = t ]; then   # after call b on the H100: timing only, the second config set
  echo "python3 reports/h200/probe76.py probe76.json 10 --timing --second" >> "$R/commands.txt"
  run timing 360 python3 reports/h200/probe76.py "$R/probe76.json" 10 --timing --second
  cp "$R/probe76.json" "$R/timing.log" "$R/commands.txt" "$OUT/" 2>/dev/null
elif [ "$STEP" = c ]; then
  J=$R/probe76.json; [ -e "$J" ] || J=reports/h200/run76/probe76.json
  SECOND=""; grep -q q2e0s1 "$J" && SECOND=--second
  FIRST=$(python3 reports/h200/probe76.py "$J" --choice $SECOND)
  echo "python3 -m rsi search --op-group attention_fp8 --template attention_fp8_cute --gpu h200 --seed 0" \
    "--first $FIRST --budget 1,4m --reps ${REPS:-40}" >> "$R/commands.txt"
  run search 420 python3 -m rsi search --op-group attention_fp8 --template attention_fp8_cute --gpu h200 \
    --seed 0 --first "$FIRST" --budget 1,4m --reps "${REPS:-40}" --summary-out "$R/search.json"
  python3 reports/h200/verdicts_from_db.py .rsi/rsi.db "$R/verdicts.json" 2>/dev/null
  cp "$R/commands.txt" "$OUT/"   # the verdict and the lock so far (the block below may meet the call's limit)
  tar -czf "$OUT/run76c.tgz" -C /tmp run76 -C "$PWD" verified_kernels
  if ! sha256sum -c --quiet "$R/lock.txt" 2>/dev/null; then   # the judge promoted: one H3 block with it (run 71 d)
    echo "python3 -m runtime.bench_h200 --out $R/bench_block.json --blocks 2 --skip-request --block-reps 5" \
      "--attention dense fp8 --precision bf16 fp8" >> "$R/commands.txt"
    run block 140 python3 -m runtime.bench_h200 --out "$R/bench_block.json" --blocks 2 --skip-request --block-reps 5 \
      --attention dense fp8 --precision bf16 fp8
  fi
  cp "$R/commands.txt" "$OUT/"
  tar -czf "$OUT/run76c.tgz" -C /tmp run76 -C "$PWD" verified_kernels
fi
