#!/bin/sh
# test-rust.sh — the Rust crate (rust/qtk) against the Release build tree in build/: the
# committed bindings regenerated with bindgen and compared, `cargo test --offline` with the
# cargo on PATH and again with Debian's rustc (the MSRV, 1.63) when that is another toolchain,
# the two examples, and the program in rust/README.md built as a fresh crate from the README
# alone and compared with `qtk quantize` byte for byte for every scheme family. Run by test.sh
# after the Release build (QTK_BUILD_DIR: another build tree).
set -eu
cd "$(dirname "$0")/.."
repo="$(pwd)"
build="${QTK_BUILD_DIR:-$repo/build}"
[ -f "$build/libqtk_ckpt.a" ] || { echo "test-rust: $build has no libqtk_ckpt.a: build qtk first" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export QTK_BUILD_DIR="$build" QTK_BIN="$build/qtk"

echo "-- bindings: rust/qtk/bindgen.sh regenerates src/sys.rs unchanged"
QTK_INCLUDE="$build/include" rust/qtk/bindgen.sh >"$work/sys.rs"
if ! diff -u rust/qtk/src/sys.rs "$work/sys.rs" >"$work/sys.diff"; then
    echo "test-rust: rust/qtk/src/sys.rs differs from what the headers give; run rust/qtk/bindgen.sh > rust/qtk/src/sys.rs" >&2
    head -40 "$work/sys.diff" >&2
    exit 1
fi

run_suite() { # run_suite LABEL BINDIR TARGET_DIR: cargo, rustc and rustdoc of one toolchain
    echo "-- cargo test --offline with $("$2/rustc" --version) ($1)"
    if ! (cd rust/qtk && RUSTC="$2/rustc" RUSTDOC="$2/rustdoc" CARGO_TARGET_DIR="$3" "$2/cargo" test --offline \
            >"$work/cargo.log" 2>&1); then
        cat "$work/cargo.log" >&2
        echo "test-rust: cargo test failed ($1); rerun: cd rust/qtk && cargo test --offline" >&2
        exit 1
    fi
    grep -E '^test result' "$work/cargo.log" | awk '{ p += $4; f += $6; i += $8 } END { printf "   %d passed, %d failed, %d ignored\n", p, f, i }'
}
bindir="$(dirname "$(command -v cargo)")"
run_suite "the toolchain on PATH" "$bindir" "$build/rust-target"
if [ -x /usr/bin/cargo ] && [ -x /usr/bin/rustdoc ] && [ "$(/usr/bin/rustc --version)" != "$("$bindir/rustc" --version)" ]; then
    run_suite "Debian's: the crate's rust-version" /usr/bin "$build/rust-target-debian"
fi

echo "-- rustdoc: every public item documented, no broken links"
(cd rust/qtk && RUSTDOCFLAGS="-D warnings" CARGO_TARGET_DIR="$build/rust-target" cargo doc --offline --no-deps --quiet) ||
    { echo "test-rust: cargo doc has warnings" >&2; exit 1; }

echo "-- the examples"
(cd rust/qtk && CARGO_TARGET_DIR="$build/rust-target" cargo run --offline --quiet --example burn_q4) >"$work/ex1.txt"
grep -q 'linear.weight \[16, 64\] q4s,block=32:f32 = {"value":"Q4S"' "$work/ex1.txt" ||
    { echo "test-rust: burn_q4 printed:" >&2; cat "$work/ex1.txt" >&2; exit 1; }
if [ -f ../shared/data/burn/model.bpk ]; then
    (cd rust/qtk && CARGO_TARGET_DIR="$build/rust-target" cargo run --offline --quiet --example burn_q4 "$repo/../shared/data/burn/model.bpk") |
        grep -q "fc1.weight \[1600, 128\] F32" || { echo "test-rust: burn_q4 on model.bpk failed" >&2; exit 1; }
fi
(cd rust/qtk && CARGO_TARGET_DIR="$build/rust-target" cargo run --offline --quiet --example nvfp4_gemv 512 1024) >"$work/ex2.txt"
grep -q "Exact (Exact path)" "$work/ex2.txt" || grep -q "Exact (" "$work/ex2.txt" ||
    { echo "test-rust: nvfp4_gemv printed:" >&2; cat "$work/ex2.txt" >&2; exit 1; }

echo "-- a program written from rust/README.md reproduces qtk quantize's bytes"
mkdir -p "$work/readme/src"
printf '[package]\nname = "quantize-raw"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\nqtk = { path = "%s/rust/qtk" }\n' "$repo" >"$work/readme/Cargo.toml"
awk '/<!-- test-rust.sh: main.rs -->/ { grab = 1; next } grab && /^```rust/ { inside = 1; next } inside && /^```/ { exit } inside { print }' \
    rust/README.md >"$work/readme/src/main.rs"
[ -s "$work/readme/src/main.rs" ] || { echo "test-rust: no main.rs block in rust/README.md" >&2; exit 1; }
(cd "$work/readme" && CARGO_TARGET_DIR="$build/rust-target-readme" cargo build --offline --quiet)
prog="$build/rust-target-readme/debug/quantize-raw"
n=0
for spec in q8f q8s q4f q4s q2f q2s e4m3 e5m2 e2m1 "q8s,block=32:f16" "q8f,block=32:f32,store=native" \
    "q4f,block=32:f16" "q4s,block=64:bf16,store=native" "q2s,block=32:f16" "q2f,block=16:f32,store=u32:1" \
    "q4f,block=32:f16,store=packed" "e4m3,block=32:f16" "e5m2,block=32:bf16" "e2m1,block=32:ue8m0" \
    "e5m2,block=16:ue8m0,store=u32:1" "e2m1,block=32:f16,store=native" nvfp4 mxfp4 mxfp8 nf4 \
    "q4f,table=iq4nl,block=32:f32" "q8s,block=*:f32" "q4s,block=*x1:f16" "q4f,block=4x8:f16" \
    "e2m1,block=16:ue4m3,tensor=f32,store=packed:1" "q4s,block=16:f16,tensor=f32" "q8s,block=32:ue4m3,tensor=f32" \
    q4_0 q8_0 q4_1 q5_0 q5_1 q2_k q3_k q4_k q5_k q6_k iq4_nl "u4,block=128:f16,zero=u8" "u4,block=32:f16,min=f16"; do
    n=$((n + 1))
    /usr/bin/python3 -c "
import numpy as np, sys
r = np.random.default_rng($n)
x = (r.standard_normal((8, 512)) * 0.02).astype(np.float32); x[0, :4] = [0.0, -0.0, 0.5, 1.3]
np.save(sys.argv[1], x); x.tofile(sys.argv[2])" "$work/x.npy" "$work/x.f32"
    QTK_ISA=scalar "$build/qtk" quantize --force --scheme "$spec" "$work/x.npy" "$work/ref.bin" >/dev/null
    "$prog" "$spec" 8x512 "$work/x.f32" "$work/out.bin" >/dev/null
    cmp -s "$work/ref.bin" "$work/out.bin" || { echo "test-rust: the README program's bytes differ from qtk quantize's for $spec" >&2; exit 1; }
done
echo "test-rust: bindings unchanged; cargo tests passed; examples ran; the README program matched the CLI on $n schemes"
