#!/bin/sh
# build.sh — builds bench_ggml: qtk_matmul against ggml's CPU mul_mat in one process.
#
#   bench/build.sh GGML_SRC [GGML_BUILD]
#
# GGML_SRC is a ggml source tree (ggml-org/ggml; the figures in docs/performance.md are for commit
# d99724f2). GGML_BUILD is a directory where that tree was built as shared libraries
# (libggml.so, libggml-base.so, libggml-cpu.so under GGML_BUILD/src); without it the script
# configures and builds ggml itself (Release, GGML_NATIVE=ON, no OpenMP) under $OUT/ggml.
# qtk is built (Release, library only) under $OUT/qtk. OUT defaults to build-bench in the
# qtk tree. The program is $OUT/bench_ggml; run it under the exclusive CPU lock, e.g.
#
#   flock -x /tmp/qtk-cpu.lock build-bench/bench_ggml --reps 20
#
# Not part of CI: qtk itself never depends on ggml.
set -eu
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
    echo "usage: $0 GGML_SRC [GGML_BUILD]" >&2
    exit 2
fi
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
ggml_src="$(cd "$1" && pwd)"
out="${OUT:-$root/build-bench}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
jobs="${JOBS:-$(nproc 2>/dev/null || echo 2)}"

if [ $# -eq 2 ]; then
    ggml_build="$(cd "$2" && pwd)"
else
    ggml_build="$out/ggml"
    cmake -S "$ggml_src" -B "$ggml_build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DGGML_OPENMP=OFF \
        -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF >/dev/null
    cmake --build "$ggml_build" -j "$jobs" >/dev/null
fi
for lib in libggml.so libggml-base.so libggml-cpu.so; do
    if [ ! -e "$ggml_build/src/$lib" ]; then
        echo "$0: $ggml_build/src/$lib not found (build ggml with BUILD_SHARED_LIBS=ON)" >&2
        exit 1
    fi
done

cmake -S "$root" -B "$out/qtk" -DCMAKE_BUILD_TYPE=Release -DQTK_BUILD_TESTS=OFF -DQTK_BUILD_CLI=OFF >/dev/null
cmake --build "$out/qtk" -j "$jobs" --target qtk_static >/dev/null

cc="${CC:-cc}"
"$cc" -std=c11 -O2 -D_POSIX_C_SOURCE=200809L -Wall -Wextra \
    -I"$root/include" -I"$out/qtk/include" -I"$ggml_src/include" \
    "$here/bench_ggml.c" -o "$out/bench_ggml" \
    "$out/qtk/libqtk.a" \
    -L"$ggml_build/src" -lggml -lggml-cpu -lggml-base -Wl,-rpath,"$ggml_build/src" \
    -lm -lpthread
echo "$out/bench_ggml"
