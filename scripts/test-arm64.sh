#!/bin/sh
# test-arm64.sh — qtk for 64-bit ARM: cross-compiled with Debian's gcc-aarch64-linux-gnu
# (libraries, CLI and tests, warnings as errors, against the arm64 libcbor/jansson), and the
# whole ctest suite run under qemu-aarch64 (qemu-user-static) at the best level the emulated
# CPU has (qemu's default CPU, 'max', has NEON and the dot product: the neon level with sdot),
# the kernel tests again on a Cortex-A72 (NEON without the dot product), and the suite on the
# reference kernels (QTK_ISA=scalar). The tests assert the same values as on x86 (exact
# oracles, SPEC's byte layouts, bit identity between levels), so a pass means the ARM build
# gives x86's bits.
# Installs what it needs when missing (root or sudo; adds the arm64 architecture to dpkg).
# Run by test.sh; QTK_ARM64_BUILD_DIR sets the build tree (default build-arm64).
set -eu
cd "$(dirname "$0")/.."
build="${QTK_ARM64_BUILD_DIR:-build-arm64}"
jobs="$(nproc 2>/dev/null || echo 2)"

need=""
command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || need="$need gcc-aarch64-linux-gnu libc6-dev-arm64-cross"
command -v qemu-aarch64-static >/dev/null 2>&1 || command -v qemu-aarch64 >/dev/null 2>&1 || need="$need qemu-user-static"
[ -f /usr/lib/aarch64-linux-gnu/pkgconfig/libcbor.pc ] || need="$need libcbor-dev:arm64"
[ -f /usr/lib/aarch64-linux-gnu/pkgconfig/jansson.pc ] || need="$need libjansson-dev:arm64"
if [ -n "$need" ]; then
    echo "test-arm64: installing:$need" >&2
    if [ "$(id -u)" -eq 0 ]; then SUDO=""; elif command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
        echo "test-arm64: need root (or sudo) to apt-get install:$need" >&2
        exit 1
    fi
    dpkg --print-foreign-architectures | grep -qx arm64 || $SUDO dpkg --add-architecture arm64
    $SUDO apt-get update -qq
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $need >/dev/null
fi

echo "-- cross build ($build: Release, -Werror, cmake/aarch64-linux-gnu.cmake)"
cmake -S . -B "$build" -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DCMAKE_BUILD_TYPE=Release \
    -DQTK_WERROR=ON -DQTK_BUILD_PYTHON=OFF >/dev/null
cmake --build "$build" -j "$jobs" >/dev/null
# ELF e_machine 183: AArch64
[ "$(od -An -tu2 -j18 -N2 "$build/qtk" | tr -d ' ')" = 183 ] || { echo "test-arm64: $build/qtk is not an aarch64 program" >&2; exit 1; }

echo "-- ctest under qemu-aarch64 (its default CPU, 'max': NEON with the dot product), the best level"
ctest --test-dir "$build" --output-on-failure -j "$jobs"
echo "-- the kernel tests on a CPU without the dot product (QEMU_CPU=cortex-a72: NEON's smull/sadalp path)"
QEMU_CPU=cortex-a72 ctest --test-dir "$build" --output-on-failure -j "$jobs" -R '^(simd|matmul|matmul_store|affine|mse|roundtrip)$'
echo "-- ctest under qemu-aarch64, the reference kernels (QTK_ISA=scalar)"
QTK_ISA=scalar ctest --test-dir "$build" --output-on-failure -j "$jobs"
