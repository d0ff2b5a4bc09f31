#!/usr/bin/env bash
# format.sh — every tracked C file is as clang-format (.clang-format, clang-format 14) writes it,
# except generated tables whose first lines say "do not edit" (the same set `make format` uses).
# The same files also keep every line within 100 characters (.editorconfig; UTF-8 characters,
# not bytes): clang-format does not break comments and string literals, so this is checked on
# its own (python3) and runs with or without clang-format.
# First a deliberately misformatted file and a 101-character line must be rejected (a check
# that cannot fail tests nothing). Exits 77 (skipped) without clang-format once the line check
# has passed (scripts/install_deps.sh installs clang-format).
# Usage: bash tests/repo/format.sh [ROOT] (default: the repository holding this script).
set -u
ROOT=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
WIDTH=100
cd "$ROOT" || exit 1
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT

long_lines() {  # long_lines FILE... -> prints every line over WIDTH characters, 1 if any
    python3 -c '
import sys
width, bad = int(sys.argv[1]), 0
for path in sys.argv[2:]:
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            n = len(line.rstrip("\n"))
            if n > width:
                print("%s:%d: %d characters (limit %d)" % (path, i, n, width))
                bad = 1
sys.exit(bad)
' "$WIDTH" "$@"
}

files=$( (git ls-files '*.c' '*.h' 2>/dev/null || find include src tools tests bench fuzz -name '*.[ch]') |
        xargs grep -L -m1 'do not edit')

# self-test: a line of 100 two-byte characters passes, one of 101 does not
python3 -c 'print("/* " + "\u00e9" * 94 + " */")' > "$tmp/ok.c"
python3 -c 'print("/* " + "\u00e9" * 95 + " */")' > "$tmp/long.c"
if ! long_lines "$tmp/ok.c" >/dev/null; then
    echo "format: a line of $WIDTH characters was refused (bytes counted?)"; exit 1
fi
if long_lines "$tmp/long.c" >/dev/null; then
    echo "format: a line of $((WIDTH + 1)) characters passed the check"; exit 1
fi
if ! long_lines $files; then
    echo "format: rewrap the lines above to $WIDTH characters (clang-format leaves comments and" \
         "string literals as they are)"; exit 1
fi

CF=$(command -v clang-format-14 || command -v clang-format) || {
    echo "format: lines within $WIDTH characters; clang-format not installed: skipped"; exit 77; }
cp .clang-format "$tmp/" && printf 'int f(int x){if(x) {return 1;}\n  return 0;}\n' >"$tmp/bad.c"
if (cd "$tmp" && "$CF" --dry-run --Werror bad.c 2>/dev/null); then
    echo "format: a misformatted file passed the check"; exit 1
fi

if ! "$CF" --dry-run --Werror $files; then
    echo "format: run \`make format\` (clang-format) on the files above"; exit 1
fi
echo "format: $(echo "$files" | wc -w) files as clang-format writes them, lines within $WIDTH"
