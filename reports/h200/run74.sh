#!/usr/bin/env bash
# Device run 74 (twentieth session): swiglu_fp8's FLAT realizations (rsi/templates/swiglu_fp8.py: the row as 1-D
# pieces, the table gather in the layout of the loads and stores, the next row loaded early; TABLE 3's corrected fp32
# silu). One call on an H200 (swiglu_fp8's judge needs more than an H100's 80 GB at its huge shape, run 73):
#   the GPU tests of swiglu_fp8 (tests/unit/test_fp8_gpu.py -k swiglu: every bf16 gate and pattern through each
#   TABLE and FLAT); probe 74 (timing against the bf16 swiglu kernel, outside the judge); the judged search of
#   swiglu_fp8 with probe 74's fastest bitwise variant (geometric mean over the buckets; --first: a sweep's config,
#   not the search's proposal; --reps 10 as runs 33 and 73).
#   here, once: bash reports/h200/device_deps.sh
#   call, carry [".whl", ".tools"], needs_h200:  RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run74.sh
#   (on an H100, the tests and the probe only). Run 74 a (H100) ran it at ab0551a with 15 repetitions and the first
#   ten variants (reports/h200/run74/); run 74 b (H200) at the commit in reports/h200/run74_h200/commit.txt.
#   b (H200, at once after the call above): the judge again with --reps 20, the config of run 74's H200 probe
#   (committed in reports/h200/run74_h200/probe74.json), since at --reps 10 stage1's A/A band (0.224) kept it.
. reports/h200/lib.sh
setup_run run74
install_whl .whl || exit 1
if [ "${1:-}" = b ]; then
  export RSI_BWRAP=$PWD/.tools/bwrap COLUMNS=160
  FIRST=$(python3 -c "
import json, math
res = json.load(open('reports/h200/run74_h200/probe74.json'))
rows = res['rows']
names = [n for n in res['variants'] if res['every_gate'].get(n) is True and all(r['bitwise'].get(n) is True for r in rows)]
g = {n: math.exp(sum(math.log(r['p50_us'][n]) for r in rows) / len(rows)) for n in names}
print(','.join(f'{k}={v}' for k, v in res['variants'][min(g, key=g.get)].items()))")
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$R/gpu.txt"
  echo "python3 -m rsi search --op-group swiglu_fp8 --template swiglu_fp8 --first $FIRST --reps 20 --gpu h200" \
    "--seed 0 --budget 1,3m" >> "$R/commands.txt"
  run search 300 python3 -m rsi search --op-group swiglu_fp8 --template swiglu_fp8 --first "$FIRST" --reps 20 \
    --gpu h200 --seed 0 --budget 1,3m --summary-out "$R/search.json"
  [ -e .rsi/rsi.db ] && cp .rsi/rsi.db "$R/rsi.db"
  cp -r verified_kernels "$R/verified_kernels_after"
  tar -czf "$OUT/run74.tgz" -C /tmp run74
  exit 0
fi
export RSI_BWRAP=$PWD/.tools/bwrap COLUMNS=160
T=$(python3 -c "from rsi.targets import detect_local; t = detect_local(); print(t.name if t else 'none')")
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$R/gpu.txt"
echo "target $T: $(tail -1 "$R/gpu.txt")"
echo "python3 -m pytest tests/unit/test_fp8_gpu.py -k swiglu -v -p no:xdist -p no:cacheprovider -o addopts=''" \
  >> "$R/commands.txt"
run gputests 150 python3 -m pytest tests/unit/test_fp8_gpu.py -k swiglu -v -p no:xdist -p no:cacheprovider \
  -o addopts=""
echo "python3 reports/h200/probe74.py $R/probe74.json 30" >> "$R/commands.txt"
run probe74 200 python3 reports/h200/probe74.py "$R/probe74.json" 30
FIRST=$(python3 -c "
import json, math
res = json.load(open('$R/probe74.json'))
rows = res['rows']
names = [n for n in res['variants'] if res['every_gate'].get(n) is True and all(r['bitwise'].get(n) is True for r in rows)]
g = {n: math.exp(sum(math.log(r['p50_us'][n]) for r in rows) / len(rows)) for n in names}
n = min(g, key=g.get)
print(','.join(f'{k}={v}' for k, v in res['variants'][n].items()))")
echo "python3 -m rsi search --op-group swiglu_fp8 --template swiglu_fp8 --first $FIRST --reps 10 --gpu $T --seed 0" \
  "--budget 1,3m" >> "$R/commands.txt"
# an H100 runs the tests and the probe only: swiglu_fp8's judge ran out of its 80 GB at the huge shape (run 73)
[ -n "$FIRST" ] && [ "$T" != h100 ] && run search 200 python3 -m rsi search --op-group swiglu_fp8 --template swiglu_fp8 --first "$FIRST" \
  --reps 10 --gpu "$T" --seed 0 --budget 1,3m --summary-out "$R/search.json"
[ -e .rsi/rsi.db ] && cp .rsi/rsi.db "$R/rsi.db"
cp -r verified_kernels "$R/verified_kernels_after"
tar -czf "$OUT/run74.tgz" -C /tmp run74
