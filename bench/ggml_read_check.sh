#!/bin/sh
# ggml_read_check.sh — qtk writes GGUF files of every type it can write, and ggml's own reader,
# validator and dequantizer read them back with exactly qtk's values (bench/ggml_read_check.c).
#
#   bench/ggml_read_check.sh GGML_SRC GGML_BUILD [WORKDIR]
#
# GGML_SRC is a ggml source tree, GGML_BUILD a build of it holding src/libggml-base.so (as
# bench/build.sh makes under build-bench/ggml); qtk's libraries and CLI are taken from build/
# (cmake --build build first). The files are made in WORKDIR (default: a temporary directory):
# a synthetic Llama-shaped model converted to each type qtk writes, to every mixture preset,
# and, when ../shared/data/ggml is there, ggml's own sample file re-written by qtk.
# Not part of CI: qtk never depends on ggml.
set -eu
if [ $# -lt 2 ]; then
    echo "usage: $0 GGML_SRC GGML_BUILD [WORKDIR]" >&2
    exit 2
fi
src=$1
bld=$2
here=$(cd "$(dirname "$0")/.." && pwd)
lib="$bld/src"
[ -f "$lib/libggml-base.so" ] || lib="$bld"
work=${3:-$(mktemp -d)}
mkdir -p "$work"
qtk="$here/build/qtk"
prog="$here/build/ggml_read_check"
cc -std=c11 -O2 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -I"$here/include" -I"$here/build/include" -I"$src/include" \
    "$here/bench/ggml_read_check.c" "$here/build/libqtk_ckpt.a" "$here/build/libqtk.a" \
    -L"$lib" -lggml-base -Wl,-rpath,"$lib" -lcbor -ljansson -lm -lpthread -o "$prog"

cd "$work"
"$qtk" synth m.safetensors --layers 2 --hidden 512 --ffn 1536 --kv 256 --vocab 1024 --dtype f32 --force >/dev/null
files=""
for s in q4_1 q5_0 q5_1 q2_k q3_k q4_k q5_k q6_k q8_0 q4_0 iq4_nl mxfp4 nvfp4 'q2s,block=64:f16' \
    'u4,block=32:f16,offset=f16' 'u5,block=32:f16,offset=f16,store=native'; do
    f="s_$(echo "$s" | tr ',:=' '___').gguf"
    "$qtk" convert m.safetensors "$f" --scheme "$s" --calibration mse --force >/dev/null
    files="$files $f"
done
for p in q4_k_m q5_k_m q3_k_m q4_k_s q5_k_s q6_k q8_0; do
    "$qtk" convert m.safetensors "p_$p.gguf" --preset "$p" --calibration mse --force >/dev/null
    files="$files p_$p.gguf"
done
sample="$here/../shared/data/ggml/types.gguf"
if [ -f "$sample" ]; then
    "$qtk" convert "$sample" t.bpk --force >/dev/null
    "$qtk" convert t.bpk t.safetensors --force >/dev/null
    "$qtk" convert t.safetensors types_again.gguf --force >/dev/null
    files="$files $sample types_again.gguf"
fi
# shellcheck disable=SC2086
exec "$prog" $files
