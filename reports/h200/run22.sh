#!/usr/bin/env bash
# H200 run 22 (sixth session; issues 11 and 12), after run 20's rejections were fixed (modulate_fp8 launched with
# enable_fp_fusion=False: Triton had contracted its sum of squares into fmas; attention's "large" case keeps the
# scores: q x 1e4, k x 1e-4, v x 1e4). Searches of attention, attention_fp8, sol_attn, fp8_linear and modulate_fp8
# (logs not --quiet: every verdict's reason), the store's verdicts, and the verified_kernels/ it leaves, also kept in
# .rsi/vk22 (ignored, so it stays on the device for run 23 while the machine is warm).
# Run as `RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run22.sh` with carry [".whl", ".tools"].
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONUNBUFFERED=1 RSI_BWRAP=$PWD/.tools/bwrap PYTHONPATH=/tmp/site:$PWD TRITON_CACHE_DIR=/tmp/triton_cache \
  COLUMNS=160
OUT=${OUT:-/tmp/out}; R=/tmp/run22; mkdir -p "$R" "$OUT"
search() {  # op, time cap (s), budget
  timeout -s INT "$2" python3 -m rsi search --op-group "$1" --gpu h200 --budget "$3" --reps 15 \
    --summary-out "$R/search_$1.json" > "$R/search_$1.log" 2>&1
  echo "$1 exit $?"; grep -v "Warning\|warnings.warn" "$R/search_$1.log" | tail -8
}
search attention 170 10,2.3m
search attention_fp8 120 8,1.6m
search sol_attn 90 6,1.1m
search fp8_linear 110 8,1.4m
search modulate_fp8 40 4,0.4m
python3 - > "$R/verdicts.txt" 2>&1 <<'PY'
import sqlite3
c = sqlite3.connect(".rsi/rsi.db")
for row in c.execute("select r.op, e.run_id, e.candidate, e.status, e.stage, e.reason, e.objective "
                     "from rsi_evaluations e join rsi_runs r on r.id = e.run_id order by e.id"):
    print(" | ".join(str(x) for x in row))
PY
cat "$R/verdicts.txt" | cut -c1-400
python3 -m rsi show > "$R/show.txt" 2>&1
rm -rf .rsi/vk22 && cp -r verified_kernels .rsi/vk22
tar -czf "$OUT/run22.tgz" -C /tmp run22 -C "$PWD" verified_kernels
