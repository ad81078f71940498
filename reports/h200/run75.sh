#!/usr/bin/env bash
# Device run 75 (twentieth session): probe 75 (swiglu_fp8 FLAT with PART and MAXNREG beside run 74 b's h200 kernel,
# outside the judge), then the judged search of swiglu_fp8 with probe 75's fastest bitwise variant (geometric mean
# over the buckets; --first: a sweep's config; --reps 20 as run 74 b) unless that is the locked kernel's config;
# then gate_residual_modulate_fp8_warp's judge again (below).
# One call on an H200 (the judge's huge shape does not fit an H100's 80 GB):
#   carry [".whl", ".tools"], needs_h200:  RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run75.sh
. reports/h200/lib.sh
setup_run run75
install_whl .whl || exit 1
export RSI_BWRAP=$PWD/.tools/bwrap COLUMNS=160
T=$(python3 -c "from rsi.targets import detect_local; t = detect_local(); print(t.name if t else 'none')")
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$R/gpu.txt"
echo "target $T: $(tail -1 "$R/gpu.txt")"
echo "python3 reports/h200/probe75.py $R/probe75.json 30" >> "$R/commands.txt"
run probe75 240 python3 reports/h200/probe75.py "$R/probe75.json" 30
read -r NAME FIRST < <(python3 -c "
import json, math
res = json.load(open('$R/probe75.json'))
rows = res['rows']
names = [n for n in res['variants'] if res['every_gate'].get(n) is True and all(r['bitwise'].get(n) is True for r in rows)]
g = {n: math.exp(sum(math.log(r['p50_us'][n]) for r in rows) / len(rows)) for n in names}
n = min(g, key=g.get)
print(n, ','.join(f'{k}={v}' for k, v in res['variants'][n].items()))")
echo "fastest: $NAME"
if [ -n "$FIRST" ] && [ "$NAME" != w32_p132 ] && [ "$T" != h100 ]; then
  echo "python3 -m rsi search --op-group swiglu_fp8 --template swiglu_fp8 --first $FIRST --reps 20 --gpu $T --seed 0" \
    "--budget 1,3m" >> "$R/commands.txt"
  run search 300 python3 -m rsi search --op-group swiglu_fp8 --template swiglu_fp8 --first "$FIRST" --reps 20 \
    --gpu "$T" --seed 0 --budget 1,3m --summary-out "$R/search.json"
  [ -e .rsi/rsi.db ] && cp .rsi/rsi.db "$R/rsi.db"
  rm -rf "$R/verified_kernels_after" && cp -r verified_kernels "$R/verified_kernels_after"
fi
# gate_residual_modulate_fp8_warp again on an H200 (run 73 p accepted it at 1.29-1.47x the locked kernel and kept
# the locked one: stage1's A/A band 0.453 at --reps 10): probe 73's fastest on the H200, at --reps 20
if [ "$T" != h100 ]; then
  GRM=num_warps=1,STREAM=1,QUOT=1,RELOAD=1
  echo "python3 -m rsi search --op-group gate_residual_modulate_fp8 --template gate_residual_modulate_fp8_warp" \
    "--first $GRM --reps 20 --gpu $T --seed 0 --budget 1,3m" >> "$R/commands.txt"
  run search_grm 200 python3 -m rsi search --op-group gate_residual_modulate_fp8 \
    --template gate_residual_modulate_fp8_warp --first "$GRM" --reps 20 --gpu "$T" --seed 0 --budget 1,3m \
    --summary-out "$R/search_grm.json"
  [ -e .rsi/rsi.db ] && cp .rsi/rsi.db "$R/rsi.db"
  rm -rf "$R/verified_kernels_after" && cp -r verified_kernels "$R/verified_kernels_after"
fi
tar -czf "$OUT/run75.tgz" -C /tmp run75
