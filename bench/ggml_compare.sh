#!/bin/sh
# ggml_compare.sh — builds and runs bench/ggml_compare.c: qtk's quantizers beside ggml's own
# at the same layouts (docs/quantizers.md). Not part of CI.
#
#   bench/ggml_compare.sh GGML_SRC GGML_BUILD [MNIST.safetensors] [--markdown] [--affine]
#
# GGML_SRC is a ggml source tree (its include/ggml.h), GGML_BUILD a build of it holding
# src/libggml-base.so; qtk's static library is taken from build/ (cmake --build build first).
set -eu
if [ $# -lt 2 ]; then
    echo "usage: $0 GGML_SRC GGML_BUILD [MNIST.safetensors] [--markdown]" >&2
    exit 2
fi
src=$1
bld=$2
shift 2
here=$(cd "$(dirname "$0")/.." && pwd)
lib="$bld/src"
[ -f "$lib/libggml-base.so" ] || lib="$bld"
out="$here/build/ggml_compare"
cc -std=c11 -O2 -D_POSIX_C_SOURCE=200809L -I"$here/include" -I"$here/build/include" -I"$src/include" "$here/bench/ggml_compare.c" \
    "$here/build/libqtk.a" -L"$lib" -lggml-base -Wl,-rpath,"$lib" -lm -lpthread -o "$out"
cd "$here"
mnist=${1:-../shared/data/burn/mnist.safetensors}
[ $# -gt 0 ] && shift
exec "$out" "$mnist" "$@"
