#!/usr/bin/env bash
# H200 run 3 (exact command): the H3 runtime at full size, reference vs verified kernels (issue 5), then an
# agent-proposer search whose replies were written beforehand into the inbox, and its replay (issue 4).
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl .h3rt_whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; L=$OUT/logs; mkdir -p "$L"
timeout -s INT 130 python3 -m runtime.bench_h200 --out "$L/bench_h200.json" --mp4 /tmp/req.mp4 > "$L/runtime_bench.log" 2>&1
echo "runtime exit $?"; tail -25 "$L/runtime_bench.log"
W=/tmp/agent_ws; mkdir -p $W; cp -r reports/h200/run3/inbox $W/inbox
timeout -s INT 90 python3 -m rsi --root $W search --op-group gate_residual_modulate --gpu h200 --proposer agent \
  --inbox $W/inbox --budget 2 --max-calls 2 --hybrid-tune 0 --transcript "$L/agent_transcript.jsonl" --quiet \
  --summary-out "$L/agent_summary.json" > "$L/agent_search.log" 2>&1
echo "agent exit $?"; tail -15 "$L/agent_search.log"
RUN=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['run_id'])" "$L/agent_summary.json")
python3 -m rsi --root $W show --run "$RUN" > "$L/agent_show.txt" 2>&1
R=/tmp/replay_ws; mkdir -p $R
timeout -s INT 70 python3 -m rsi --root $R search --op-group gate_residual_modulate --gpu h200 --proposer replay \
  --transcript "$L/agent_transcript.jsonl" --budget 2 --hybrid-tune 0 --quiet \
  --summary-out "$L/replay_summary.json" > "$L/replay_search.log" 2>&1
echo "replay exit $?"; tail -15 "$L/replay_search.log"
cp -r $W/inbox "$L/agent_inbox"; tar czf "$OUT/results.tgz" -C "$OUT" logs $W/verified_kernels 2>/dev/null; ls -la "$OUT"
