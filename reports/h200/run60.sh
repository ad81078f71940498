#!/usr/bin/env bash
# H200 run 60 (fourteenth session), one call, carry [".whl", ".tools"]:
#   RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run60.sh
# The first judged search of the attention space since the 227 KB shared-memory cap and the TMA axis (thirteenth
# session): the offline proposer's heuristic (pointer 128 x 128, 8 warps, 3 stages) then Optuna TPE, under the
# sandboxed judge against the SDPA backends and FlexAttention at every bucket (fa4 is not carried: not installed).
. reports/h200/lib.sh
setup_run run60
install_whl .whl || exit 1
export RSI_BWRAP=$PWD/.tools/bwrap COLUMNS=160
run search_attention 560 python3 -m rsi search --op-group attention --gpu h200 --budget 8,8m \
  --candidate-timeout 420 --summary-out "$R/search_attention.json"
python3 -m rsi show --run "$(python3 -c "import json; print(json.load(open('$R/search_attention.json'))['run_id'])")" \
  --limit 50 > "$R/show.txt" 2>&1
cp .rsi/rsi.db "$R/rsi.db"
tar -czf "$OUT/run60.tgz" -C /tmp run60 -C "$PWD" verified_kernels
