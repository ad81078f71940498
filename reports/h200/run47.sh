#!/usr/bin/env bash
# H200 run 47 (tenth session): the CuTe DSL FP8 GEMM judged (issue 12): `rsi search --op-group fp8_gemm --budget 2`
# (the template's heuristic and one proposal, each through the sandboxed judge against torch._scaled_mm) on a
# scratch copy of the lock, and the store's verdicts. Two calls to one warm machine:
#   call 1, carry [".whl", ".cute/part1"]:                           bash reports/h200/run47.sh a
#   call 2 at once, carry [".cute/part2", ".cute/extra", ".tools"]:  RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run47.sh b
# Run 47b (after the judge's fault at one_row): the same two calls with `b2` instead of `b`: reports/h200/probe47.py.
STEP=${1:?usage: run47.sh a|b|b2}
. reports/h200/lib.sh
if [ "$STEP" = a ]; then
  stash_cute_part1 && install_whl .whl && echo "part1 ok"; exit $?
fi
setup_run run47$([ "$STEP" = b2 ] && echo b)
install_cute || exit 1
if [ "$STEP" = b2 ]; then
  run probe 300 python3 reports/h200/probe47.py "$R/probe47.json"; tar -czf "$OUT/run47b.tgz" -C /tmp run47b; exit 0
fi
export RSI_BWRAP=$PWD/.tools/bwrap COLUMNS=160
python3 -c "import cutlass.cute, rsi.kernel as K; print('cute', K.cutlass_dsl_version(), repr(K.cute_unavailable('cuda')))" || exit 1
W=/tmp/ws47; rm -rf "$W"; mkdir -p "$W"; cp -r verified_kernels "$W/"
run search 480 python3 -m rsi --root "$W" search --op-group fp8_gemm --gpu h200 --budget 2 \
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
tar -czf "$OUT/run47.tgz" -C /tmp run47
