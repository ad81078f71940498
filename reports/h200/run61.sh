#!/usr/bin/env bash
# H200 run 61 (fourteenth session), one call, carry [".whl", ".tools"]:
#   RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run61.sh
# The attention op with cross-attention (cu_seqlens_q / cu_seqlens_k) and its new bucket ltx_text (the refiner's text
# cross-attention: 16,128 query rows against 1,024 keys, 32 heads) under the sandboxed judge, all five buckets:
# the heuristic again, then Optuna TPE from another seed than run 60's (--seed 1).
. reports/h200/lib.sh
setup_run run61
install_whl .whl || exit 1
export RSI_BWRAP=$PWD/.tools/bwrap COLUMNS=160
run search_attention 560 python3 -m rsi search --op-group attention --gpu h200 --budget 4,8m --seed 1 \
  --candidate-timeout 420 --summary-out "$R/search_attention.json"
python3 -m rsi show --run "$(python3 -c "import json; print(json.load(open('$R/search_attention.json'))['run_id'])")" \
  --limit 50 > "$R/show.txt" 2>&1
cp .rsi/rsi.db "$R/rsi.db"
tar -czf "$OUT/run61.tgz" -C /tmp run61 -C "$PWD" verified_kernels
