#!/usr/bin/env bash
# Device run 88 (thirty-first session): the CuTe DSL modulate_fp8 producer (a row a CTA) against the Triton
# template's heuristic and the bf16 modulate kernel (reports/h200/probe88.py, outside the judge).
#   here, once: bash reports/h200/device_deps.sh && bash reports/h200/cute_carry.sh
#   call 1, carry [".whl", ".cute/part1"]:                            bash reports/h200/run88.sh a
#   call 2 at once, carry [".cute/part2", ".cute/extra", ".tools"]:   RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run88.sh p
#      p: probe 88's smoke test (bitwise at the odd shapes and stage1, every layout and special case), then its
#         timing (REPS, default 10)
#      j: the judged search of modulate_fp8_cute's heuristic (THREADS 128, CHUNKS 8: probe 88's fastest config on the
#         H100, run 88 h; --first, a sweep's config, not the search's; --reps JREPS, default 20) on this card's target
#      pj: both
STEP=${1:?usage: run88.sh a|p|j|pj}
. reports/h200/lib.sh
if [ "$STEP" = a ]; then
  stash_cute_part1 && install_whl .whl && echo "part1 ok"; exit $?
fi
setup_run run88
python3 -c "import cutlass.cute" 2>/dev/null || install_cute || exit 1
export RSI_BWRAP=$PWD/.tools/bwrap COLUMNS=160
detect_target
cp "$R/commit.txt" "$R/lock.txt" "$R/gpu.txt" "$OUT/"
if [ "$STEP" = j ] || [ "$STEP" = pj ]; then
  judge_first modulate_fp8 modulate_fp8_cute THREADS=128,CHUNKS=8 300
  [ -e .rsi/rsi.db ] && python3 reports/h200/verdicts_from_db.py .rsi/rsi.db "$R/verdicts.json" 2>/dev/null
  cp "$R/commands.txt" "$OUT/"
  tar -czf "$OUT/run88j.tgz" -C /tmp run88 -C "$PWD" verified_kernels
  [ "$STEP" = pj ] || exit 0
fi
echo "python3 reports/h200/probe88.py probe88_smoke.json --smoke" >> "$R/commands.txt"
run smoke 200 python3 reports/h200/probe88.py "$R/probe88_smoke.json" --smoke
cp "$R/probe88_smoke.json" "$R/smoke.log" "$R/commands.txt" "$OUT/" 2>/dev/null
echo "python3 reports/h200/probe88.py probe88.json ${REPS:-10}" >> "$R/commands.txt"
run timing 300 python3 reports/h200/probe88.py "$R/probe88.json" "${REPS:-10}"
cp "$R/probe88.json" "$R/timing.log" "$R/commands.txt" "$OUT/" 2>/dev/null
