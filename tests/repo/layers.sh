#!/usr/bin/env bash
# layers.sh — the folders of src/ include one way only. Each folder may include its own headers,
# the public headers (veloxquant.h, vq_engine.h) and the headers of folders listed before it:
#
#   core < calib < codecs < cache < artifact < engine < eval
#
# (calib: calibration data and numerics, read by the codecs; artifact: artifact files, tables
# and the lookup that creates codecs to attach an artifact to a cache configuration). A file in
# src/X/arch/... belongs to X. A folder missing from the list fails the check, so a new folder
# has to be placed in the order. The checker is first run on a small tree with a back edge and
# must reject it (a check that cannot fail tests nothing). Usage: bash tests/repo/layers.sh
# [ROOT] (default: the repository holding this script).
set -u
ORDER="core calib codecs cache artifact engine eval"
ROOT=${1:-$(cd "$(dirname "$0")/../.." && pwd)}

rank() {  # rank FOLDER -> index in ORDER, or empty when unknown
    local i=0 f
    for f in $ORDER; do
        [ "$f" = "$1" ] && { echo $i; return; }
        i=$((i + 1))
    done
}

check_tree() {  # check_tree SRC_DIR -> prints violations, returns 1 if any
    local src=$1 bad=0 dir folder r file inc first rf
    for dir in "$src"/*/; do
        folder=$(basename "$dir")
        r=$(rank "$folder")
        if [ -z "$r" ]; then
            echo "src/$folder: folder not in the layer order ($ORDER)"; bad=1; continue
        fi
        while IFS=: read -r file inc; do
            case "$inc" in
            veloxquant.h|vq_engine.h) continue ;;
            */*) first=${inc%%/*} ;;
            *) [ -f "$(dirname "$file")/$inc" ] && continue
               echo "${file#"$src"/}: #include \"$inc\" names no folder"; bad=1; continue ;;
            esac
            rf=$(rank "$first")
            if [ -z "$rf" ]; then
                echo "${file#"$src"/}: #include \"$inc\": unknown folder $first"; bad=1
            elif [ "$rf" -gt "$r" ]; then
                echo "${file#"$src"/}: #include \"$inc\": $folder may not include $first" \
                     "(order: $ORDER)"; bad=1
            fi
        done < <(grep -rH --include='*.c' --include='*.h' \
                     '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$dir" |
                 sed 's/^\([^:]*\):[^"]*"\([^"]*\)".*/\1:\2/' | sort)
    done
    return $bad
}

# Self-test: a tree with a back edge (calib -> codecs) and an unknown folder must be rejected,
# the same tree without them accepted.
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/src/core" "$TMP/src/calib" "$TMP/src/codecs/arch/x86"
printf '#include "core/core.h"\n' > "$TMP/src/calib/a.c"
printf '#include "calib/calib.h"\n#include "veloxquant.h"\n' > "$TMP/src/codecs/b.c"
printf '#include "codecs/b.h"\n' > "$TMP/src/codecs/arch/x86/c.c"
if ! check_tree "$TMP/src" >/dev/null; then echo "FAIL: self-test rejects a clean tree"; exit 1; fi
printf '#include "codecs/codec_impl.h"\n' >> "$TMP/src/calib/a.c"
if check_tree "$TMP/src" >/dev/null; then echo "FAIL: self-test accepts calib -> codecs"; exit 1; fi
sed -i '$d' "$TMP/src/calib/a.c"; mkdir "$TMP/src/misc"
if check_tree "$TMP/src" >/dev/null; then echo "FAIL: self-test accepts an unknown folder"; exit 1; fi

if ! check_tree "$ROOT/src"; then
    echo "FAIL: src/ folders include against the layer order"; exit 1
fi
echo "layers: ok ($ORDER)"
