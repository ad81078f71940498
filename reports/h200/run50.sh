#!/usr/bin/env bash
# H200 run 50 (eleventh session). Two calls to one warm machine, carry [".whl", ".tools"] both times:
#   call a:  RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run50.sh a
#     1. the GPU tests of the new pieces: gate_residual_modulate_fp8's template bitwise (QUOT 0 and 1, every layout and
#        special case) and fp8_gemm's Triton TMA template in the approximate class (tests/unit/test_fp8_gpu.py);
#     2. `rsi search --op-group gate_residual_modulate_fp8` (the new fused producer: fc1's input in every block and
#        qkv_proj's in every later one) on the product lock;
#     3. `rsi search --op-group fp8_gemm --template fp8_gemm_tma` (Triton, device-side TMA descriptors) on the product
#        lock; tarred with the lock and the store's verdicts.
#   call b (at once, same carry; the lock call a left on the machine is used):
#     4. runtime/bench_fp8.py: the four linears bf16 against fp8, and every producer against the bf16 op it replaces
#        and against that op followed by the compiled quantiser;
#     5. runtime/bench_h200.py: the H3 block at 38,272 rows with e4m3 linears, with and without the fused producers.
STEP=${1:?usage: run50.sh a|b}
. reports/h200/lib.sh
setup_run "run50$STEP"
install_whl .whl || exit 1
export RSI_BWRAP=$PWD/.tools/bwrap COLUMNS=160
if [ "$STEP" = a ]; then
  run gpu_tests 90 python3 -m pytest tests/unit/test_fp8_gpu.py -q -p no:xdist -p no:cacheprovider -o addopts="" \
    -k "gate_residual or tma"
  run search_gate_residual_modulate_fp8 200 python3 -m rsi search --op-group gate_residual_modulate_fp8 --gpu h200 \
    --budget 3,2.8m --reps 10 --summary-out "$R/search_gate_residual_modulate_fp8.json"
  run search_fp8_gemm_tma 270 python3 -m rsi search --op-group fp8_gemm --template fp8_gemm_tma --gpu h200 \
    --budget 3,3.8m --summary-out "$R/search_fp8_gemm_tma.json"
  python3 - .rsi/rsi.db > "$R/verdicts.txt" 2>&1 <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
for row in c.execute("select r.op, e.run_id, e.candidate, e.status, e.stage, e.reason, e.objective "
                     "from rsi_evaluations e join rsi_runs r on r.id = e.run_id order by e.id"):
    print(" | ".join(str(x) for x in row))
PY
  cut -c1-500 "$R/verdicts.txt"
  cp .rsi/rsi.db "$R/rsi.db"
  mkdir -p /root/lock && cp -r verified_kernels /root/lock/    # call b times with this lock
  tar -czf "$OUT/run50a.tgz" -C /tmp run50a -C "$PWD" verified_kernels
else
  [ -d /root/lock/verified_kernels ] && rm -rf verified_kernels && cp -r /root/lock/verified_kernels . &&
    sha256sum verified_kernels/LOCK.json > "$R/lock.txt"
  run bench_fp8 200 python3 -m runtime.bench_fp8 --rows 38248 --out "$R/bench_fp8.json"
  run block 330 python3 -m runtime.bench_h200 --modes verified --attention dense fp8 --precision bf16 fp8 \
    --skip-request --blocks 2 --forward-reps 1 --out "$R/bench_block.json"
  tar -czf "$OUT/run50b.tgz" -C /tmp run50b
fi
