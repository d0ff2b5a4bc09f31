#!/usr/bin/env bash
# results.sh — docs/RESULTS.md is what scripts/gen_results.py makes of the committed results
# files: every table between its markers equals the table generated from its file, and no
# Markdown table stands outside the markers (a table without a results file behind it). The
# check first runs on a scratch document with one fault of each kind and must reject each.
# Usage: bash tests/repo/results.sh [ROOT]. Needs python3 (standard library only).
set -u
ROOT=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
GEN="$ROOT/scripts/gen_results.py"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
# a scratch document: one generated table, then one fault at a time
printf '# r\n\n<!-- table: qwen25-presets -->\n<!-- end table -->\n' > "$T/doc.md"
python3 "$GEN" --root "$ROOT" --doc "$T/doc.md" >/dev/null ||
    { echo "results: self-test: the generator failed on a good document"; exit 1; }
python3 "$GEN" --root "$ROOT" --doc "$T/doc.md" --check >/dev/null ||
    { echo "results: self-test: a freshly generated document fails --check"; exit 1; }
grep -q '^| veloxquant | \*\*kv4\*\* | 4.326 | 7.0616 |' "$T/doc.md" ||
    { echo "results: self-test: the kv4 row is not the results file's"; exit 1; }
sed 's/| 7.0616 |/| 7.0615 |/' "$T/doc.md" > "$T/edited.md"
python3 "$GEN" --root "$ROOT" --doc "$T/edited.md" --check >/dev/null 2>&1 &&
    { echo "results: self-test: a hand-edited number passed"; exit 1; }
{ cat "$T/doc.md"; printf '\n| a | b |\n|---|---|\n| 1 | 2 |\n'; } > "$T/loose.md"
python3 "$GEN" --root "$ROOT" --doc "$T/loose.md" --check >/dev/null 2>&1 &&
    { echo "results: self-test: a table outside the markers passed"; exit 1; }
printf '<!-- table: no-such-table -->\n<!-- end table -->\n' > "$T/unknown.md"
python3 "$GEN" --root "$ROOT" --doc "$T/unknown.md" --check >/dev/null 2>&1 &&
    { echo "results: self-test: an unknown table passed"; exit 1; }
python3 "$GEN" --root "$ROOT" --check
