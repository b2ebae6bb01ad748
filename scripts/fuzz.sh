#!/bin/sh
# fuzz.sh — builds qtk's libFuzzer harnesses (clang, ASan + UBSan, -DQTK_FUZZ=ON in
# build-fuzz/) and runs them.
#
#   scripts/fuzz.sh NAME [SECONDS]   run one harness (default 600 s)
#   scripts/fuzz.sh all [SECONDS]    run every harness in turn (scripts/test.sh: 60 s each), then a
#                                    table: executions, exec/s, coverage, corpus, findings (--all: the same)
#   scripts/fuzz.sh --seeds          regenerate the checked-in seeds (fuzz/corpus) with qtk's writers
#   scripts/fuzz.sh --list           the harnesses
#
# Harnesses: spec burn_scheme imatrix rules, the fast parsers burnpack_parse safetensors_parse gguf_parse,
# and the deep ones tensor npy burnpack safetensors gguf hub (docs/hardening.md says what each
# checks). Each run starts from fuzz/corpus/NAME (small seeds, checked in), the real files of
# ../shared/data when they are there, and what earlier runs found (build-fuzz/corpus/NAME,
# not checked in). Any finding — a crash, a sanitizer report, a leak, a violated oracle, an
# input running over 30 s or 2.5 GB — stops the run, is saved under build-fuzz/artifacts/NAME/
# and makes the exit status non-zero; the message says how to reproduce it. Runs are niced.
# Extra libFuzzer flags: QTK_FUZZ_FLAGS="-jobs=2 -workers=2" scripts/fuzz.sh tensor 3600
set -eu
cd "$(dirname "$0")/.."
all="spec burn_scheme imatrix rules burnpack_parse safetensors_parse gguf_parse tensor npy burnpack safetensors gguf hub"
build="${QTK_FUZZ_BUILD:-build-fuzz}" # another build directory: QTK_FUZZ_BUILD=build-fuzz2
jobs="$(nproc 2>/dev/null || echo 2)"

case "${1:-}" in
--list) echo "$all"; exit 0 ;;
"" | -h | --help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac

command -v clang >/dev/null 2>&1 || . scripts/deps.sh
cmake -S . -B "$build" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo -DQTK_FUZZ=ON \
    -DQTK_BUILD_TESTS=OFF -DQTK_BUILD_CLI=OFF >/dev/null
cmake --build "$build" -j "$jobs" >/dev/null

data=../shared/data
if [ "$1" = "--seeds" ]; then
    rm -rf fuzz/corpus
    if [ -d "$data" ]; then "$build/fuzz/fuzz_seeds" fuzz/corpus "$data"; else "$build/fuzz/fuzz_seeds" fuzz/corpus; fi
    du -sh fuzz/corpus/*
    exit 0
fi

secs="${2:-600}"
case "$1" in all | --all) names="$all" ;; *) names="$1" ;; esac
status=0
table=""
for name in $names; do
    case " $all " in *" $name "*) ;; *) echo "fuzz.sh: no harness '$name' (one of: $all)" >&2; exit 2 ;; esac
    work="$build/corpus/$name" real="$build/real/$name" art="$build/artifacts/$name"
    mkdir -p "$work" "$real" "$art"
    rm -f "$real"/*
    # the real files, whole (their subsets are in fuzz/corpus); a parser harness shares its
    # format's seeds
    seeds="fuzz/corpus/${name%_parse}"
    case "$name" in
    burnpack | burnpack_parse) files="burn/model.bpk" ;;
    safetensors | safetensors_parse) files="burn/mnist.safetensors hub/hadamards.safetensors" ;;
    gguf | gguf_parse) files="ggml/types.gguf ggml/types_rank3.gguf" ;;
    *) files="" ;;
    esac
    for f in $files; do [ -f "$data/$f" ] && ln -s "$(cd "$data" && pwd)/$f" "$real/$(basename "$f")"; done
    case "$name" in
    spec) max=400 ;;
    burn_scheme | rules) max=1024 ;;
    imatrix) max=65536 ;;
    tensor) max=8192 ;;
    npy) max=65536 ;;
    *) max=2097152 ;;
    esac
    echo "== fuzz $name for $secs s (seeds: $seeds$( [ -n "$(ls "$real")" ] && echo ", $data"))"
    # -fsanitize=fuzzer reports leaks (LeakSanitizer), sanitizer reports abort (no recovery)
    if ! ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}" \
        nice -n 19 "$build/fuzz/fuzz_$name" -max_total_time="$secs" -max_len="$max" -timeout=30 -rss_limit_mb=2560 \
        -print_final_stats=1 -artifact_prefix="$art/" ${QTK_FUZZ_FLAGS:-} "$work" "$seeds" "$real" \
        >"$build/fuzz-$name.log" 2>&1; then
        status=1
        table="$table$(printf '%-18s %12s %9s %7s %8s %7s  %s' "$name" - - - - - "FOUND: $build/fuzz-$name.log")
"
        tail -n 60 "$build/fuzz-$name.log" >&2
        echo "fuzz.sh: $name found something (log: $build/fuzz-$name.log); reproduce with:" >&2
        for a in "$art"/*; do [ -f "$a" ] && echo "  $build/fuzz/fuzz_$name $a" >&2; done
    else
        # the last status line: executions, coverage (cov: edges, ft: features), corpus
        grep -E '^#[0-9]+' "$build/fuzz-$name.log" | tail -n 1
        grep -E 'stat::number_of_executed_units|stat::peak_rss_mb' "$build/fuzz-$name.log" | tr '\n' ' '
        echo
        execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$build/fuzz-$name.log" | tail -n 1)"
        last="$(grep -E '^#[0-9]+' "$build/fuzz-$name.log" | tail -n 1)"
        cov="$(echo "$last" | sed -n 's/.* cov: \([0-9]*\).*/\1/p')"
        ft="$(echo "$last" | sed -n 's/.* ft: \([0-9]*\).*/\1/p')"
        corp="$(echo "$last" | sed -n 's/.* corp: \([0-9]*\)\/.*/\1/p')"
        table="$table$(printf '%-18s %12s %9s %7s %8s %7s  %s' "$name" "${execs:-?}" "$(( ${execs:-0} / secs ))" \
            "${cov:-?}" "${ft:-?}" "${corp:-?}" none)
"
    fi
done
if [ "$(echo "$names" | wc -w)" -gt 1 ]; then
    printf '\n%-18s %12s %9s %7s %8s %7s  %s\n' harness executions exec/s cov ft corpus findings
    printf '%s' "$table"
fi
exit "$status"
