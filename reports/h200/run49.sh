#!/usr/bin/env bash
# H200 run 49 (tenth session): the CuTe DSL FP8 GEMM with a persistent grid (PERSIST 132, now the heuristic: the
# producer loads the next tile during the epilogue; run 48 judged one CTA a tile at 0.70-0.96x torch._scaled_mm):
# `rsi search --op-group fp8_gemm --budget 3` on a scratch
# copy of the lock, the store's verdicts, and any promotion's record. Two calls to one warm machine:
#   call 1, carry [".whl", ".cute/part1"]:                           bash reports/h200/run49.sh a
#   call 2 at once, carry [".cute/part2", ".cute/extra", ".tools"]:  RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run49.sh b
STEP=${1:?usage: run49.sh a|b}
. reports/h200/lib.sh
if [ "$STEP" = a ]; then
  stash_cute_part1 && install_whl .whl && echo "part1 ok"; exit $?
fi
setup_run run49
install_cute || exit 1
export RSI_BWRAP=$PWD/.tools/bwrap COLUMNS=160
W=/tmp/ws48; rm -rf "$W"; mkdir -p "$W"; cp -r verified_kernels "$W/"
run search 540 python3 -m rsi --root "$W" search --op-group fp8_gemm --gpu h200 --budget 3 \
  --summary-out "$R/search_fp8_gemm.json"
python3 - "$W/.rsi/rsi.db" > "$R/verdicts.txt" 2>&1 <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
for row in c.execute("select r.op, e.run_id, e.candidate, e.status, e.stage, e.reason, e.objective "
                     "from rsi_evaluations e join rsi_runs r on r.id = e.run_id order by e.id"):
    print(" | ".join(str(x) for x in row))
PY
cut -c1-600 "$R/verdicts.txt"
cp "$W/.rsi/rsi.db" "$R/rsi.db" 2>/dev/null; cp -r "$W/verified_kernels" "$R/verified_kernels_scratch"
tar -czf "$OUT/run49.tgz" -C /tmp run49
