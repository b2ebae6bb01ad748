#!/bin/sh
# test.sh — builds qtk and runs every test: optimised (Release) on the best kernel level
# and on the portable reference, then under AddressSanitizer + UndefinedBehaviorSanitizer.
set -eu
cd "$(dirname "$0")/.."
. scripts/deps.sh
jobs="$(nproc 2>/dev/null || echo 2)"

echo "== Release build and tests (the best kernel level this CPU runs)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$jobs" >/dev/null
ctest --test-dir build --output-on-failure -j "$jobs"

echo "== the same tests on the portable reference kernels (QTK_ISA=scalar)"
QTK_ISA=scalar ctest --test-dir build --output-on-failure -j "$jobs"

echo "== AddressSanitizer + UndefinedBehaviorSanitizer build and tests"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DQTK_SANITIZE=ON >/dev/null
cmake --build build-asan -j "$jobs" >/dev/null
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j "$jobs"
echo "== all tests passed"
