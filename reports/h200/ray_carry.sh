#!/usr/bin/env bash
# Ray for the H200 machines (no registry there): its wheel (~79 MB) is larger than one call may carry (64 MiB), so
# it goes over in two parts on two consecutive calls to the same warm machine (docs/ray.md). Makes .ray/part1 and
# .ray/part2 (ignored); re-run from a clone to recreate them. Ray's small pure-Python needs ride in part 2.
set -euo pipefail
cd "$(dirname "$0")/../.."
RAY=ray==2.52.1
PLAT="--platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64"
rm -rf .ray && mkdir -p .ray/wheels .ray/part1 .ray/part2
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $PLAT -d .ray/wheels "$RAY"
# Ray's requirements (2.52: click, filelock, jsonschema + referencing/rpds/attrs/jsonschema-specifications,
# msgpack, packaging, protobuf, pyyaml, requests + idna/urllib3/certifi/charset-normalizer); the device image's own
# copies are used where it has them (pip --target installs these beside them, first on PYTHONPATH)
for w in click filelock jsonschema jsonschema-specifications referencing rpds-py attrs msgpack protobuf pyyaml; do
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $PLAT -d .ray/wheels "$w"
done
whl=$(ls .ray/wheels/ray-*.whl)
split -b 45M -d "$whl" .ray/part1/ray.whl.part_
mv .ray/part1/ray.whl.part_01 .ray/part2/ 2>/dev/null || true
for extra in .ray/part1/ray.whl.part_0[2-9]; do [ -e "$extra" ] && mv "$extra" .ray/part2/; done
cp $(ls .ray/wheels/*.whl | grep -v '/ray-') .ray/part2/
basename "$whl" > .ray/part2/WHEEL_NAME
du -sh .ray/part1 .ray/part2
