#!/usr/bin/env bash
# H200 run 64 (prepared in the fifteenth session, not yet run), one call, carry [".whl", ".tools"]:
#   RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run64.sh
# 1. The current attention template (document-relative key walk) judged at all five buckets, ltx_text included: the
#    heuristic alone (--budget 1), so the judge's figures replace run 61's for 880b17f.
# 2. Probe 64: cuDNN with its prepare outside the timed call (as the judge) and inside (as probes 56-63), beside the
#    old (5399fcc) and current templates, so the probes' host-sync bias is measured (reports/h200/probe64.py).
. reports/h200/lib.sh
setup_run run64
install_whl .whl || exit 1
export RSI_BWRAP=$PWD/.tools/bwrap COLUMNS=160
run search_attention 330 python3 -m rsi search --op-group attention --gpu h200 --budget 1,5m --seed 2 \
  --candidate-timeout 300 --summary-out "$R/search_attention.json"
python3 -m rsi show --run "$(python3 -c "import json; print(json.load(open('$R/search_attention.json'))['run_id'])")" \
  --limit 50 > "$R/show.txt" 2>&1
cp .rsi/rsi.db "$R/rsi.db"
run probe64 200 python3 reports/h200/probe64.py "$R/probe64.json" 10
tar -czf "$OUT/run64.tgz" -C /tmp run64 -C "$PWD" verified_kernels
