#!/usr/bin/env bash
# What the H200 device image lacks for `rsi search` / `rsi verify`, fetched here (it has no network) into .whl/
# (Python wheels, carried and installed with pip --target) and .tools/ (bubblewrap for the producer sandbox,
# extracted from Debian 12's package with the libraries it links). Re-run from a clone to recreate both.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .whl .whl-av .whl-report .whl-fa4 .tools
PLAT="--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64"
# One call carries at most 64 MiB, so the wheels come in three folders, carried as a call needs them:
#   .whl/        rsi search / verify / bench and the runtime (optuna and its needs; diffusers, the peer library;
#                cuDNN's frontend for FP8 attention)
#   .whl-av/     PyAV, for the MP4 mux (40 MB; runs with --no-mux do without it)
#   .whl-report/ matplotlib, pandas and their needs: rsi nightly's report
#   .whl-fa4/    flash-attn-4 and its needs but the CuTe DSL (which .cute/ carries)
fetch() {
  local dir=$1; shift
  for w in "$@"; do
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $PLAT \
      -d "$dir" "$w" || python3 -m pip download -q --no-deps --python-version 3.12 --implementation cp $PLAT -d "$dir" "$w"
  done
}
fetch .whl optuna==4.6.0 alembic==1.17.2 sqlalchemy==2.0.44 colorlog==6.10.1 mako==1.3.10 greenlet==3.2.4 \
  diffusers==0.42.1 importlib_metadata==8.7.0
fetch .whl nvidia-cudnn-frontend==1.23.0   # cuDNN's graph API: FP8 attention (runtime/attention_fp8_cudnn.py)
fetch .whl pytest==9.2.0 pluggy==1.7.0 iniconfig==2.3.1 pygments==2.21.0 packaging==26.4  # the GPU tests (tests/unit/test_fp8_gpu.py)
fetch .whl-av av==16.0.1
# FlashAttention-4 (a peer library, the `fa4` attention incumbent; with the CuTe DSL carry, reports/h200/cute_carry.sh)
fetch .whl-fa4 flash-attn-4==4.0.0b36 quack-kernels==0.6.5 apache-tvm-ffi==0.1.15.post2 torch-c-dlpack-ext==0.1.5 \
  einops==0.8.2
fetch .whl-report matplotlib==3.11.2 contourpy==1.3.3 cycler==0.12.1 fonttools==4.68.0 kiwisolver==1.5.1 \
  pyparsing==3.3.3 pillow==13.0.0 pandas==3.1.1 python-dateutil==4.0.0 tzdata==2026.6
tmp=$(mktemp -d)
(cd "$tmp" && apt-get download -q bubblewrap libselinux1 libcap2 libpcre2-8-0 >/dev/null 2>&1)
for deb in "$tmp"/*.deb; do dpkg -x "$deb" "$tmp/root"; done
cp "$tmp/root/usr/bin/bwrap" .tools/bwrap.bin
for lib in libselinux.so.1 libcap.so.2 libpcre2-8.so.0; do
  cp -L "$(find "$tmp/root" -name "$lib" | head -1)" .tools/
done
# a wrapper: bwrap finds its libraries; the producer it starts does not inherit LD_LIBRARY_PATH from here
cat > .tools/bwrap <<'SH'
#!/bin/sh
d=$(dirname "$(readlink -f "$0")")
LD_LIBRARY_PATH="$d" exec "$d/bwrap.bin" "$@"
SH
chmod +x .tools/bwrap .tools/bwrap.bin
rm -rf "$tmp"
du -sh .whl .whl-av .whl-report .whl-fa4 .tools
