#!/bin/sh
# test-install.sh — installs qtk into a temporary prefix with a multiarch libdir (as Debian
# lays it out), then builds and runs examples/ against it the two ways a downstream project
# does: find_package(qtk) and pkg-config; then pip-installs the Python package from python/
# against that prefix and runs its tests on the installed copy. Run by test.sh.
set -eu
cd "$(dirname "$0")/.."
jobs="$(nproc 2>/dev/null || echo 2)"
multiarch="$(cc -print-multiarch 2>/dev/null || true)"
libdir="lib${multiarch:+/$multiarch}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"

cmake -S . -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DQTK_BUILD_TESTS=OFF -DQTK_BUILD_PYTHON=OFF \
    -DCMAKE_INSTALL_LIBDIR="$libdir" >/dev/null
cmake --build "$work/build" -j "$jobs" >/dev/null
cmake --install "$work/build" --prefix "$prefix" >/dev/null
for f in include/qtk.h include/qtk_ckpt.h include/qtk_matmul.h include/qtk_version.h bin/qtk \
         "$libdir/libqtk.so" "$libdir/libqtk_ckpt.so" "$libdir/libqtk.a" "$libdir/libqtk_ckpt.a" \
         "$libdir/cmake/qtk/qtkConfig.cmake" "$libdir/cmake/qtk/qtkConfigVersion.cmake" \
         "$libdir/pkgconfig/qtk.pc" "$libdir/pkgconfig/qtk-ckpt.pc"; do
    [ -e "$prefix/$f" ] || { echo "test-install: $f was not installed" >&2; exit 1; }
done
"$prefix/bin/qtk" synth "$work/m.safetensors" --layers 1 --hidden 32 --ffn 64 --kv 16 --vocab 64 >/dev/null
printf 'not a checkpoint\n' >"$work/junk.txt"

check() { # check NAME BINARY: lists the model, refuses the junk with qtk's message
    out="$("$2" "$work/m.safetensors")"
    echo "$out" | grep -q "^model.layers.0.mlp.down_proj.weight	BF16	32x64$" ||
        { echo "test-install: $1: unexpected listing:" >&2; echo "$out" >&2; exit 1; }
    if "$2" "$work/junk.txt" 2>"$work/err"; then echo "test-install: $1 accepted a non-checkpoint" >&2; exit 1; fi
    grep -q "is not a checkpoint qtk reads" "$work/err" ||
        { echo "test-install: $1: no qtk message on stderr:" >&2; cat "$work/err" >&2; exit 1; }
}

# find_package(qtk)
cmake -S examples -B "$work/ex" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/ex" -j "$jobs" >/dev/null
check "find_package" "$work/ex/ckpt_list"
"$work/ex/quantize_matmul" >/dev/null
"$work/ex/quantize_matmul" 'q4f,block=32:f16' >/dev/null

# pkg-config, shared and static
export PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig"
cc -std=c11 -o "$work/ckpt_list_pc" examples/ckpt_list.c $(pkg-config --cflags --libs qtk-ckpt) \
    -Wl,-rpath,"$(pkg-config --variable=libdir qtk-ckpt)"
check "pkg-config" "$work/ckpt_list_pc"
# the static libraries, with what pkg-config says they need beside them
lib="$(pkg-config --variable=libdir qtk)"
cc -std=c11 -o "$work/qm_static" examples/quantize_matmul.c $(pkg-config --cflags qtk) "$lib/libqtk.a" \
    $(pkg-config --libs-only-other --libs-only-l --static qtk | sed 's/-lqtk\b//')
"$work/qm_static" >/dev/null
cc -std=c11 -o "$work/ckpt_list_static" examples/ckpt_list.c $(pkg-config --cflags qtk-ckpt) "$lib/libqtk_ckpt.a" \
    "$lib/libqtk.a" $(pkg-config --libs libcbor jansson) $(pkg-config --libs-only-other --libs-only-l --static qtk | sed 's/-lqtk\b//')
check "static libraries" "$work/ckpt_list_static"
# the headers also compile as C++ (extern "C"), where a C++ compiler is at hand
if command -v c++ >/dev/null 2>&1; then
    printf '#include <qtk.h>\n#include <qtk_matmul.h>\n#include <qtk_ckpt.h>\nint main() { return qtk_version() ? 0 : 1; }\n' >"$work/h.cc"
    c++ -std=c++11 -Wall -Werror -fsyntax-only $(pkg-config --cflags qtk-ckpt) "$work/h.cc"
