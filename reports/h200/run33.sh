#!/usr/bin/env bash
# H200 run 33 (eighth session), four calls (search, check, modulate, modulate with RUN_TAG=b):
#   PART=search  the fused producers with the new arithmetic: swiglu_fp8 (heuristic FAST 1 + QUOT 1: fp32 silu with
#                the near-midpoint elements redone in fp64, the reciprocal quotient; its unfused incumbent in its own
#                class, which run 32a could not vet) and head_merge_fp8 (new QUOT axis, searched; new unfused
#                incumbent merge_then_quantize); the store's verdicts; verified_kernels/ back.
#   PART=check   (after the search part's promotions are committed) head_merge_fp8 again (the search part found
#                QUOT 1 but could promote nothing: its new incumbent failed bitwise vetting on CUDA; now in its own
#                class, and the heuristic takes QUOT 1); the GPU tests of the fp8 producers (every bf16 gate through
#                FAST's ex2.approx path, QUOT 0/1, every special case); runtime/bench_fp8.py: each producer against
#                the bf16 op it replaces and against the runtime's unfused path, same loop, on the resulting lock.
#   PART=modulate  modulate_fp8 with the reciprocal quotient, and the producer bench again on the resulting lock
#                (RUN_TAG=b: again after run 34b's probe moved the heuristic to 2 warps).
# Run as `PART=search|check|modulate RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run33.sh` with carry
# [".whl", ".tools", ".rsi/src.tgz"] (src.tgz: `git archive` of the commit, unpacked over the tree).
set -o pipefail
[ -f .rsi/src.tgz ] && tar -xzf .rsi/src.tgz
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONUNBUFFERED=1 RSI_BWRAP=$PWD/.tools/bwrap PYTHONPATH=/tmp/site:$PWD TRITON_CACHE_DIR=/tmp/triton_cache COLUMNS=160
OUT=${OUT:-/tmp/out}; P=${PART:-search}; R=/tmp/run33-$P${RUN_TAG:-}; mkdir -p "$R" "$OUT"
sha256sum verified_kernels/LOCK.json > "$R/lock.txt"
run() {  # name, cap (s), command...
  local name=$1 cap=$2; shift 2
  local t0=$SECONDS
  timeout -s INT "$cap" "$@" > "$R/$name.log" 2>&1; echo "$name exit $? in $((SECONDS - t0)) s"
  grep -v "Warning\|warnings.warn" "$R/$name.log" | tail -${TAILN:-14} | cut -c1-400
}
if [ "$P" = search ]; then
  run search_swiglu_fp8 260 python3 -m rsi search --op-group swiglu_fp8 --gpu h200 --budget 4,3.6m --reps 10 \
    --summary-out "$R/search_swiglu_fp8.json"
  run search_head_merge_fp8 250 python3 -m rsi search --op-group head_merge_fp8 --gpu h200 --budget 9,3.6m --reps 10 \
    --summary-out "$R/search_head_merge_fp8.json"
  python3 - > "$R/verdicts.txt" 2>&1 <<'PY'
import json, sqlite3
c = sqlite3.connect(".rsi/rsi.db")
for row in c.execute("select r.op, e.run_id, e.candidate, e.status, e.stage, e.reason, e.objective, e.verdict_json "
                     "from rsi_evaluations e join rsi_runs r on r.id = e.run_id order by e.id"):
    print(" | ".join(str(x) for x in row[:7]))
    try:
        v = json.loads(row[7]); print("  incumbents:", json.dumps(v.get("details", {}).get("incumbents"))[:1200])
        for t in v.get("timings", []):
            print("  ", t.get("bucket"), {k: (round(b.get("p50_us", 0), 1), round(b.get("speedup", 0), 3)) for k, b in t.get("baselines", {}).items()})
    except Exception as e:
        print("  (verdict json:", e, ")")
PY
  cut -c1-700 "$R/verdicts.txt" | head -60
  cp .rsi/rsi.db "$R/rsi.db"
  tar -czf "$OUT/run33-search.tgz" -C /tmp run33-search -C "$PWD" verified_kernels
elif [ "$P" = check ]; then
  run search_head_merge_fp8 200 python3 -m rsi search --op-group head_merge_fp8 --gpu h200 --budget 2,2.5m --reps 10 \
    --summary-out "$R/search_head_merge_fp8.json"
  run gpu_tests 200 python3 -m pytest tests/unit/test_fp8_gpu.py -q -p no:xdist -p no:cacheprovider -o addopts=""
  TAILN=20 run bench_fp8 120 python3 -m runtime.bench_fp8 --rows 38248 --out "$R/bench_fp8.json"
  cp .rsi/rsi.db "$R/rsi.db"
  tar -czf "$OUT/run33-check.tgz" -C /tmp run33-check -C "$PWD" verified_kernels
fi
if [ "$P" = modulate ]; then   # PART=modulate (third call): modulate_fp8 with QUOT (heuristic), then the producer bench again
  run search_modulate_fp8 260 python3 -m rsi search --op-group modulate_fp8 --gpu h200 --budget 3,3.5m --reps 10 \
    --summary-out "$R/search_modulate_fp8.json"
  TAILN=20 run bench_fp8 120 python3 -m runtime.bench_fp8 --rows 38248 --out "$R/bench_fp8.json"
  cp .rsi/rsi.db "$R/rsi.db"
  tar -czf "$OUT/run33-modulate.tgz" -C /tmp run33-modulate${RUN_TAG:-} -C "$PWD" verified_kernels
fi
