#!/bin/sh
# arm_insn.sh — instructions per element (quantize, dequantize) and per weight (GEMV) of the
# AArch64 build at each of its levels, counted exactly under qemu-user. bench/arm_insn_driver.c
# repeats one operation; the guest instructions executed (bench/qemu_insn_count.py) with two
# repetitions minus those with one leave the operation alone, without start-up or set-up.
# Speed on a real ARM core is not measured (no ARM machine here): the counts say how much work
# each level asks of one, and are the same on every run.
#
#   bench/arm_insn.sh [BUILD_ARM64]      (default build-arm64, as scripts/test-arm64.sh leaves it)
#
# Levels: scalar (the reference), portable (C vectors), neon on qemu's 'max' CPU (with the
# dot product: sdot) and neon on a Cortex-A72 (without: smull/sadalp). W is 16 x 4096.
set -eu
here="$(cd "$(dirname "$0")" && pwd)"
build="$(cd "${1:-$here/../build-arm64}" && pwd)"
qemu="$(command -v qemu-aarch64-static || command -v qemu-aarch64)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
aarch64-linux-gnu-gcc -std=c11 -O2 -I"$here/../include" -I"$build/include" "$here/arm_insn_driver.c" \
    -o "$work/driver" "$build/libqtk.a" -lm -lpthread
N=16 K=4096
count() { # count CPU ISA OP SPEC REPS: guest instructions of one driver run
    QEMU_CPU="$1" QTK_ISA="$2" "$qemu" -d in_asm,exec,nochain -D "$work/log" "$work/driver" "$3" "$4" $N $K "$5" >/dev/null
    python3 "$here/qemu_insn_count.py" "$work/log"
}
per() { # per CPU ISA OP SPEC: instructions per element or weight
    c1=$(count "$1" "$2" "$3" "$4" 1)
    c2=$(count "$1" "$2" "$3" "$4" 2)
    python3 -c "print('%.2f' % (($c2 - $c1) / ($N * $K)))"
}
printf '| operation | scheme | scalar | portable | neon (sdot) | neon, Cortex-A72 (no sdot) |\n'
printf '|---|---|---|---|---|---|\n'
for op in quantize dequantize gemv-exact gemv-fast; do
    for spec in 'q4f,block=32:f16' 'q8s,block=32:f16' nvfp4 'q4f,table=iq4nl,block=32:f16' 'q2s,block=256:f16'; do
        case "$op:$spec" in gemv-fast:nvfp4) continue ;; esac
        printf '| %s | %s | %s | %s | %s | %s |\n' "$op" "$spec" \
            "$(per max scalar "$op" "$spec")" "$(per max portable "$op" "$spec")" \
            "$(per max neon "$op" "$spec")" "$(per cortex-a72 neon "$op" "$spec")"
    done
done
