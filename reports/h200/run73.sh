#!/usr/bin/env bash
# H200 run 73 (prepared in the eighteenth session, not yet run): QVEC 2 and EMU 2 on the FP8 CuTe template. Three
# calls to one warm machine:
#   b: probe 73's smoke test (QVEC 2's bytes; launches with EMU 0 and 2), then, if it passed, its timing.
#   c: the judged search of attention_fp8 with the CuTe template (seed 0, the real lock), one candidate: of probe
#      73's q1_emu2, q2_emu0 and q2_emu2 the one with the lowest geometric mean of its time over the probe's buckets
#      (--first: a sweep's config, not the search's); the promoted kernel bd8d60a0d1db is its incumbent.
#   d: if c promoted a kernel: the H3 block with dense and FP8 attention, bf16 and e4m3 linears (runtime/bench_h200.py).
#   here, once: bash reports/h200/device_deps.sh && bash reports/h200/cute_carry.sh
#   call 1, carry [".whl", ".cute/part1"]:                           bash reports/h200/run73.sh a
#   call 2 at once, carry [".cute/part2", ".cute/extra", ".tools"]:  RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run73.sh b
#   calls 3, 4 at once, carry [".tools"]:                            RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run73.sh c|d
STEP=${1:?usage: run73.sh a|b|c|d}
. reports/h200/lib.sh
if [ "$STEP" = a ]; then
  stash_cute_part1 && install_whl .whl && echo "part1 ok"; exit $?
fi
setup_run run73
python3 -c "import cutlass.cute" 2>/dev/null || install_cute || exit 1
export RSI_BWRAP=$PWD/.tools/bwrap COLUMNS=160
[ -d "$R/verified_kernels_after" ] && cp -r "$R/verified_kernels_after/." verified_kernels/
[ -e "$R/rsi.db" ] && mkdir -p .rsi && cp "$R/rsi.db" .rsi/rsi.db
if [ "$STEP" = b ]; then
  if run smoke 240 python3 reports/h200/probe73.py "$R/probe73_smoke.json" --smoke; then
    run timing 240 python3 reports/h200/probe73.py "$R/probe73.json" 10 --timing
  fi
elif [ "$STEP" = c ]; then
  FIRST=$(python3 -c "
import json, math, sys
sys.path.insert(0, 'reports/h200')
from probe73 import CONFIGS, HEUR
t = json.load(open('$R/probe73.json'))['timing']
g = {n: math.exp(sum(math.log(r['p50_us'][n]) for r in t) / len(t)) for n in ('q1_emu2', 'q2_emu0', 'q2_emu2')}
n = min(g, key=g.get)
print(','.join(f'{k}={v}' for k, v in CONFIGS[n].items() if v != HEUR[k]))")
  echo "python3 -m rsi search --op-group attention_fp8 --template attention_fp8_cute --gpu h200 --seed 0 --first $FIRST" \
    "--budget 1,3m" >> "$R/commands.txt"
  run search 560 python3 -m rsi search --op-group attention_fp8 --template attention_fp8_cute --gpu h200 --seed 0 \
    --first "$FIRST" --budget 1,3m --summary-out "$R/search.json"
  cp .rsi/rsi.db "$R/rsi.db"
  cp -r verified_kernels "$R/verified_kernels_after"
elif ! sha256sum -c --quiet "$R/lock.txt" 2>/dev/null; then
  echo "python3 -m runtime.bench_h200 --out $R/bench_block.json --blocks 2 --skip-request --block-reps 5" \
    "--attention dense fp8 --precision bf16 fp8" >> "$R/commands.txt"
  run block 200 python3 -m runtime.bench_h200 --out "$R/bench_block.json" --blocks 2 --skip-request --block-reps 5 \
    --attention dense fp8 --precision bf16 fp8
fi
tar -czf "$OUT/run73.tgz" -C /tmp run73
