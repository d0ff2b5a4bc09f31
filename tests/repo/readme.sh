#!/usr/bin/env bash
# readme.sh — the front door stays short and its references stay valid:
#  1. README.md has at most 250 lines;
#  2. every relative Markdown link ([text](path)) and every `docs/...` path named in README.md,
#     docs/*.md and python/README.md exists in the repository;
#  3. no committed result file (docs/results/**, bench/results/**) records an absolute path of
#     the machine that made it (a JSON string starting with "/").
# The checks first run on a small tree with one fault of each kind and must reject each.
# Usage: bash tests/repo/readme.sh [ROOT].
set -u
ROOT=${1:-$(cd "$(dirname "$0")/../.." && pwd)}

check_tree() {  # check_tree ROOT -> prints problems, returns 1 if any
    local root=$1 bad=0 f ref dir n
    n=$(wc -l < "$root/README.md")
    if [ "$n" -gt 250 ]; then echo "README.md: $n lines (at most 250)"; bad=1; fi
    for f in "$root/README.md" "$root"/docs/*.md "$root/python/README.md"; do
        [ -f "$f" ] || continue
        dir=$(dirname "$f")
        while read -r ref; do
            ref=${ref%%#*}
            [ -z "$ref" ] && continue
            [ -e "$dir/$ref" ] || { echo "${f#"$root"/}: link to '$ref': no such file"; bad=1; }
        done < <(grep -oE '\]\([^)[:space:]]+\)' "$f" | sed -E 's/^\]\(//; s/\)$//' |
                 grep -vE '^(https?:|mailto:|#)')
        while read -r ref; do
            [ -e "$root/$ref" ] || { echo "${f#"$root"/}: names '$ref': no such file"; bad=1; }
        done < <(grep -oE '(^|[^A-Za-z0-9_./-])docs/[A-Za-z0-9_./-]*[A-Za-z0-9_]' "$f" |
                 sed -E 's/^[^d]*//' | grep -v '\*' | sort -u)
    done
    while read -r f; do
        if grep -qE '"/[A-Za-z]' "$f"; then
            echo "${f#"$root"/}: records an absolute path: $(grep -oE '"/[A-Za-z][^"]*"' "$f" | head -1)"
            bad=1
        fi
    done < <(find "$root/docs/results" "$root/bench/results" -type f -name '*.json' 2>/dev/null)
    return $bad
}

T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/docs/results/x" "$T/python"
printf '# ok\nsee docs/A.md and [b](docs/B.md)\n' > "$T/README.md"
touch "$T/docs/A.md" "$T/docs/B.md"
echo '{"file": "model.gguf"}' > "$T/docs/results/x/results.json"
check_tree "$T" >/dev/null || { echo "readme: self-test: a good tree was rejected"; exit 1; }
seq 300 > "$T/README.md"
check_tree "$T" >/dev/null && { echo "readme: self-test: a long README passed"; exit 1; }
printf 'see [c](docs/C.md)\n' > "$T/README.md"
check_tree "$T" >/dev/null && { echo "readme: self-test: a dead link passed"; exit 1; }
printf 'see docs/D.md\n' > "$T/README.md"
check_tree "$T" >/dev/null && { echo "readme: self-test: a dead docs/ path passed"; exit 1; }
printf 'ok\n' > "$T/README.md"
echo '{"file": "/root/m.gguf"}' > "$T/docs/results/x/results.json"
check_tree "$T" >/dev/null && { echo "readme: self-test: an absolute path passed"; exit 1; }
check_tree "$ROOT" && echo "readme: ok (README $(wc -l < "$ROOT/README.md") lines)"
