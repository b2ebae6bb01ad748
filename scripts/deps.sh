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

# The Python package (python/) and its tests: Debian's Python 3 with numpy, its headers,
# pytest, hypothesis (the property tests of the binding's argument parsing), and
# setuptools/wheel/pip for the pip-installed copy scripts/test-install.sh checks.
qtk_py=/usr/bin/python3
if [ -x "$qtk_py" ]; then
    "$qtk_py" -c 'import numpy' 2>/dev/null || qtk_need="$qtk_need python3-numpy"
    "$qtk_py" -c 'import pytest' 2>/dev/null || qtk_need="$qtk_need python3-pytest"
    "$qtk_py" -c 'import hypothesis' 2>/dev/null || qtk_need="$qtk_need python3-hypothesis"
    "$qtk_py" -c 'import setuptools' 2>/dev/null || qtk_need="$qtk_need python3-setuptools"
    "$qtk_py" -c 'import wheel' 2>/dev/null || qtk_need="$qtk_need python3-wheel"
    "$qtk_py" -m pip --version >/dev/null 2>&1 || qtk_need="$qtk_need python3-pip"
    [ -f "$("$qtk_py" -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null)/Python.h" ] ||
        qtk_need="$qtk_need python3-dev"
else
    qtk_need="$qtk_need python3 python3-dev python3-numpy python3-pytest python3-hypothesis python3-setuptools python3-wheel python3-pip"
fi

# The Rust crate (rust/qtk), for test.sh only (it sets QTK_DEPS_RUST=1): Debian's cargo and
# rustc (1.63, the crate's rust-version, tested even where a newer toolchain is on PATH) and
# bindgen (the committed bindings are regenerated and compared).
if [ "${QTK_DEPS_RUST:-0}" = 1 ]; then
    [ -x /usr/bin/cargo ] && [ -x /usr/bin/rustdoc ] || qtk_need="$qtk_need cargo rustc"
    command -v bindgen >/dev/null 2>&1 || qtk_need="$qtk_need bindgen"
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
