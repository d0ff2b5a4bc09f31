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
# must reject it (a check that cannot fail tests nothing).
#
# tools/ and bench/ sit on top: a file there includes system headers, the public headers, the
# tools' one internal header vq_tools.h (tools/common/) and headers of its own folder, nothing
# from src/ directly; vq_tools.h itself includes only src/ modules of the folders in
# TOOLS_SEE (codecs, cache and calib are reached through veloxquant.h alone) and the headers of
# the tools' static library beside it in tools/common/ (the parts that need cJSON).
#
# The library needs libm, OpenMP and pthreads only: no file in src/ or include/ includes a
# header of the tools' dependencies (TOOLS_DEPS: cJSON, PLplot); tests/build/deps.sh checks the
# built library's NEEDED entries. Self-tested the same way. Usage: bash tests/repo/layers.sh
# [ROOT] (default: the repository holding this script).
set -u
ORDER="core calib codecs cache artifact engine eval kvspec"
TOOLS_SEE="core engine artifact eval"
TOOLS_HEADER=tools/common/vq_tools.h
TOOLS_DEPS="cjson/ plplot"  # prefixes of #include <...> the library may not use
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

includes() {  # includes DIR... -> "file:header" for every #include "..." under the folders
    grep -rH --include='*.c' --include='*.h' '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' \
        "$@" 2>/dev/null | sed 's/^\([^:]*\):[^"]*"\([^"]*\)".*/\1:\2/' | sort
}

check_edges() {  # check_edges ROOT -> prints violations of tools/ and bench/, returns 1 if any
    local root=$1 bad=0 file inc rel first
    while IFS=: read -r file inc; do
        rel=${file#"$root"/}
        case "$inc" in
        veloxquant.h|vq_engine.h|vq_tools.h) continue ;;
        esac
        if [ "$rel" = "$TOOLS_HEADER" ]; then
            first=${inc%%/*}
            [ "$first" = "$inc" ] && [ -f "$(dirname "$file")/$inc" ] && continue
            if [ "$first" != "$inc" ] && [[ " $TOOLS_SEE " == *" $first "* ]] &&
               [ -f "$root/src/$inc" ]; then continue; fi
            echo "$rel: #include \"$inc\": vq_tools.h includes src/ modules of $TOOLS_SEE only"
            bad=1; continue
        fi
        case "$inc" in
        */*) ;;
        *) [ -f "$(dirname "$file")/$inc" ] && continue ;;
        esac
        echo "$rel: #include \"$inc\": tools/ and bench/ include the public headers," \
             "vq_tools.h and their own folder's headers only"; bad=1
    done < <(includes "$root/tools" "$root/bench")
    return $bad
}

check_deps() {  # check_deps ROOT -> prints library files including a tools' dependency
    local root=$1 bad=0 file inc d
    while IFS=: read -r file inc; do
        for d in $TOOLS_DEPS; do
            case "$inc" in
            "$d"*) echo "${file#"$root"/}: #include <$inc>: the library may not use the" \
                        "tools' dependencies ($TOOLS_DEPS)"; bad=1 ;;
            esac
        done
    done < <(grep -rH --include='*.c' --include='*.h' \
                 '^[[:space:]]*#[[:space:]]*include[[:space:]]*<' "$root/src" "$root/include" \
                 2>/dev/null | sed 's/^\([^:]*\):[^<]*<\([^>]*\)>.*/\1:\2/' | sort)
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

# Self-test of the tools' edge: a tool through vq_tools.h and its own folder is accepted; a
# tool or bench file naming src/ directly, or vq_tools.h reaching into src/codecs, is not.
mkdir -p "$TMP/tools/common" "$TMP/tools/cli" "$TMP/bench" "$TMP/src/eval"
: > "$TMP/src/eval/ppl.h"; : > "$TMP/src/codecs/codec_impl.h"; : > "$TMP/tools/cli/cli.h"
printf '#include "veloxquant.h"\n#include "eval/ppl.h"\n' > "$TMP/$TOOLS_HEADER"
printf '#include <stdio.h>\n#include "vq_tools.h"\n#include "cli.h"\n' > "$TMP/tools/cli/a.c"
printf '#include "veloxquant.h"\n' > "$TMP/bench/b.c"
if ! check_edges "$TMP" >/dev/null; then echo "FAIL: self-test rejects clean tools"; exit 1; fi
edge_rejects() {  # edge_rejects FILE LINE WHAT: FILE with LINE appended must be refused
    printf '%s\n' "$2" >> "$TMP/$1"
    if check_edges "$TMP" >/dev/null; then echo "FAIL: self-test accepts $3"; exit 1; fi
    sed -i '$d' "$TMP/$1"
}
edge_rejects bench/b.c '#include "codecs/codec_impl.h"' "bench -> src"
edge_rejects tools/cli/a.c '#include "eval/ppl.h"' "tools -> src"
edge_rejects "$TOOLS_HEADER" '#include "codecs/codec_impl.h"' "vq_tools.h -> codecs"
edge_rejects "$TOOLS_HEADER" '#include "missing.h"' "vq_tools.h -> a header not in its folder"
: > "$TMP/tools/common/results_json.h"
printf '#include "results_json.h"\n' >> "$TMP/$TOOLS_HEADER"
if ! check_edges "$TMP" >/dev/null; then
    echo "FAIL: self-test rejects vq_tools.h -> tools/common/results_json.h"; exit 1
fi

# Self-test of the library's dependencies: <math.h> and <omp.h> are accepted, <cjson/cJSON.h>
# and <plplot.h> are not.
mkdir -p "$TMP/include"
printf '#include <math.h>\n#include <omp.h>\n' > "$TMP/src/eval/obs.c"
if ! check_deps "$TMP" >/dev/null; then echo "FAIL: self-test rejects <math.h>"; exit 1; fi
for h in cjson/cJSON.h plplot.h; do
    printf '#  include <%s>\n' "$h" > "$TMP/include/x.h"
    if check_deps "$TMP" >/dev/null; then echo "FAIL: self-test accepts <$h>"; exit 1; fi
done
rm "$TMP/include/x.h"

if ! check_tree "$ROOT/src"; then
    echo "FAIL: src/ folders include against the layer order"; exit 1
fi
if ! check_edges "$ROOT"; then
    echo "FAIL: tools/ or bench/ include src/ internals"; exit 1
fi
if ! check_deps "$ROOT"; then
    echo "FAIL: the library includes headers of the tools' dependencies"; exit 1
fi
echo "layers: ok ($ORDER; tools/ and bench/ through $TOOLS_HEADER; library without $TOOLS_DEPS)"
