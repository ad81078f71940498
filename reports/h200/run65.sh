#!/usr/bin/env bash
# H200 run 65 (prepared in the fifteenth session, not yet run): the first GPU run of the CuTe attention template
# (rsi/templates/attention_cute.py). A smoke test (two small shapes under a 90 s cap: a hang shows as a kill), then
# probe 65 (the errors of its four schedules per shape and layout, then the four timed beside the Triton template
# and SDPA cuDNN), then `rsi search --op-group attention --template attention_cute --budget 2` under
# the sandboxed judge on a scratch copy of the lock. Three calls to one warm machine (docs/cute.md, "On the H200";
# the sixteenth session split the search into call 3 to keep each call well inside 600 s, and added the diagnosis
# that runs instead of the probe when the smoke test fails):
#   here, once: bash reports/h200/device_deps.sh && bash reports/h200/cute_carry.sh
#   call 1, carry [".whl", ".cute/part1"]:                           bash reports/h200/run65.sh a
#   call 2 at once, carry [".cute/part2", ".cute/extra", ".tools"]:  RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run65.sh b
#   call 3 at once, carry [".tools"]:                                RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run65.sh c
STEP=${1:?usage: run65.sh a|b|c}
. reports/h200/lib.sh
if [ "$STEP" = a ]; then
  stash_cute_part1 && install_whl .whl && echo "part1 ok"; exit $?
fi
export RSI_BWRAP=$PWD/.tools/bwrap COLUMNS=160
if [ "$STEP" = c ]; then   # /tmp/site (wheels and CuTe) is still there from calls 1 and 2
  setup_run run65c
  W=/tmp/ws65; rm -rf "$W"; mkdir -p "$W"; cp -r verified_kernels "$W/"
  run search 270 python3 -m rsi --root "$W" search --op-group attention --template attention_cute --gpu h200 \
    --budget 2,4m --candidate-timeout 200 --summary-out "$R/search_attention_cute.json"
  python3 -m rsi --root "$W" show --run "$(python3 -c "import json; print(json.load(open('$R/search_attention_cute.json'))['run_id'])")" \
    --limit 20 > "$R/show.txt" 2>&1
  cp "$W/.rsi/rsi.db" "$R/rsi.db" 2>/dev/null; cp -r "$W/verified_kernels" "$R/verified_kernels_scratch"
  tar -czf "$OUT/run65c.tgz" -C /tmp run65c; exit 0
fi
setup_run run65
install_cute || exit 1
run smoke 90 python3 reports/h200/probe65.py "$R/smoke.json" 1 --smoke
ok=$(python3 -c "import json; r = json.load(open('$R/smoke.json'))['smoke']; print(len(r) == 2 and all(
  x['nonfinite_where_ref_finite'] == 0 and x['rel_l2'] < 1e-2 for x in r))" 2>/dev/null)
if [ "$ok" != True ]; then   # wrong, failed or hung: the rest would only repeat it
  echo "smoke failed: the diagnosis instead of the probe, and no search (call 3)"
  run diagnose 200 python3 reports/h200/probe65.py "$R/diagnose.json" 1 --diagnose
  tar -czf "$OUT/run65.tgz" -C /tmp run65; exit 1
fi
run probe65 220 python3 reports/h200/probe65.py "$R/probe65.json" 10
tar -czf "$OUT/run65.tgz" -C /tmp run65
