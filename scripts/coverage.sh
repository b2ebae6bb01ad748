#!/bin/sh
# coverage.sh — the line coverage the fuzz corpus reaches in each parser file.
#
#   scripts/coverage.sh            build the harnesses with clang's source-based coverage (in
#                                  build-cov/), replay every harness's corpus once, print per file
#                                  the lines, functions and regions reached, and a table of the
#                                  parser files
#   scripts/coverage.sh --html DIR the same, and llvm-cov's annotated source in DIR
#
# The corpus replayed is what fuzz.sh reads: the checked-in seeds (fuzz/corpus/FORMAT), what
# long runs found (fuzz/corpus/grown/NAME), the real files of ../shared/data where they are,
# and build-fuzz/corpus/NAME when earlier runs left it. Each input is run once (-runs=0), so the
# figure is what the corpus reaches, not what a run would find next. Not part of CI.
set -eu
cd "$(dirname "$0")/.."
build="${QTK_COV_BUILD:-build-cov}"
html=""
case "${1:-}" in
--html) html="${2:?--html needs a directory}" ;;
-h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
"") ;;
*) echo "coverage.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
esac

command -v clang >/dev/null 2>&1 || . scripts/deps.sh
ver="$(clang --version | sed -n 's/.*clang version \([0-9]*\).*/\1/p' | head -n 1)"
profdata="$(command -v "llvm-profdata-$ver" || command -v llvm-profdata)"
llvmcov="$(command -v "llvm-cov-$ver" || command -v llvm-cov)"
cmake -S . -B "$build" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo -DQTK_FUZZ=ON \
    -DQTK_BUILD_TESTS=OFF -DQTK_BUILD_CLI=OFF \
    "-DCMAKE_C_FLAGS=-fprofile-instr-generate -fcoverage-mapping" \
    "-DCMAKE_EXE_LINKER_FLAGS=-fprofile-instr-generate" >/dev/null
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" >/dev/null

all="$(scripts/fuzz.sh --list)"
prof="$build/profiles"
rm -rf "$prof"
mkdir -p "$prof"
objects=""
for name in $all; do
    # what fuzz.sh reads for it: the directories in one pass, the real files one by one
    dirs="" files=""
    for i in $(scripts/fuzz.sh --inputs "$name"); do
        if [ -d "$i" ]; then [ -n "$(ls "$i")" ] && dirs="$dirs $i"; else files="$files $i"; fi
    done
    # libFuzzer runs each input of the directories once and stops (-runs=0); files given
    # by name it runs as they are
    # shellcheck disable=SC2086
    LLVM_PROFILE_FILE="$prof/$name-%p.profraw" ASAN_OPTIONS=detect_leaks=0 \
        "$build/fuzz/fuzz_$name" -runs=0 -max_len=2097152 -timeout=60 $dirs >"$prof/$name.log" 2>&1 ||
        { tail -n 20 "$prof/$name.log" >&2; echo "coverage.sh: $name failed on its corpus" >&2; exit 1; }
    if [ -n "$files" ]; then
        # shellcheck disable=SC2086
        LLVM_PROFILE_FILE="$prof/$name-real-%p.profraw" ASAN_OPTIONS=detect_leaks=0 \
            "$build/fuzz/fuzz_$name" $files >>"$prof/$name.log" 2>&1
    fi
    n="$(sed -n 's/.*INITED.*corp: \([0-9]*\)\/.*/\1/p' "$prof/$name.log" | tail -n 1)"
    # shellcheck disable=SC2086
    echo "$name: $(find $dirs -type f | wc -l) inputs replayed (${n:-?} kept by libFuzzer)${files:+, and$files}"
    objects="$objects -object $build/fuzz/fuzz_$name"
done
"$profdata" merge -sparse "$prof"/*.profraw -o "$prof/all.profdata"

# the parser files: what reads bytes a user hands qtk
parsers="src/burnpack/ src/safetensors/ src/gguf/gguf.c src/gguf/gguf_kv.c src/gguf/gguf_types.c src/gguf/gguf_import.c \
src/hub/ src/io/desc.c src/io/elem.c src/io/checkpoint.c src/ckpt/open.c src/ckpt/access.c src/scheme/spec.c \
src/ops/imatrix.c src/ops/select.c src/tensor/tensor.c"
# shellcheck disable=SC2086
"$llvmcov" report $objects -instr-profile="$prof/all.profdata" -ignore-filename-regex='fuzz/|tests/|_write\.c|_export\.c|writer\.c' \
    >"$prof/report.txt"
echo
printf '%-34s %8s %8s %7s\n' file lines missed cover
for p in $parsers; do
    grep -E "^(\./)?$p" "$prof/report.txt" || true
done | awk '{ printf "%-34s %8s %8s %7s\n", $1, $8, $9, $10; l += $8; m += $9 }
    END { if (l) printf "%-34s %8d %8d %6.2f%%\n", "parser files", l, m, 100 * (l - m) / l }'
echo "(per file, all columns: $prof/report.txt)"
if [ -n "$html" ]; then
    # shellcheck disable=SC2086
    "$llvmcov" show $objects -instr-profile="$prof/all.profdata" -format=html -output-dir="$html" \
        -ignore-filename-regex='fuzz/|tests/'
    echo "annotated source: $html/index.html"
fi
