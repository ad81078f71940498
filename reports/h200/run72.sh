#!/usr/bin/env bash
# H200 run 72 (eighteenth session, the session's last device minutes): probe 72, the FP8 CuTe template's EMU axis
# (exponentials on the FMA / ALU pipes) at the promoted schedule, correctness then timing, outside the judge. Its JSON
# and log are written straight into $OUT, so a call the lease ends early still brings back what was done.
#   here, once: bash reports/h200/device_deps.sh && bash reports/h200/cute_carry.sh
#   call 1, carry [".whl", ".cute/part1"]:                           bash reports/h200/run72.sh a
#   call 2 at once, carry [".cute/part2", ".cute/extra", ".tools"]:  RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run72.sh b
STEP=${1:?usage: run72.sh a|b}
. reports/h200/lib.sh
if [ "$STEP" = a ]; then
  stash_cute_part1 && install_whl .whl && echo "part1 ok"; exit $?
fi
setup_run run72
python3 -c "import cutlass.cute" 2>/dev/null || install_cute || exit 1
cp "$R/commit.txt" "$R/lock.txt" "$OUT/"
python3 reports/h200/probe72.py "$OUT/probe72.json" 8 2>&1 | grep -v "Warning\|warnings.warn" | tee "$OUT/probe72.log" | tail -20
