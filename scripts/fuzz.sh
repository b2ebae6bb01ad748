#!/bin/sh
# fuzz.sh — builds qtk's libFuzzer harnesses (clang, ASan + UBSan, -DQTK_FUZZ=ON in
# build-fuzz/) and runs them.
#
#   scripts/fuzz.sh NAME [SECONDS]   run one harness (default 600 s; 0: no time limit)
#   scripts/fuzz.sh all [SECONDS]    run every harness, as many side by side as there are cores
#                                    (QTK_FUZZ_PARALLEL=N: N; scripts/test.sh: 60 s each), then a
#                                    table: executions, exec/s, coverage, corpus, findings (--all: the same)
#   QTK_FUZZ_RUNS=N scripts/fuzz.sh NAME 0   stop after N executions (the long runs: 10000000)
#   scripts/fuzz.sh --merge NAME|all  minimize what runs found (build-fuzz/corpus/NAME) into the
#                                    checked-in fuzz/corpus/grown/NAME: the inputs that add coverage
#                                    beyond the seeds, 64 KiB at most each
#   scripts/fuzz.sh --seeds          regenerate the checked-in seeds (fuzz/corpus) with qtk's writers
#   scripts/fuzz.sh --list           the harnesses
#   scripts/fuzz.sh --inputs NAME    the corpus directories and real files a run of NAME reads
#
# Harnesses: spec burn_scheme imatrix rules, the fast parsers burnpack_parse safetensors_parse
# gguf_parse hub_parse tensor_bytes, and the deep ones tensor npy burnpack safetensors gguf hub
# (docs/hardening.md says what each checks). Each run starts from fuzz/corpus/FORMAT (small
# seeds, checked in; a fast harness shares its deep one's), fuzz/corpus/grown/NAME (what long
# runs found, minimized), the real files of ../shared/data when they are there (deep harnesses),
# and what earlier runs found (build-fuzz/corpus/NAME, not checked in). Any finding — a crash,
# a sanitizer report, a leak, a violated oracle, an input running over 30 s or 2.5 GB — stops
# the run, is saved under build-fuzz/artifacts/NAME/ and makes the exit status non-zero; the
# message says how to reproduce it. Runs are niced.
# Extra libFuzzer flags: QTK_FUZZ_FLAGS="-jobs=2 -workers=2" scripts/fuzz.sh tensor 3600
set -eu
cd "$(dirname "$0")/.."
all="spec burn_scheme imatrix rules burnpack_parse safetensors_parse gguf_parse hub_parse tensor_bytes tensor npy burnpack safetensors gguf hub"
build="${QTK_FUZZ_BUILD:-build-fuzz}" # another build directory: QTK_FUZZ_BUILD=build-fuzz2
jobs="$(nproc 2>/dev/null || echo 2)"

data=../shared/data
# the checked-in seeds a harness starts from (a fast harness shares its format's) and its
# longest input
seeds_of() { b="${1%_parse}"; echo "fuzz/corpus/${b%_bytes}"; }
max_of() {
    case "$1" in
    spec) echo 400 ;;
    burn_scheme | rules) echo 1024 ;;
    tensor | tensor_bytes) echo 8192 ;;
    imatrix | npy | *_parse) echo 65536 ;;
    *) echo 2097152 ;;
    esac
}
# the real files a deep harness reads whole (their subsets are in fuzz/corpus, which the fast
# ones read with a 64 KiB limit)
real_of() {
    case "$1" in
    burnpack) echo burn/model.bpk ;;
    safetensors) echo burn/mnist.safetensors hub/hadamards.safetensors ;;
    gguf) echo ggml/types.gguf ggml/types_rank3.gguf ;;
    esac
}

case "${1:-}" in
--list) echo "$all"; exit 0 ;;
--inputs)
    # what a run of NAME starts from, one path a line (scripts/coverage.sh replays it)
    name="${2:?--inputs needs a harness}"
    seeds_of "$name"
    for d in "fuzz/corpus/grown/$name" "$build/corpus/$name"; do [ -d "$d" ] && echo "$d"; done
    for f in $(real_of "$name"); do [ -f "$data/$f" ] && echo "$data/$f"; done
    exit 0 ;;
"" | -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
esac

command -v clang >/dev/null 2>&1 || . scripts/deps.sh
cmake -S . -B "$build" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo -DQTK_FUZZ=ON \
    -DQTK_BUILD_TESTS=OFF -DQTK_BUILD_CLI=OFF >/dev/null
cmake --build "$build" -j "$jobs" >/dev/null

