#!/usr/bin/env bash
# Shared by the device scripts from run 46 on (runs 37-45 repeat these blocks; they are records of what ran).
# Source it from the project root on the H200 machine: `. reports/h200/lib.sh <run name>`.
#   setup_run NAME       /tmp/NAME for the results, $OUT, PYTHONPATH, the commit and lock hash written down
#   install_whl DIR...   the carried wheels of each DIR into /tmp/site (no index: the machine has no registry)
#   stash_cute_part1     call 1 of a CuTe carry: keep .cute/part1 on the machine for call 2 (30 s idle between)
#   install_cute         call 2: .cute/part2 (+ .cute/extra where cuda-bindings is missing) into /tmp/site
#   cute_run STEP NAME   a CuTe run's two calls (run 90 on; runs 76-89 repeat its lines): STEP a stashes .cute/part1
#                        and installs .whl, then exits; any other step sets up run NAME with the CuTe DSL, bwrap, $T
#   pack, probe NAME CAP REPS   after cute_run: the run's results into $OUT; one probe script run, then packed
#   verdicts             after cute_run: the store's verdicts written into the run's folder, then packed
#   judge_modulate_cute, judge_gate_cute, judge_swiglu_part   runs 93 and 94's producer judges, then verdicts
#   run NAME CAP CMD...  CMD under a timeout of CAP seconds, its output in $R/NAME.log, the tail shown
#   detect_target        $T: the rsi target of this GPU (h200, h100, none); nvidia-smi's line in $R/gpu.txt
#   judge_first OP TPL FIRST CAP   the judged search of one config (--first, --reps JREPS or 20) on $T, written down
#   probe_choice JSON OP  a probe's fastest bitwise variant of OP where faster than the locked kernel: NAME TPL FIRST
#   probe_and_judge RUN PROBE STEP   the producer runs from run 86 on (runs 79-83 repeat its lines): p, the probe;
#                        j, the judge of each op group's (OPS) fastest variant where faster than the locked kernel
set -o pipefail

setup_run() {
  export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache
  export PYTHONPATH=/tmp/site:/tmp/site/nvidia_cutlass_dsl/dsl_packages:$PWD
  OUT=${OUT:-/tmp/out}; R=/tmp/$1; mkdir -p "$R" "$OUT"
  echo "commit ${RSI_COMMIT:-unknown} dirty ${RSI_DIRTY:-unknown}" > "$R/commit.txt"
  sha256sum verified_kernels/LOCK.json > "$R/lock.txt"
}