fi

# the Python package: pip finds the installed qtk through pkg-config (static libraries linked
# in), into a directory of its own; the tests then run on that copy, not the build tree's.
# pip builds in its source directory, so it gets a copy of python/.
py=/usr/bin/python3
cp -R python "$work/pysrc"
rm -rf "$work/pysrc/build" "$work/pysrc"/*.egg-info
"$py" -m pip install --no-build-isolation --no-deps --no-index --disable-pip-version-check --quiet \
    --target "$work/site" "$work/pysrc" >"$work/pip.log" 2>&1 ||
    { echo "test-install: pip install of python/ failed:" >&2; cat "$work/pip.log" >&2; exit 1; }
for f in qtk/__init__.py qtk/_qtk.pyi qtk/py.typed; do
    [ -e "$work/site/$f" ] || { echo "test-install: pip did not install $f" >&2; exit 1; }
done
ls "$work/site"/qtk/_qtk.*.so >/dev/null
(cd "$work" && PYTHONPATH="$work/site" "$py" -c 'import qtk, sys; assert qtk.__file__.startswith(sys.argv[1]), qtk.__file__' "$work/site")
repo="$(pwd)"
(cd "$work" && PYTHONPATH="$work/site" PYTHONDONTWRITEBYTECODE=1 QTK_BIN="$prefix/bin/qtk" \
    "$py" -m pytest -q -p no:cacheprovider "$repo/python/tests" >"$work/pytest.log" 2>&1) ||
    { echo "test-install: the Python tests failed on the pip-installed package:" >&2; cat "$work/pytest.log" >&2; exit 1; }
tail -1 "$work/pytest.log"

# the Rust crate found the three ways build.rs looks for an installed qtk: QTK_DIR (static),
# pkg-config (shared, with QTK_LINK=shared: the binary then needs libqtk_ckpt.so, found by
# its rpath), QTK_LIB_DIR; each builds and runs the burn_q4 example (the build tree is hidden)
if command -v cargo >/dev/null 2>&1; then
    cp -R rust "$work/rust"
    rm -rf "$work/rust/qtk/target"
    for how in dir pkg-config lib-dir; do
        case "$how" in
        dir) env="QTK_DIR=$prefix" ;;
        pkg-config) env="QTK_LINK=shared" ;;
        lib-dir) env="QTK_LIB_DIR=$prefix/$libdir" ;;
        esac
        (cd "$work/rust/qtk" && env $env QTK_BUILD_DIR=/nonexistent CARGO_TARGET_DIR="$work/rust-$how" \
            cargo run --offline --quiet --example burn_q4 >"$work/rust.log" 2>&1) ||
            { echo "test-install: the Rust crate did not build against the installed qtk ($how):" >&2; cat "$work/rust.log" >&2; exit 1; }
        grep -q "linear.weight" "$work/rust.log" || { echo "test-install: burn_q4 ($how):" >&2; cat "$work/rust.log" >&2; exit 1; }
    done
    ldd "$work/rust-pkg-config/debug/examples/burn_q4" | grep -q "libqtk_ckpt.so" ||
        { echo "test-install: QTK_LINK=shared did not link libqtk_ckpt.so" >&2; exit 1; }
    if ldd "$work/rust-dir/debug/examples/burn_q4" | grep -q "libqtk"; then
        echo "test-install: the static Rust build needs a qtk library at run time" >&2; exit 1
    fi
    # nothing found (where no qtk is installed system-wide): a build error naming what to install
    if env -u PKG_CONFIG_PATH pkg-config --exists qtk-ckpt; then :; elif (cd "$work/rust/qtk" && env -u PKG_CONFIG_PATH QTK_BUILD_DIR=/nonexistent CARGO_TARGET_DIR="$work/rust-none" \
            cargo build --offline --quiet >"$work/rust.log" 2>&1); then
        echo "test-install: the Rust crate built with no qtk to find" >&2; exit 1
    elif ! grep -q "libqtk_ckpt and libqtk (static) were not found" "$work/rust.log"; then
        echo "test-install: no clear build error without qtk:" >&2; cat "$work/rust.log" >&2; exit 1
    fi
fi

echo "test-install: installed to a $libdir prefix; examples built and run through find_package and pkg-config;"
echo "test-install: the Python package pip-installed against it and tested; the Rust crate built against it"
