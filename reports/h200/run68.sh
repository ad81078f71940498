#!/usr/bin/env bash
# H200 run 68 (prepared in the sixteenth session, not yet run): the judged search of the CuTe attention template on
# the real lock, seed 0: first its new heuristic (BN 128, OVERLAP 1, DYNAMIC 0: probe 65's fastest at h3_full; run 67
# could not finish judging it), then the same schedule with DYNAMIC 1 (K.cute_launch_dynamic: 5 compiles a verdict
# instead of 29), so the two verdicts' judging times and speeds stand side by side; at most 3 candidates and none
# started after 6 minutes (run 66: the first verdict took ~290 s, later ones ~190 s). Then, if the lock changed, one
# H3 block at 1344x768 (38,248 rows) with --kernels reference and verified side by side (runtime/bench_h200.py, 2
# blocks built). Two calls to one warm machine:
#   here, once: bash reports/h200/device_deps.sh && bash reports/h200/cute_carry.sh
#   call 1, carry [".whl", ".cute/part1"]:                           bash reports/h200/run68.sh a
#   call 2 at once, carry [".cute/part2", ".cute/extra", ".tools"]:  RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run68.sh b
# (call 2 needs ~590 s: a session with less than ~12 minutes of device time should lower --budget to 1.)
STEP=${1:?usage: run68.sh a|b}
. reports/h200/lib.sh
if [ "$STEP" = a ]; then
  stash_cute_part1 && install_whl .whl && echo "part1 ok"; exit $?
fi
setup_run run68
install_cute || exit 1
export RSI_BWRAP=$PWD/.tools/bwrap COLUMNS=160
run search 490 python3 -m rsi search --op-group attention --template attention_cute --gpu h200 --seed 0 \
  --first DYNAMIC=0 --first DYNAMIC=1 --budget 3,6m --summary-out "$R/search_attention_cute.json"
python3 -m rsi show --run "$(python3 -c "import json; print(json.load(open('$R/search_attention_cute.json'))['run_id'])")" \
  --limit 20 > "$R/show.txt" 2>&1
cp .rsi/rsi.db "$R/rsi.db"
if ! sha256sum -c --quiet "$R/lock.txt" 2>/dev/null; then
  run block 70 python3 -m runtime.bench_h200 --out "$R/bench_block.json" --blocks 2 --skip-request --block-reps 5
fi
tar -czf "$OUT/run68.tgz" -C /tmp run68 -C "$PWD" verified_kernels
