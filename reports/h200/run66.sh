#!/usr/bin/env bash
# H200 run 66 (sixteenth session): the judged search of the CuTe attention template, after run 65c's two candidates
# were refused for copying inputs with K.empty (now K.scratch, the judge's workspace). On the real lock (promotions
# come back in verified_kernels), proposer seed 0 (the default; not chosen by what it proposes), at most 6
# candidates and no new one after 7 minutes. Two calls to one warm machine (docs/cute.md, "On the H200"):
#   here, once: bash reports/h200/device_deps.sh && bash reports/h200/cute_carry.sh
#   call 1, carry [".whl", ".cute/part1"]:                           bash reports/h200/run66.sh a
#   call 2 at once, carry [".cute/part2", ".cute/extra", ".tools"]:  RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run66.sh b
STEP=${1:?usage: run66.sh a|b}
. reports/h200/lib.sh
if [ "$STEP" = a ]; then
  stash_cute_part1 && install_whl .whl && echo "part1 ok"; exit $?
fi
setup_run run66
install_cute || exit 1
export RSI_BWRAP=$PWD/.tools/bwrap COLUMNS=160
run search 575 python3 -m rsi search --op-group attention --template attention_cute --gpu h200 --seed 0 \
  --budget 6,7m --candidate-timeout 240 --summary-out "$R/search_attention_cute.json"
python3 -m rsi show --run "$(python3 -c "import json; print(json.load(open('$R/search_attention_cute.json'))['run_id'])")" \
  --limit 20 > "$R/show.txt" 2>&1
cp .rsi/rsi.db "$R/rsi.db"
tar -czf "$OUT/run66.tgz" -C /tmp run66 -C "$PWD" verified_kernels
