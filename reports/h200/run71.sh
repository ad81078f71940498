#!/usr/bin/env bash
# H200 run 71 (eighteenth session): the CuTe FP8 attention template's vectorised quantisers (QVEC 1) and its
# 192-key block. Four calls to one warm machine:
#   b: probe 71's smoke test of the QVEC 1 passes (their bytes against the reference's quantiser; first GPU run),
#      then, if it passed, probe 71's timing (QVEC 0 / 1, BN 128 / 192, 2 / 3 stages, each pass alone, the kernel
#      alone, beside SDPA cuDNN and cuDNN's FP8 attention at three buckets).
#   c: the judged search of attention_fp8 with the CuTe template (seed 0, the real lock), one candidate: of probe
#      71's QVEC 1 schedules (BN 128 / 192, 2 / 3 stages) the one with the lowest geometric mean of its time over the
#      probe's buckets (--first: a sweep's config, not the search's).
#   d: if c promoted a kernel: one H3 block at 1344x768 (38,272 rows) with dense and FP8 attention and bf16 and e4m3
#      linears (runtime/bench_h200.py, --kernels reference and verified); else the second fastest, judged.
#   e: Nsight Compute on the attention kernel (QVEC 1, BN 128 and 192) at h3_stage1, where device time is left.
#   here, once: bash reports/h200/device_deps.sh && bash reports/h200/cute_carry.sh
#   call 1, carry [".whl", ".cute/part1"]:                           bash reports/h200/run71.sh a
#   call 2 at once, carry [".cute/part2", ".cute/extra", ".tools"]:  RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run71.sh b
#   call 3 at once, carry [".tools"]:                                RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run71.sh c
#   call 4 at once, carry [".tools"]:                                RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run71.sh d
#   (call 5, e, likewise)
STEP=${1:?usage: run71.sh a|b|c|d|e}
. reports/h200/lib.sh
if [ "$STEP" = a ]; then
  stash_cute_part1 && install_whl .whl && echo "part1 ok"; exit $?
fi
setup_run run71
python3 -c "import cutlass.cute" 2>/dev/null || install_cute || exit 1
export RSI_BWRAP=$PWD/.tools/bwrap COLUMNS=160
# the working tree comes anew with every call: a promotion of an earlier call is restored from its copy
[ -d "$R/verified_kernels_after" ] && cp -r "$R/verified_kernels_after/." verified_kernels/
[ -e "$R/rsi.db" ] && mkdir -p .rsi && cp "$R/rsi.db" .rsi/rsi.db
choice() {  # $1 = 0: probe 71's fastest QVEC 1 config as --first's K=V list; 1: the second fastest (from call b's
  # probe71.json, or where the machine went cold since, from the copy committed in reports/h200/run71)
  python3 -c "
import json, math, sys
sys.path.insert(0, 'reports/h200')
from probe71 import CHOICES, CONFIGS, HEUR
import os
t = json.load(open('$R/probe71.json' if os.path.exists('$R/probe71.json') else 'reports/h200/run71/probe71.json'))['timing']
g = {n: math.exp(sum(math.log(r['p50_us'][n]) for r in t) / len(t)) for n in CHOICES}
n = sorted(g, key=g.get)[$1]
print(','.join(f'{k}={v}' for k, v in CONFIGS[n].items() if v != HEUR[k]))"
}
search() {  # $1 = the config
  echo "python3 -m rsi search --op-group attention_fp8 --template attention_fp8_cute --gpu h200 --seed 0" \
    "--first $1 --budget 1,3m" >> "$R/commands.txt"
  run "search_$STEP" 560 python3 -m rsi search --op-group attention_fp8 --template attention_fp8_cute --gpu h200 \
    --seed 0 --first "$1" --budget 1,3m --summary-out "$R/search_$STEP.json"
  cp .rsi/rsi.db "$R/rsi.db"
  cp -r verified_kernels "$R/verified_kernels_after"
}
if [ "$STEP" = b ]; then
  run smoke 220 python3 reports/h200/probe71.py "$R/probe71_smoke.json" --smoke
  if python3 -c "import json,sys; sys.exit(0 if all(r['ok'] for r in json.load(open('$R/probe71_smoke.json'))['rows']) else 1)"; then
    run timing 240 python3 reports/h200/probe71.py "$R/probe71.json" 10 --timing
  else
    echo "smoke test failed: no timing"
  fi
elif [ "$STEP" = c ]; then
  search "$(choice 0)"
elif [ "$STEP" = e ]; then
  NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  run ncu 150 "$NCU" --clock-control none --target-processes all -k regex:attention_kernel --launch-count 2 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
    --section Occupancy --section LaunchStats \
    --metrics sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active \
    python3 reports/h200/probe71.py "$R/ncu_unused.json" --ncu
else
  if ! sha256sum -c --quiet "$R/lock.txt" 2>/dev/null; then
    echo "python3 -m runtime.bench_h200 --out $R/bench_block.json --blocks 2 --skip-request --block-reps 5" \
      "--attention dense fp8 --precision bf16 fp8" >> "$R/commands.txt"
    run block 200 python3 -m runtime.bench_h200 --out "$R/bench_block.json" --blocks 2 --skip-request --block-reps 5 \
      --attention dense fp8 --precision bf16 fp8
  else
    search "$(choice 1)"
  fi
fi
tar -czf "$OUT/run71.tgz" -C /tmp run71
