#!/usr/bin/env bash
# H200 run 26 (NOT YET RUN; written in the sixth session for the next). Searches after the sixth session's judge
# changes (untimed references, heavy shapes: seeds and refill only at the 38k-row shapes): attention (can the FA-2
# template's best config, 81 ms in run 24's exploration, be judged against cuDNN's 71.5 ms), fp8_linear (against the
# compiled-quantiser incumbent), swiglu_fp8 and modulate_fp8 (bitwise producers); logs not --quiet, the store's
# verdicts, and verified_kernels/ kept in .rsi/vk26 for run 27 on the warm machine.
# Run as `RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run26.sh` with carry [".whl", ".tools"].
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONUNBUFFERED=1 RSI_BWRAP=$PWD/.tools/bwrap PYTHONPATH=/tmp/site:$PWD TRITON_CACHE_DIR=/tmp/triton_cache \
  COLUMNS=160
OUT=${OUT:-/tmp/out}; R=/tmp/run26; mkdir -p "$R" "$OUT"
search() {  # op, time cap (s), budget
  timeout -s INT "$2" python3 -m rsi search --op-group "$1" --gpu h200 --budget "$3" --reps 10 \
    --summary-out "$R/search_$1.json" > "$R/search_$1.log" 2>&1
  echo "$1 exit $?"; grep -v "Warning\|warnings.warn" "$R/search_$1.log" | tail -8
}
search attention 230 4,3.2m
search fp8_linear 170 4,2.3m
search swiglu_fp8 90 4,1.2m
search modulate_fp8 60 4,0.8m
python3 - > "$R/verdicts.txt" 2>&1 <<'PY'
import sqlite3
c = sqlite3.connect(".rsi/rsi.db")
for row in c.execute("select r.op, e.run_id, e.candidate, e.status, e.stage, e.reason, e.objective "
                     "from rsi_evaluations e join rsi_runs r on r.id = e.run_id order by e.id"):
    print(" | ".join(str(x) for x in row))
PY
cut -c1-300 "$R/verdicts.txt"
rm -rf .rsi/vk26 && cp -r verified_kernels .rsi/vk26
tar -czf "$OUT/run26.tgz" -C /tmp run26 -C "$PWD" verified_kernels
