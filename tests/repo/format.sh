#!/usr/bin/env bash
# format.sh — every tracked C file is as clang-format (.clang-format, clang-format 14) writes it,
# except generated tables whose first lines say "do not edit" (the same set `make format` uses).
# First a deliberately misformatted file must be rejected (a check that cannot fail tests
# nothing). Exits 77 (skipped) without clang-format (scripts/install_deps.sh installs it).
# Usage: bash tests/repo/format.sh [ROOT] (default: the repository holding this script).
set -u
ROOT=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
CF=$(command -v clang-format-14 || command -v clang-format) || {
    echo "format: clang-format not installed; skipped"; exit 77; }
cd "$ROOT" || exit 1

tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
cp .clang-format "$tmp/" && printf 'int f(int x){if(x) {return 1;}\n  return 0;}\n' >"$tmp/bad.c"
if (cd "$tmp" && "$CF" --dry-run --Werror bad.c 2>/dev/null); then
    echo "format: a misformatted file passed the check"; exit 1
fi

files=$( (git ls-files '*.c' '*.h' 2>/dev/null || find include src tools tests bench fuzz -name '*.[ch]') |
        xargs grep -L -m1 'do not edit')
if ! "$CF" --dry-run --Werror $files; then
    echo "format: run \`make format\` (clang-format) on the files above"; exit 1
fi
echo "format: $(echo "$files" | wc -w) files as clang-format writes them"
