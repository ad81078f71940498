#!/usr/bin/env bash
# H200 nightly runs for issue 14 (exact commands): two `rsi nightly` on the current lock, the second
# against the first as its baseline, then one with a deliberately slowed kernel (tests/fixtures/nightly_slow:
# modulate's locked kernel launched twice per call, in rsi bench and the runtime; outside the lock) against the
# first, which must be flagged and exit 1.
#
#   RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/nightly_run.sh first|second|slowed
#
# One step per device call (a call lasts at most 10 minutes). A step cut by the call's time exits 124: run the same
# step again and the nightly resumes (phases already done are not run again; a phase is capped at 540 s). The
# nightly folders (.rsi/nightly/h200-*) and the store (.rsi/rsi.db) are ignored paths, kept on the device while it
# stays warm; after a cold start restore them here from the last call's $OUT/nightly (store/rsi.db ->
# .rsi/rsi.db, <step>/ -> .rsi/nightly/h200-<step>) and pass them with the run tool's carry.
# Op groups: OPS (default modulate,qk_norm_rope,swiglu: three of the H3 block's op groups).
# Every locked op group (--ops all) was estimated at 12-15 min a night from earlier runs' verify and bench times
# (about 25 s and 30 s per op group), which two nights would not fit in a session's 30 device minutes; the
# pipeline phases (two-stage full route with a warm-up and 9 requests, single-stage with 8 steps) run in full.
# slowed: modulate's bench and the single-stage route only.
# Needs .whl/, .whl-report/ (matplotlib, pandas and their wheels) and .tools/ from reports/h200/device_deps.sh: carry
# [".whl", ".whl-report", ".tools"] (48 MB); the pipeline phases run --no-mux (PyAV would not fit the same call).
set -o pipefail
STEP=${1:?usage: nightly_run.sh first|second|slowed}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  .whl-report/*.whl || exit 1
export PYTHONUNBUFFERED=1 RSI_BWRAP=$PWD/.tools/bwrap PYTHONPATH=/tmp/site:$PWD TRITON_CACHE_DIR=/tmp/triton_cache
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/nightly/store"
N=.rsi/nightly/h200
OPS=${OPS:-modulate,qk_norm_rope,swiglu}
COMMON=(--gpu h200 --ops "$OPS" --reps 20 --repeat 9 --steps 8 --phase-timeout 540 --no-mux)   # PyAV (39 MB) does not fit the carry
case $STEP in
  first)  ARGS=(--out "$N-first" --baseline none) ;;
  second) ARGS=(--out "$N-second" --baseline "$N-first") ;;
  slowed) export PYTHONPATH=$PWD/tests/fixtures/nightly_slow:$PYTHONPATH RSI_TEST_SLOW_OP=modulate:x2
          ARGS=(--out "$N-slowed" --baseline "$N-first" --ops modulate --phases bench,pipeline --routes single-stage) ;;
  *) echo "unknown step $STEP (first, second, slowed)"; exit 2 ;;
esac
timeout -s INT 560 python3 -m rsi nightly "${COMMON[@]}" "${ARGS[@]}" > "$OUT/nightly/$STEP.log" 2>&1
rc=$?
echo "nightly $STEP exit $rc (0 no regression, 1 regression, 124 cut by the call's time: run the step again)"
tail -45 "$OUT/nightly/$STEP.log"
# bring back the folder without the MP4s and the store (checkpointed, so that the copy holds every write)
mkdir -p "$OUT/nightly/$STEP"
tar -C "$N-$STEP" --exclude='*.mp4' -cf - . | tar -C "$OUT/nightly/$STEP" -xf -
python3 -c "import sqlite3; sqlite3.connect('.rsi/rsi.db').execute('PRAGMA wal_checkpoint(TRUNCATE)')" \
  && cp .rsi/rsi.db "$OUT/nightly/store/rsi.db"
du -sh "$OUT/nightly/$STEP"