if [ "$1" = "--seeds" ]; then
    # the generated seeds are replaced; the grown corpus and the inputs of fixed findings
    # (crash-*, timeout-*, leak-*, oom-*: regression inputs) stay
    for d in fuzz/corpus/*; do
        [ "$d" = fuzz/corpus/grown ] && continue
        find "$d" -type f ! -name 'crash-*' ! -name 'timeout-*' ! -name 'leak-*' ! -name 'oom-*' -delete
    done
    if [ -d "$data" ]; then "$build/fuzz/fuzz_seeds" fuzz/corpus "$data"; else "$build/fuzz/fuzz_seeds" fuzz/corpus; fi
    du -sh fuzz/corpus/*
    exit 0
fi

if [ "$1" = "--merge" ]; then
    case "${2:-all}" in all) names="$all" ;; *) names="$2" ;; esac
    for name in $names; do
        work="$build/corpus/$name" grown="fuzz/corpus/grown/$name" tmp="$build/merge/$name"
        [ -d "$work" ] || continue
        rm -rf "$tmp"
        mkdir -p "$tmp" "$grown"
        cp "$(seeds_of "$name")"/* "$tmp"/
        ls "$tmp" >"$build/merge/$name.seeds"
        # into a copy of the seeds: what the grown corpus and the runs add to them
        "$build/fuzz/fuzz_$name" -merge=1 -max_len="$(max_of "$name")" -timeout=30 -rss_limit_mb=2560 "$tmp" "$grown" "$work" \
            >"$build/merge/$name.log" 2>&1 || { tail -n 20 "$build/merge/$name.log" >&2; exit 1; }
        rm -f "$grown"/*
        for f in "$tmp"/*; do
            b="$(basename "$f")"
            grep -qxF "$b" "$build/merge/$name.seeds" && continue
            [ "$(wc -c <"$f")" -le 65536 ] && mv "$f" "$grown/"
        done
        echo "$name: $(ls "$grown" | wc -l) inputs, $(du -sk "$grown" | cut -f1) KiB in $grown"
    done
    exit 0
fi

secs="${2:-600}"
case "$1" in all | --all) names="$all" ;; *) names="$1" ;; esac
for name in $names; do
    case " $all " in *" $name "*) ;; *) echo "fuzz.sh: no harness '$name' (one of: $all)" >&2; exit 2 ;; esac
done

# run_one NAME: one harness for $secs s; its log in $build/fuzz-NAME.log, its line of the table
# in $build/fuzz-NAME.row; non-zero status on a finding
run_one() {
    name="$1"
    work="$build/corpus/$name" real="$build/real/$name" art="$build/artifacts/$name" grown="fuzz/corpus/grown/$name"
    log="$build/fuzz-$name.log" row="$build/fuzz-$name.row"
    mkdir -p "$work" "$real" "$art" "$grown"
    rm -f "$real"/* "$row"
    seeds="$(seeds_of "$name")" max="$(max_of "$name")"
    for f in $(real_of "$name"); do [ -f "$data/$f" ] && ln -s "$(cd "$data" && pwd)/$f" "$real/$(basename "$f")"; done
    runs=""
    [ -n "${QTK_FUZZ_RUNS:-}" ] && runs="-runs=$QTK_FUZZ_RUNS"
    # -fsanitize=fuzzer reports leaks (LeakSanitizer), sanitizer reports abort (no recovery)
    if ! ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}" \
        nice -n 19 "$build/fuzz/fuzz_$name" -max_total_time="$secs" -max_len="$max" -timeout=30 -rss_limit_mb=2560 \
        -print_final_stats=1 -artifact_prefix="$art/" $runs ${QTK_FUZZ_FLAGS:-} "$work" "$seeds" "$grown" "$real" \
        >"$log" 2>&1; then
        printf '%-18s %12s %9s %7s %8s %7s  %s\n' "$name" - - - - - "FOUND: $log" >"$row"
        return 1
    fi
    # the last status line: executions, coverage (cov: edges, ft: features), corpus
    execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)"
    rate="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)"
    last="$(grep -E '^#[0-9]+' "$log" | tail -n 1)"
    cov="$(echo "$last" | sed -n 's/.* cov: \([0-9]*\).*/\1/p')"
    ft="$(echo "$last" | sed -n 's/.* ft: \([0-9]*\).*/\1/p')"
    corp="$(echo "$last" | sed -n 's/.* corp: \([0-9]*\)\/.*/\1/p')"
    printf '%-18s %12s %9s %7s %8s %7s  %s\n' "$name" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}" none >"$row"
}

# report NAME: what a finished harness did; non-zero status on a finding
report() {
    name="$1" log="$build/fuzz-$1.log" art="$build/artifacts/$1"
    if grep -q FOUND "$build/fuzz-$name.row" 2>/dev/null || [ ! -f "$build/fuzz-$name.row" ]; then
        tail -n 60 "$log" >&2
        echo "fuzz.sh: $name found something (log: $log); reproduce with:" >&2
        for a in "$art"/*; do [ -f "$a" ] && echo "  $build/fuzz/fuzz_$name $a" >&2; done
        return 1
    fi
    grep -E '^#[0-9]+' "$log" | tail -n 1
    grep -E 'stat::number_of_executed_units|stat::peak_rss_mb' "$log" | tr '\n' ' '
    echo
}

# The harnesses run side by side, as many at once as there are cores (QTK_FUZZ_PARALLEL sets it):
# each is one process on one core, so a batch of them takes the time of one. Every harness gets
# its whole $secs s.
par="${QTK_FUZZ_PARALLEL:-$jobs}"
[ "$par" -ge 1 ] 2>/dev/null || par=1
status=0
set -- $names
while [ $# -gt 0 ]; do
    batch=""
    while [ $# -gt 0 ] && [ "$(echo "$batch" | wc -w)" -lt "$par" ]; do batch="$batch $1"; shift; done
    for name in $batch; do
        echo "== fuzz $name for $secs s (seeds: $(seeds_of "$name")$(for f in $(real_of "$name"); do [ -f "$data/$f" ] && { echo ", $data"; break; }; done))"
        run_one "$name" &
    done
    wait
    for name in $batch; do report "$name" || status=1; done
done
if [ "$(echo "$names" | wc -w)" -gt 1 ]; then
    printf '\n%-18s %12s %9s %7s %8s %7s  %s\n' harness executions exec/s cov ft corpus findings
    for name in $names; do cat "$build/fuzz-$name.row" 2>/dev/null || printf '%-18s %12s\n' "$name" "no result"; done
fi
exit "$status"
