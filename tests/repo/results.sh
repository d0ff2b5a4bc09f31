#!/usr/bin/env bash
# results.sh — docs/RESULTS.md is what scripts/gen_results.py makes of the committed results
# files: every table between its markers equals the table generated from its file, no
# Markdown table stands outside the markers (a table without a results file behind it), and
# every committed results file has a table or a stated reason for none. The
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
# a results file that no table shows and no reason explains (a scratch tree, not a checkout)
Q=docs/results/qwen25-presets-ctx2048
mkdir -p "$T/root/$Q" "$T/root/bench/results"
cp "$ROOT/$Q/results.json" "$T/root/$Q/"
python3 "$GEN" --root "$T/root" --doc "$T/doc.md" --check >/dev/null ||
    { echo "results: self-test: a scratch tree with every file shown failed"; exit 1; }
cp "$ROOT/$Q/results.json" "$T/root/bench/results/new.json"
python3 "$GEN" --root "$T/root" --doc "$T/doc.md" --check >/dev/null 2>&1 &&
    { echo "results: self-test: a results file without a table passed"; exit 1; }
python3 "$GEN" --root "$ROOT" --check
