#!/usr/bin/env bash
# Device run 88 (thirty-first session): the CuTe DSL modulate_fp8 producer (a row a CTA) against the Triton
# template's heuristic and the bf16 modulate kernel (reports/h200/probe88.py, outside the judge).
#   here, once: bash reports/h200/device_deps.sh && bash reports/h200/cute_carry.sh
#   call 1, carry [".whl", ".cute/part1"]:                            bash reports/h200/run88.sh a
#   call 2 at once, carry [".cute/part2", ".cute/extra", ".tools"]:   RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run88.sh p
#      p: probe 88's smoke test (bitwise at the odd shapes and stage1, every layout and special case), then, if
#         every config passed, its timing (REPS, default 10)
STEP=${1:?usage: run88.sh a|p}
. reports/h200/lib.sh
if [ "$STEP" = a ]; then
  stash_cute_part1 && install_whl .whl && echo "part1 ok"; exit $?
fi
setup_run run88
python3 -c "import cutlass.cute" 2>/dev/null || install_cute || exit 1
export COLUMNS=160
detect_target
cp "$R/commit.txt" "$R/lock.txt" "$R/gpu.txt" "$OUT/"
echo "python3 reports/h200/probe88.py probe88_smoke.json --smoke" >> "$R/commands.txt"
run smoke 200 python3 reports/h200/probe88.py "$R/probe88_smoke.json" --smoke
cp "$R/probe88_smoke.json" "$R/smoke.log" "$R/commands.txt" "$OUT/" 2>/dev/null
echo "python3 reports/h200/probe88.py probe88.json ${REPS:-10}" >> "$R/commands.txt"
run timing 300 python3 reports/h200/probe88.py "$R/probe88.json" "${REPS:-10}"
cp "$R/probe88.json" "$R/timing.log" "$R/commands.txt" "$OUT/" 2>/dev/null
