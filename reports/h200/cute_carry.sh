#!/usr/bin/env bash
# The CuTe DSL carry for the H200 machine (no registry there): nvidia-cutlass-dsl 4.8.1's CUDA-13 library, repacked
# and split over two calls by ../shared/tools/prepare_cute_carry.sh (.cute/part1, .cute/part2; the recipe is
# ../shared/docs/CUTE_DSL_ON_H200.md), plus the libs-core wheel's requirements that the device image may lack
# (.cute/extra: cuda-bindings 13.x, cuda-pathfinder, protobuf; installed there only if `import cuda.bindings` fails).
# Run from the project root; ignored paths. Used by reports/h200/run30.sh.
set -euo pipefail
[ -d .cute/part1 ] && [ -d .cute/part2 ] || bash ../shared/tools/prepare_cute_carry.sh
mkdir -p .cute/extra
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 -d .cute/extra \
  "cuda-bindings==13.5.0" "cuda-pathfinder==1.9.1" "protobuf==7.36.2"
du -sh .cute/part1 .cute/part2 .cute/extra
