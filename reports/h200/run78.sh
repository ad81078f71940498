#!/usr/bin/env bash
# Device run 78 (twenty-second session): probe 77 (the eight-piece producers' RELOAD 2 and NFULL) and probe 78
# (modulate_fp8_warp's RELOAD 3: each piece's loads issued while the piece before it is made) on this machine,
# outside the judge; then, with JUDGE=1, for each of modulate_fp8 and gate_residual_modulate_fp8 the judged search of
# the fastest bitwise variant of the probes (geometric mean over the buckets; --first: a sweep's config, not the
# search's; --reps 20 as runs 74 b and 75).
#   carry [".whl", ".tools"]:  RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 [JUDGE=1] bash reports/h200/run78.sh
. reports/h200/lib.sh
setup_run run78
install_whl .whl || exit 1
export RSI_BWRAP=$PWD/.tools/bwrap COLUMNS=160
detect_target
for P in 77 78; do
  echo "python3 reports/h200/probe$P.py probe$P.json 15" >> "$R/commands.txt"
  run "probe$P" 150 python3 "reports/h200/probe$P.py" "$R/probe$P.json" 15
done
cp "$R"/probe7*.json "$R/commands.txt" "$R/gpu.txt" "$OUT/" 2>/dev/null
for OP in modulate_fp8 gate_residual_modulate_fp8; do
  [ "${JUDGE:-0}" = 1 ] || break
  read -r NAME FIRST < <(python3 -c "
import json, math
best = {}
for p in ('$R/probe77.json', '$R/probe78.json'):
    res = json.load(open(p))
    rows = [r for r in res['rows'] if r['op'] == '$OP']
    for n, cfg in res['variants'].get('$OP', {}).items():
        if rows and all(r['bitwise'].get(n) is True for r in rows):
            best[n] = (math.exp(sum(math.log(r['p50_us'][n]) for r in rows) / len(rows)), cfg)
n = min(best, key=lambda k: best[k][0]) if best else ''
print(n, ','.join(f'{k}={x}' for k, x in best[n][1].items()) if n else '')")
  echo "$OP fastest: $NAME"
  [ -n "$FIRST" ] || continue
  judge_first "$OP" "${OP}_warp" "$FIRST" 200
done
[ -e .rsi/rsi.db ] && python3 reports/h200/verdicts_from_db.py .rsi/rsi.db "$R/verdicts.json" 2>/dev/null
cp "$R/commands.txt" "$OUT/"
tar -czf "$OUT/run78.tgz" -C /tmp run78 -C "$PWD" verified_kernels
