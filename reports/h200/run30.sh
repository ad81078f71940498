#!/usr/bin/env bash
# H200 run 30 (seventh session): the first CuTe DSL candidate judged on the GPU (issue 12, item 5). Two calls to one
# warm machine (the CuTe library is over one call's 64 MiB; reports/h200/cute_carry.sh makes the carry):
#   call 1, carry [".whl", ".cute/part1"]:   bash reports/h200/run30.sh part1
#   call 2 at once, carry [".cute/part2", ".cute/extra", ".tools", ".rsi/src.tgz"]:
#                                            RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run30.sh judge
# judge: `rsi search --op-group gelu_tanh --template gelu_tanh_cute --budget 2` (the CuTe template's heuristic and
# one proposal, each judged by the sandboxed judge against eager, torch.compile, the copy and the locked Triton
# kernel) on a scratch copy of the lock, the store's verdicts, and the CuTe outputs compared bit for bit with the
# Triton template's heuristic on three shapes.
set -o pipefail
STEP=${1:?usage: run30.sh part1|judge}
if [ "$STEP" = part1 ]; then
  mkdir -p /root/cute && cp .cute/part1/* /root/cute/ &&
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl &&
  echo "part1 ok"; exit $?
fi
[ -f .rsi/src.tgz ] && tar -xzf .rsi/src.tgz
cp .cute/part2/cu13.part_* /root/cute/ &&
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .cute/part2/*.whl &&
cat /root/cute/cu13.part_* | xz -d | tar -x -C /tmp/site || exit 1
python3 -c "import cuda.bindings.driver" 2>/dev/null || { echo "installing .cute/extra (cuda-bindings missing)";
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .cute/extra/*.whl || exit 1; }
export PYTHONUNBUFFERED=1 RSI_BWRAP=$PWD/.tools/bwrap TRITON_CACHE_DIR=/tmp/triton_cache COLUMNS=160 \
  PYTHONPATH=/tmp/site:/tmp/site/nvidia_cutlass_dsl/dsl_packages:$PWD
python3 -c "import cutlass.cute, rsi.kernel as K; print('cute', K.cutlass_dsl_version(), repr(K.cute_unavailable('cuda')))" || exit 1
OUT=${OUT:-/tmp/out}; R=/tmp/run30; W=/tmp/ws30; mkdir -p "$R" "$OUT"; rm -rf "$W"; mkdir -p "$W"
cp -r verified_kernels "$W/"
timeout -s INT 240 python3 -m rsi --root "$W" search --op-group gelu_tanh --template gelu_tanh_cute --gpu h200 \
  --budget 2 --summary-out "$R/search_gelu_tanh_cute.json" > "$R/search_gelu_tanh_cute.log" 2>&1
echo "search exit $?"; grep -v "Warning\|warnings.warn" "$R/search_gelu_tanh_cute.log" | tail -25
python3 - "$W/.rsi/rsi.db" > "$R/verdicts.txt" 2>&1 <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
for row in c.execute("select r.op, e.run_id, e.candidate, e.status, e.stage, e.reason, e.objective "
                     "from rsi_evaluations e join rsi_runs r on r.id = e.run_id order by e.id"):
    print(" | ".join(str(x) for x in row))
PY
cut -c1-400 "$R/verdicts.txt"
cp -r "$W/verified_kernels" "$R/verified_kernels_scratch"
python3 - > "$R/bitwise.txt" 2>&1 <<'PY'
import importlib.util, torch
from rsi.spaces import load_space
def load(n):
    s = importlib.util.spec_from_file_location(f"cmp_{n}", f"rsi/templates/{n}.py"); m = importlib.util.module_from_spec(s)
    s.loader.exec_module(m); return m
tri, cu, sp = load("gelu_tanh"), load("gelu_tanh_cute"), load_space("gelu_tanh")
g = torch.Generator(device="cuda").manual_seed(0)
for rows, cols in ((16128, 16384), (126, 8192), (333, 1000)):
    x = (2 * torch.randn(rows, cols, device="cuda", generator=g)).to(torch.bfloat16)
    a = tri.launch(x, **sp.heuristic()).view(torch.int16)
    for math in (1, 0):
        b = cu.launch(x, **{**sp.select("gelu_tanh_cute").heuristic(), "MATH": math}).view(torch.int16)
        torch.cuda.synchronize()
        print(f"{rows}x{cols} MATH={math}: {(a != b).sum().item()} of {a.numel()} outputs differ from the Triton template")
PY
cat "$R/bitwise.txt"
tar -czf "$OUT/run30.tgz" -C /tmp run30
