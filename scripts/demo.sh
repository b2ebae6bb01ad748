#!/bin/sh
# demo.sh — builds qtk (Release) and runs the main job on its built-in default: a generated
# transformer-like checkpoint converted to NVFP4 burnpack, inspected, and evaluated. The
# files (and the chart eval.svg) are kept in build/demo.
set -eu
cd "$(dirname "$0")/.."
. scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc 2>/dev/null || echo 2)" >/dev/null
./build/qtk demo --dir build/demo
