#!/bin/sh
# deps.sh — installs what building and testing qtk needs, when it is missing (Debian/Ubuntu).
# Sourced by demo.sh and test.sh; safe to run on its own.
set -eu

qtk_need=""
command -v cmake >/dev/null 2>&1 || qtk_need="$qtk_need cmake"
command -v make >/dev/null 2>&1 || qtk_need="$qtk_need make"
command -v cc >/dev/null 2>&1 || qtk_need="$qtk_need gcc libc6-dev"
# clang with its sanitizer and libFuzzer runtimes: the second sanitizer build and the fuzzers
if command -v clang >/dev/null 2>&1; then
    [ -e "$(clang -print-resource-dir)/lib/linux/libclang_rt.fuzzer-x86_64.a" ] ||
        [ "$(uname -m)" != x86_64 ] || qtk_need="$qtk_need libclang-rt-dev"
else
    qtk_need="$qtk_need clang libclang-rt-dev"
fi
if command -v pkg-config >/dev/null 2>&1; then
    # The file-format layer (not the core library) reads CBOR (burnpack) and JSON
    # (safetensors) with Debian's libcbor and jansson; CMake finds them via pkg-config.
    pkg-config --exists libcbor || qtk_need="$qtk_need libcbor-dev"
    pkg-config --exists jansson || qtk_need="$qtk_need libjansson-dev"
else
    qtk_need="$qtk_need pkg-config libcbor-dev libjansson-dev"
fi

if [ -n "$qtk_need" ]; then
    echo "qtk: installing:$qtk_need" >&2
    if [ "$(id -u)" -eq 0 ]; then SUDO=""; elif command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
        echo "qtk: need root (or sudo) to apt-get install:$qtk_need" >&2
        exit 1
    fi
    $SUDO apt-get update -qq
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $qtk_need >/dev/null
fi