install_whl() {
  local d
  for d in "$@"; do
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
      "$d"/*.whl || return 1
  done
}

stash_cute_part1() {
  mkdir -p /root/cute && cp .cute/part1/* /root/cute/
}

install_cute() {
  [ -e /root/cute/cu13.part_aa ] || { echo "no .cute/part1 on this machine: run call 1 first (warm machine)"; return 1; }
  cp .cute/part2/cu13.part_* /root/cute/ &&
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .cute/part2/*.whl 2>/dev/null &&
    cat /root/cute/cu13.part_* | xz -d | tar -x -C /tmp/site || return 1
  python3 -c "import cuda.bindings.driver" 2>/dev/null || { echo "installing .cute/extra (cuda-bindings missing)";
    install_whl .cute/extra; }
}

cute_run() {  # step, run name (see the header)
  if [ "$1" = a ]; then
    stash_cute_part1 && install_whl .whl && echo "part1 ok"; exit $?
  fi
  setup_run "$2"
  python3 -c "import cutlass.cute" 2>/dev/null || install_cute || exit 1
  export RSI_BWRAP=$PWD/.tools/bwrap COLUMNS=160
  detect_target
  RUN=$2 STEP=$1
}

pack() {  # after cute_run: /tmp/RUN and verified_kernels in $OUT/RUNSTEP.tgz, the only file there
  rm -f "$OUT"/*; tar -czf "$OUT/$RUN$STEP.tgz" -C /tmp "$RUN" -C "$PWD" verified_kernels
}

verdicts() {  # after cute_run or run 94's setup: the store's verdicts into $R/verdicts.json, then packed
  [ -e .rsi/rsi.db ] && python3 reports/h200/verdicts_from_db.py .rsi/rsi.db "$R/verdicts.json" 2>/dev/null; pack
}

# the producer judges of runs 93 and 94 (JREPS repetitions, default 40), each followed by verdicts: the CuTe
# producers' configs of probes 88 and 89, and swiglu_fp8's one-piece PART config of probe 75
judge_modulate_cute() {
  JREPS=${JREPS:-40} judge_first modulate_fp8 modulate_fp8_cute THREADS=128,CHUNKS=8 240; verdicts
}
judge_gate_cute() {
  JREPS=${JREPS:-40} judge_first gate_residual_modulate_fp8 gate_residual_modulate_fp8_cute THREADS=256,CHUNKS=4 220
  verdicts
}
judge_swiglu_part() {
  JREPS=${JREPS:-40} judge_first swiglu_fp8 swiglu_fp8 BLOCK_A=16384,BLOCK_B=0,BLOCK_C=0,ROWS=1,num_warps=32,$(
    )EVICT=evict_first,FAST=0,SUB=16,MAXN=16,QUOT=1,TABLE=2,RELOAD=0,FLAT=1,PERSIST=132,PART=1,MAXNREG=0 270
  verdicts
}

probe() {  # after cute_run: name, cap (s), default repetitions: reports/h200/NAME.py NAME.json REPS, written down,
  # then packed
  echo "python3 reports/h200/$1.py $1.json ${REPS:-$3}" >> "$R/commands.txt"
  run "$1" "$2" python3 "reports/h200/$1.py" "$R/$1.json" "${REPS:-$3}"; pack
}

run() {  # name, cap (s), command...
  local name=$1 cap=$2; shift 2
  local t0=$SECONDS
  timeout -s INT "$cap" "$@" > "$R/$name.log" 2>&1; echo "$name exit $? in $((SECONDS - t0)) s"
  grep -v "Warning\|warnings.warn" "$R/$name.log" | tail -12
}

detect_target() {  # from run 79 on (runs 75 and 78 repeat these lines)
  T=$(python3 -c "from rsi.targets import detect_local; t = detect_local(); print(t.name if t else 'none')")
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$R/gpu.txt"
  echo "target $T: $(tail -1 "$R/gpu.txt")"
}

judge_first() {  # op group, template, config (k=v,...), cap (s): run 78 on; JREPS repetitions (default 20)
  echo "python3 -m rsi search --op-group $1 --template $2 --first $3 --reps ${JREPS:-20} --gpu $T --seed 0" \
    "--budget 1,3m" >> "$R/commands.txt"
  run "search_$1" "$4" python3 -m rsi search --op-group "$1" --template "$2" --first "$3" --reps "${JREPS:-20}" \
    --gpu "$T" --seed 0 --budget 1,3m --summary-out "$R/search_$1.json"
}

probe_choice() {  # probe JSON, op group: "NAME TEMPLATE k=v,..." of its fastest bitwise variant (geometric mean over
  # the buckets) where that is faster than the locked kernel there, else nothing (runs 79 and 80)
  python3 -c "
import json, math
res = json.load(open('$1'))
rows = [r for r in res['rows'] if r['op'] == '$2']
gm = lambda n: math.exp(sum(math.log(r['p50_us'][n]) for r in rows) / len(rows))
ok = [n for n in res['variants'].get('$2', {}) if rows and all(r['bitwise'].get(n) is True for r in rows)]
n = min(ok, key=gm) if ok else ''
if n and gm(n) < gm('${2}_locked'):
    tpl = '$2' if '$2' == 'swiglu_fp8' else '${2}_warp'
    print(n, tpl, ','.join(f'{k}={x}' for k, x in res['variants']['$2'][n].items()))"
}

probe_and_judge() {  # run name, probe name (reports/h200/PROBE.py), step p|j|pj; REPS, JREPS, OPS (run 86 on)
  local run=$1 probe=$2 step=$3 J OP NAME TPL FIRST
  setup_run "$run"
  install_whl .whl || return 1
  export RSI_BWRAP=$PWD/.tools/bwrap COLUMNS=160
  detect_target
  if [ "$step" = p ] || [ "$step" = pj ]; then
    echo "python3 reports/h200/$probe.py $probe.json ${REPS:-10}" >> "$R/commands.txt"
    run "$probe" 300 python3 "reports/h200/$probe.py" "$R/$probe.json" "${REPS:-10}"
    cp "$R/$probe.json" "$R/$probe.log" "$R/commands.txt" "$R/gpu.txt" "$R/commit.txt" "$R/lock.txt" "$OUT/" 2>/dev/null
    [ "$step" = pj ] || return 0
  fi
  J=$R/$probe.json; [ -e "$J" ] || J=reports/h200/$run/$probe.json
  [ -e "$J" ] || { echo "no $probe.json here or in reports/h200/$run: run step p first"; return 1; }
  for OP in ${OPS:-modulate_fp8 gate_residual_modulate_fp8}; do
    read -r NAME TPL FIRST < <(probe_choice "$J" "$OP")
    echo "$OP: ${NAME:-no variant faster than the locked kernel}"
    [ -n "$FIRST" ] || continue
    judge_first "$OP" "$TPL" "$FIRST" 240
    # after every judge (the call's 600 s may end the next one): its verdicts and the lock so far
    [ -e .rsi/rsi.db ] && python3 reports/h200/verdicts_from_db.py .rsi/rsi.db "$R/verdicts.json" 2>/dev/null
    cp "$R/commands.txt" "$R/gpu.txt" "$R/commit.txt" "$R/lock.txt" "$OUT/" 2>/dev/null
    tar -czf "$OUT/${run}j.tgz" -C /tmp "$run" -C "$PWD" verified_kernels
  done
}
