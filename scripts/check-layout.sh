#!/bin/sh
# check-layout.sh — the rooms of src/ include each other in one direction only (no cycle),
# and the CLI and the Python extension include nothing but the public headers and their own.
# Run by test.sh.
set -eu
cd "$(dirname "$0")/.."
edges=$(mktemp)
trap 'rm -f "$edges"' EXIT
for f in src/*/*.c src/*/*.h; do
    room=$(basename "$(dirname "$f")")
    # "room/file.h" (rooted at src/) or "../room/file.h" (relative); a bare "file.h" is the room's own
    sed -n 's/^#[ \t]*include[ \t]*"\(\.\.\/\)\{0,1\}\([a-z_0-9]*\)\/[^"]*".*/\2/p' "$f" | while read -r dep; do
        [ "$dep" = "$room" ] || echo "$dep $room"
    done
done | sort -u >"$edges"
status=0
if ! tsort "$edges" >/dev/null 2>&1; then
    echo "check-layout: the rooms of src/ include each other in a cycle:" >&2
    tsort "$edges" 2>&1 >/dev/null | sed 's/^/  /' >&2
    status=1
fi
bad=$(awk '$2 == "cli" { print "  src/cli includes " $1 "/" }' "$edges")
if [ -n "$bad" ]; then
    echo "check-layout: the CLI must use the public headers only:" >&2
    echo "$bad" >&2
    status=1
fi
bad=$(grep -n '^#[ \t]*include[ \t]*"' python/src/*.c python/src/*.h | grep -v -E '"(qtk|qtk_ckpt|qtk_matmul|qtkpy)\.h"' || true)
if [ -n "$bad" ]; then
    echo "check-layout: the Python extension must use the public headers only:" >&2
    echo "$bad" | sed 's/^/  /' >&2
    status=1
fi
[ "$status" -eq 0 ] && echo "check-layout: $(wc -l <"$edges") include edges between the rooms of src/, no cycle; the CLI and python/src use the public headers only"
exit "$status"
