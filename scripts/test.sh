#!/bin/sh
# test.sh — builds qtk and runs every test: the layout check, optimised (Release) on the best
# kernel level and on the portable reference, under AddressSanitizer + UndefinedBehaviorSanitizer
# (GCC, then clang with its extra checks), the libFuzzer harnesses for a bounded time each
# (QTK_FUZZ_SECONDS, 60 by default), the aarch64 cross build under qemu-user (scripts/test-arm64.sh),
# an installed package used by the examples, and the Rust crate against the Release build
# (scripts/test-rust.sh).
set -eu
cd "$(dirname "$0")/.."
QTK_DEPS_RUST=1
. scripts/deps.sh
jobs="$(nproc 2>/dev/null || echo 2)"

echo "== layout: the rooms of src/ include each other one way; the CLI uses the public headers"
./scripts/check-layout.sh

echo "== Release build and tests (the best kernel level this CPU runs)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$jobs" >/dev/null
ctest --test-dir build --output-on-failure -j "$jobs"

echo "== the same tests on the portable reference kernels (QTK_ISA=scalar)"
QTK_ISA=scalar ctest --test-dir build --output-on-failure -j "$jobs"

echo "== the Rust crate (rust/qtk): bindings regenerated, cargo test --offline (current toolchain and rustc 1.63), examples, the README's program"
./scripts/test-rust.sh

echo "== AddressSanitizer + UndefinedBehaviorSanitizer build and tests"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DQTK_SANITIZE=ON >/dev/null
cmake --build build-asan -j "$jobs" >/dev/null
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j "$jobs"

echo "== the same with clang: its undefined group adds array-bounds; also implicit conversions, nullability, ..."
cmake -S . -B build-clang -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug -DQTK_SANITIZE=ON >/dev/null
cmake --build build-clang -j "$jobs" >/dev/null
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-clang --output-on-failure -j "$jobs"

echo "== ThreadSanitizer: the tests whose work is split across threads (matmul, quantize/dequantize, mse, the lattice search and its tables built once)"
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS="-fsanitize=thread -O1" \
    -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread \
    -DQTK_BUILD_PYTHON=OFF >/dev/null
cmake --build build-tsan -j "$jobs" --target test_matmul test_roundtrip test_simd test_mse test_lattice >/dev/null
TSAN_OPTIONS=halt_on_error=1 ctest --test-dir build-tsan --output-on-failure -j "$jobs" -R '^(matmul|roundtrip|simd|mse|lattice)$'

echo "== libFuzzer harnesses (clang, ASan + UBSan), ${QTK_FUZZ_SECONDS:-60} s each: any finding fails"
./scripts/fuzz.sh all "${QTK_FUZZ_SECONDS:-60}"

echo "== aarch64: cross-compiled with warnings as errors, the suite under qemu-aarch64 (neon with sdot, the kernel tests without it, QTK_ISA=scalar)"
./scripts/test-arm64.sh

echo "== install into a multiarch prefix; examples/ built against it (find_package, pkg-config)"
./scripts/test-install.sh

echo "== all tests passed"
