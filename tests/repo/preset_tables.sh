#!/usr/bin/env bash
# preset_tables.sh — one preset table, in the library. What a preset name stands for (kv4 =
# "kivi-4:turboquant_mse-4+g64+res0+s1+kc", ...) is defined in src/kvspec/kvspec.c only; every
# other file (tools/, bench/, src/, scripts/, python/, examples/) resolves names through the
# library's KV specs (vq_kv_spec_parse). A definition is recognised by what only a definition
# spells: the presets' configs ("kivi-N:turboquant_mse-N+g64+res0...", the modifier tail
# "+s1+kc"), or a preset name mapped to something in a table ({"kv4", "..."} in C,
# "kv4": "..." in Python). Tests and docs may spell them (they check or explain them); build
# folders are skipped. The check
# first runs on a small tree with a table in bench/ and must reject it (a check that cannot
# fail tests nothing). Usage: bash tests/repo/preset_tables.sh [ROOT].
set -u
ROOT=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
PAT='turboquant_mse-[0-9]\+g64\+res0|\+s1\+kcz?|\{ *"kv[2-8]", *"|"kv[2-8]" *: *"'
DIRS="tools bench src scripts python examples fuzz"

check_tree() {  # check_tree ROOT -> prints offending lines, returns 1 if any
    local root=$1 bad=0 d hits
    for d in $DIRS; do
        [ -d "$root/$d" ] || continue
        hits=$(grep -rnE --include='*.c' --include='*.h' --include='*.py' --include='*.sh' \
                   "$PAT" "$root/$d" | grep -v "^$root/src/kvspec/" | grep -v "/build[^/]*/" |
                   sed "s|^$root/||")
        if [ -n "$hits" ]; then
            echo "$hits" | sed 's/^/preset definition outside src\/kvspec: /'
            bad=1
        fi
    done
    return $bad
}

# self-test: a second preset table in bench/ is caught
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/bench" "$T/src/kvspec"
echo 'static const char *kv4 = "kivi-4:turboquant_mse-4+g64+res0+s1+kc";' > "$T/src/kvspec/k.c"
if ! check_tree "$T" >/dev/null; then
    echo "preset_tables: self-test: a table inside src/kvspec was rejected"; exit 1
fi
echo '    {"kv4", "kivi", 4, "turboquant_mse", 4},' > "$T/bench/b.c"
if check_tree "$T" >/dev/null; then
    echo "preset_tables: self-test: a preset table in bench/ was not caught"; exit 1
fi
check_tree "$ROOT" && echo "preset_tables: ok (one preset table, src/kvspec)"
