#!/usr/bin/env bash
# Device run 73 (nineteenth session; run 73's FP8 attention steps were prepared in the eighteenth): the FP8 attention
# template's QVEC 2 and EMU 2, and the fused FP8 producers' new realizations (swiglu_fp8 TABLE, the eight-piece
# modulate_fp8 / gate_residual_modulate_fp8 templates). The lent machine may be an H100 or an H200 (sm_90 both): the
# judge's target is the local GPU's (rsi.targets.detect_local), and every record says which. Calls to one warm machine:
#   a: stash the CuTe carry's part 1; the GPU tests of the fp8 producers (tests/unit/test_fp8_gpu.py: every bf16 gate
#      through both TABLEs, the templates at a production shape and every special case); probe 73 producers (timing
#      against the bf16 ops, outside the judge).
#   b: probe 73's smoke test of the FP8 attention template (QVEC 2's bytes; EMU 0 and 2), then, if it passed, its
#      timing, then step c in the same call (the machine's starts were scarce this session).
#   c: the judged search of attention_fp8 with the CuTe template (seed 0, the real lock): of probe 73's q1_emu2,
#      q2_emu0 and q2_emu2 the one with the lowest geometric mean of its time over the probe's buckets (--first: a
#      sweep's config, not the search's).
#   d OP [OP...]: the judged search of each producer op group with the template and config probe 73 producers timed
#      fastest among the bitwise variants (geometric mean over its buckets; --first, a sweep's config; --reps 10,
#      as run 33's producer searches).
#   p OP [OP...] (a fresh machine, carry [".whl", ".tools"]): probe 73 producers' second sweep (--second: RELOAD, STREAM
#      0), then step d on its results for each OP; PROD=probe73_producers2.json bash run73.sh d OP: the same later.
#   e: if c promoted a kernel: the H3 block with dense and FP8 attention, bf16 and e4m3 linears (runtime/bench_h200.py).
#   here, once: bash reports/h200/device_deps.sh && bash reports/h200/cute_carry.sh
#   call 1, carry [".whl", ".cute/part1"]:                        RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run73.sh a
#   call 2 at once, carry [".cute/part2", ".cute/extra", ".tools"]: RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run73.sh b
#   later calls at once, carry [".tools"]:                        RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run73.sh c|d OP..|e
STEP=${1:?usage: run73.sh a|b|c|d OP..|p OP..|e}
shift
. reports/h200/lib.sh
setup_run run73
if [ "$STEP" = a ]; then
  stash_cute_part1 && install_whl .whl && echo "part1 ok" || exit 1
elif [ "$STEP" = p ] || [ "$STEP" = d ]; then   # the producers need no CuTe
  python3 -c "import optuna" 2>/dev/null || install_whl .whl || exit 1
else
  python3 -c "import cutlass.cute" 2>/dev/null || install_cute || exit 1
fi
export RSI_BWRAP=$PWD/.tools/bwrap COLUMNS=160
PROD=$R/${PROD:-probe73_producers.json}   # step d: which sweep's results pick the configs
for f in probe73.json probe73_producers.json probe73_producers2.json; do   # a cold machine: the copy committed from an earlier call
  [ -e "$R/$f" ] || [ ! -e "reports/h200/run73/$f" ] || cp "reports/h200/run73/$f" "$R/$f"
done
[ -d "$R/verified_kernels_after" ] && cp -r "$R/verified_kernels_after/." verified_kernels/
[ -e "$R/rsi.db" ] && mkdir -p .rsi && cp "$R/rsi.db" .rsi/rsi.db
T=$(python3 -c "from rsi.targets import detect_local; t = detect_local(); print(t.name if t else 'none')")
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$R/gpu_$STEP.txt"
echo "target $T: $(tail -1 "$R/gpu_$STEP.txt")"
judge() {  # name, cap, rsi search arguments...
  local name=$1 cap=$2; shift 2
  echo "python3 -m rsi search $* --gpu $T --seed 0 --budget 1,3m" >> "$R/commands.txt"
  run "$name" "$cap" python3 -m rsi search "$@" --gpu "$T" --seed 0 --budget 1,3m --summary-out "$R/$name.json"
  cp .rsi/rsi.db "$R/rsi.db"
  rm -rf "$R/verified_kernels_after" && cp -r verified_kernels "$R/verified_kernels_after"
}
if [ "$STEP" = a ]; then
  echo "python3 -m pytest tests/unit/test_fp8_gpu.py -k 'producer or swiglu' -v -p no:xdist -p no:cacheprovider" \
    "-o addopts=''" >> "$R/commands.txt"
  run gputests 150 python3 -m pytest tests/unit/test_fp8_gpu.py -k "producer or swiglu" -v -p no:xdist \
    -p no:cacheprovider -o addopts=""
  echo "python3 reports/h200/probe73_producers.py $R/probe73_producers.json 15" >> "$R/commands.txt"
  run producers 240 python3 reports/h200/probe73_producers.py "$R/probe73_producers.json" 15
fi
if [ "$STEP" = p ]; then
  PROD=$R/probe73_producers2.json
  echo "python3 reports/h200/probe73_producers.py $PROD 15 --second" >> "$R/commands.txt"
  run producers2 90 python3 reports/h200/probe73_producers.py "$PROD" 15 --second && STEP=d
fi
if [ "$STEP" = b ]; then
  run smoke 150 python3 reports/h200/probe73.py "$R/probe73_smoke.json" --smoke &&
    run timing 180 python3 reports/h200/probe73.py "$R/probe73.json" 10 --timing && STEP=c
fi
if [ "$STEP" = c ]; then
  FIRST=$(python3 -c "
import json, math, sys
sys.path.insert(0, 'reports/h200')
from probe73 import CONFIGS, HEUR
t = json.load(open('$R/probe73.json'))['timing']
g = {n: math.exp(sum(math.log(r['p50_us'][n]) for r in t) / len(t)) for n in ('q1_emu2', 'q2_emu0', 'q2_emu2')}
n = min(g, key=g.get)
print(','.join(f'{k}={v}' for k, v in CONFIGS[n].items() if v != HEUR[k]))")
  judge search 250 --op-group attention_fp8 --template attention_fp8_cute --first "$FIRST"
elif [ "$STEP" = d ]; then
  for OP in "$@"; do
    read -r TPL FIRST < <(python3 -c "
import json, math
res = json.load(open('$PROD'))
rows = [r for r in res['rows'] if r['op'] == '$OP']
names = [n for n in res['variants']['$OP'] if all(r['bitwise'].get(n) is True for r in rows)]
g = {n: math.exp(sum(math.log(r['p50_us'][n]) for r in rows) / len(rows)) for n in names}
n = min(g, key=g.get)
tpl = '$OP' + ('_warp' if n.startswith('warp') else '')
assert g[n] > 0, g
print(tpl, ','.join(f'{k}={v}' for k, v in res['variants']['$OP'][n].items()))")
    judge "search_$OP" 170 --op-group "$OP" --template "$TPL" --first "$FIRST" --reps 10
  done
elif [ "$STEP" = e ] && ! sha256sum -c --quiet "$R/lock.txt" 2>/dev/null; then
  echo "python3 -m runtime.bench_h200 --out $R/bench_block.json --blocks 2 --skip-request --block-reps 5" \
    "--attention dense fp8 --precision bf16 fp8" >> "$R/commands.txt"
  run block 200 python3 -m runtime.bench_h200 --out "$R/bench_block.json" --blocks 2 --skip-request --block-reps 5 \
    --attention dense fp8 --precision bf16 fp8
fi
tar -czf "$OUT/run73.tgz" -C /tmp run73
