#!/usr/bin/env bash
# Device run 77 (twenty-second session): probe 77 (the eight-piece producers' RELOAD 2 beside the locked configs and
# the bf16 ops, outside the judge), then for each of modulate_fp8 and gate_residual_modulate_fp8 the judged search of
# probe 77's fastest bitwise variant (geometric mean over the buckets; --first: a sweep's config, not the search's;
# --reps 20 as runs 74 b and 75) unless it is a RELOAD 1 config (those were judged in run 73), for this machine's
# target (modulate_fp8 has no huge shape: its judge fits an H100).
# One call (an H200 for the issue's numbers; an H100 runs it too, for the h100 target):
#   carry [".whl", ".tools"]:  RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run77.sh
. reports/h200/lib.sh
setup_run run77
install_whl .whl || exit 1
export RSI_BWRAP=$PWD/.tools/bwrap COLUMNS=160
T=$(python3 -c "from rsi.targets import detect_local; t = detect_local(); print(t.name if t else 'none')")
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$R/gpu.txt"
echo "target $T: $(tail -1 "$R/gpu.txt")"
echo "python3 reports/h200/probe77.py $R/probe77.json 15" >> "$R/commands.txt"
run probe77 240 python3 reports/h200/probe77.py "$R/probe77.json" 15
cp "$R/probe77.json" "$R/probe77.log" "$R/commands.txt" "$OUT/" 2>/dev/null
for OP in modulate_fp8 gate_residual_modulate_fp8; do
  read -r NAME FIRST < <(python3 -c "
import json, math
res = json.load(open('$R/probe77.json'))
rows = [r for r in res['rows'] if r['op'] == '$OP']
v = res['variants']['$OP']
names = [n for n in v if rows and all(r['bitwise'].get(n) is True for r in rows)]
g = {n: math.exp(sum(math.log(r['p50_us'][n]) for r in rows) / len(rows)) for n in names}
n = min(g, key=g.get) if g else ''
print(n, ','.join(f'{k}={x}' for k, x in v[n].items()) if n else '')")
  echo "$OP fastest: $NAME"
  case "$NAME" in ""|*reload1) continue ;; esac
  echo "python3 -m rsi search --op-group $OP --template ${OP}_warp --first $FIRST --reps 20 --gpu $T --seed 0" \
    "--budget 1,3m" >> "$R/commands.txt"
  run "search_$OP" 240 python3 -m rsi search --op-group "$OP" --template "${OP}_warp" --first "$FIRST" --reps 20 \
    --gpu "$T" --seed 0 --budget 1,3m --summary-out "$R/search_$OP.json"
done
python3 reports/h200/verdicts_from_db.py .rsi/rsi.db "$R/verdicts.json" 2>/dev/null
cp "$R/commands.txt" "$OUT/"
tar -czf "$OUT/run77.tgz" -C /tmp run77 -C "$PWD" verified_kernels
