#!/bin/sh
# ggml_lattice.sh — ggml's lattice types against qtk's reading of them (docs/lattice.md).
#
#   bench/ggml_lattice.sh GGML_SRC GGML_BUILD OUT_DIR [ROWS COLS SEED]
#
# Builds bench/ggml_lattice.c against a ggml build (shared libraries under GGML_BUILD/src, as
# bench/build.sh wants them), lets ggml quantize made-up weights to every lattice type with an
# importance matrix and write them to OUT_DIR/lattice.gguf with ggml's dequantization beside it,
# then reads that file with qtk (the CLI under build/, or $QTK_BIN): every value must equal
# ggml's bit for bit, and the file must come back byte for byte through .bpk, .safetensors
# and GGUF. Also checks qtk's codebooks against GGML_SRC's (test_lattice with QTK_GGML_SRC).
# Defaults 8 x 512, seed 0; 4 512 1 made tests/data/lattice. Not part of CI.
set -eu
if [ $# -ne 3 ] && [ $# -ne 6 ]; then
    echo "usage: $0 GGML_SRC GGML_BUILD OUT_DIR [ROWS COLS SEED]" >&2
    exit 2
fi
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
src="$(cd "$1" && pwd)"
gb="$(cd "$2" && pwd)"
mkdir -p "$3"
out="$(cd "$3" && pwd)"
shift 3
qtk="${QTK_BIN:-$root/build/qtk}"
"${CC:-cc}" -std=c11 -O2 -Wall -Wextra -I"$src/include" "$here/ggml_lattice.c" -o "$out/ggml_lattice" \
    -L"$gb/src" -lggml -lggml-base -Wl,-rpath,"$gb/src" -lm
"$out/ggml_lattice" "$out" "$@"
"$qtk" convert "$out/lattice.gguf" "$out/qtk_values.safetensors" --scheme none --force >/dev/null
for via in bpk safetensors gguf; do
    "$qtk" convert "$out/lattice.gguf" "$out/via.$via" --force >/dev/null
    "$qtk" convert "$out/via.$via" "$out/back_$via.gguf" --force >/dev/null
    cmp "$out/lattice.gguf" "$out/back_$via.gguf"
    echo "GGUF -> $via -> GGUF: byte-identical"
done
/usr/bin/python3 - "$out" <<'PY'
import json, struct, sys
d = sys.argv[1]
b = open(d + "/qtk_values.safetensors", "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
bad = 0
for name, v in h.items():
    if name == "__metadata__":
        continue
    got = b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]
    want = open("%s/%s.expected.f32" % (d, name), "rb").read()
    k = sum(1 for i in range(0, len(want), 4) if got[i:i + 4] != want[i:i + 4])
    print("%-10s %d of %d values differ from ggml's to_float" % (name, k, len(want) // 4))
    bad += k
sys.exit(1 if bad else 0)
PY
if [ -x "$root/build/tests/test_lattice" ]; then
    QTK_GGML_SRC="$src" "$root/build/tests/test_lattice"
fi
