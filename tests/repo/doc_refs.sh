#!/usr/bin/env bash
# doc_refs.sh — documentation references stay inside the repository and stay valid:
#  1. every citation of an ALGORITHMS.md section anywhere in the repository ("ALGORITHMS.md §3.1",
#     "ALGORITHMS §8.3", "ALGORITHMS.md section 8.3", "ALGORITHMS.md 7.6", chains such as
#     "§3.5/§4.1" or "§1.3 and §2") names a section heading of docs/ALGORITHMS.md;
#  2. every "§N" inside docs/ALGORITHMS.md that is not a FORMAT.md reference names one of its
#     own sections;
#  3. no file refers to the team's notes outside the repository (the shared folder beside the
#     worktrees, by absolute or relative path).
# The checks first run on a small tree with one fault of each kind and must reject each (a
# check that cannot fail tests nothing). Usage: bash tests/repo/doc_refs.sh [ROOT] (default:
# the repository holding this script). Needs bash, grep, sed, sort.
set -u
ROOT=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
SHARED_RE='(/work/|\.\./)shared(/|\b)'   # written so that this file does not match itself
NUM='[0-9]+(\.[0-9]+)*'
CITE="ALGORITHMS(\\.md)?\`?[[:space:]]*(§[[:space:]]*|section[[:space:]]+)?${NUM}([[:space:]]*(/|,|and|&)[[:space:]]*§?[[:space:]]*${NUM})*"

files_of() {  # files_of ROOT -> tracked (or, outside git, all) text files, relative paths
    if git -C "$1" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        git -C "$1" ls-files -co --exclude-standard
    else
        (cd "$1" && find . -type f -not -path './.git/*' -not -path './build*' | sed 's|^\./||')
    fi
}

sections_of() {  # sections_of DOC -> section numbers of its headings, one per line
    sed -n -E 's/^#{1,6}[[:space:]]+([0-9]+(\.[0-9]+)*)\.?[[:space:]].*/\1/p' "$1" | sort -u
}

check_tree() {  # check_tree ROOT -> prints problems, returns 1 if any
    local root=$1 doc="$1/docs/ALGORITHMS.md" bad=0 secs f hit n
    if [ ! -f "$doc" ]; then echo "docs/ALGORITHMS.md is missing"; return 1; fi
    secs=$(sections_of "$doc")
    local list="$TMP/files.$$"
    files_of "$root" | grep -vxF -e tests/repo/doc_refs.sh | while IFS= read -r f; do
        [ -f "$root/$f" ] && printf '%s\0' "$f"
    done > "$list"
    if (cd "$root" && xargs -0 grep -IEnH "$SHARED_RE" < "$list"); then
        echo "^ refers to files outside the repository (cite docs/ instead)"; bad=1
    fi
    # DESIGN.md is the team's product notes, not a file of this repository
    if (cd "$root" && xargs -0 grep -IEnH 'DESIGN''\.md' < "$list"); then
        echo "^ cites DESIGN.md, which is not in the repository (cite README or docs/ instead)"; bad=1
    fi
    while IFS= read -r hit; do
        f=${hit%%:*}
        [ "$f" = docs/ALGORITHMS.md ] && continue
        hit=${hit#*:}
        # the cited numbers: every number of the citation after the "ALGORITHMS" word
        for n in $(printf '%s\n' "${hit#ALGORITHMS}" | grep -oE "$NUM"); do
            if ! printf '%s\n' "$secs" | grep -qxF "$n"; then
                echo "$f: cites ALGORITHMS.md §$n, which docs/ALGORITHMS.md does not have"
                bad=1
            fi
        done
    done < <(cd "$root" && xargs -0 grep -IoEH "$CITE" < "$list")
    # internal references of docs/ALGORITHMS.md (FORMAT.md ones excluded)
    while IFS= read -r n; do
        if ! printf '%s\n' "$secs" | grep -qxF "$n"; then
            echo "docs/ALGORITHMS.md: refers to its own §$n, which does not exist"; bad=1
        fi
    done < <(sed -E 's/FORMAT\.md[[:space:]]+§[[:space:]]*[0-9a-z.]+//g' "$doc" |
             grep -oE "§[[:space:]]*${NUM}" | grep -oE "$NUM" | sort -u)
    return $bad
}

# Self-test on a scratch tree (not a git repository: files_of falls back to find).
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/docs" "$TMP/src"
printf '# t\n## 1. One\n### 1.2 Two\nsee §1.2 and FORMAT.md §9\n' > "$TMP/docs/ALGORITHMS.md"
printf '/* ALGORITHMS.md §1.2, docs/ALGORITHMS.md section 1 and ALGORITHMS §1/§1.2 */\n' > "$TMP/src/a.c"
if ! check_tree "$TMP" >/dev/null; then echo "FAIL: self-test rejects a clean tree"; exit 1; fi
printf '/* ALGORITHMS.md §1.2/§1.3 */\n' > "$TMP/src/b.c"
if check_tree "$TMP" >/dev/null; then echo "FAIL: self-test accepts a missing section"; exit 1; fi
printf '/* ALGORITHMS.md 7.6 */\n' > "$TMP/src/b.c"
if check_tree "$TMP" >/dev/null; then echo "FAIL: self-test accepts a bare missing number"; exit 1; fi
printf '# see %s\n' "/work/sh""ared/ALGORITHMS.md" > "$TMP/src/b.c"
if check_tree "$TMP" >/dev/null; then echo "FAIL: self-test accepts an outside path"; exit 1; fi
printf 'x = "%s"\n' "../sh""ared/reference" > "$TMP/src/b.c"
if check_tree "$TMP" >/dev/null; then echo "FAIL: self-test accepts a relative outside path"; exit 1; fi
rm "$TMP/src/b.c"; printf 'see §4\n' >> "$TMP/docs/ALGORITHMS.md"
if check_tree "$TMP" >/dev/null; then echo "FAIL: self-test accepts a dangling internal §"; exit 1; fi

if ! check_tree "$ROOT"; then
    echo "FAIL: documentation references (fix the citation or add the section)"; exit 1
fi
echo "doc_refs: ok ($(sections_of "$ROOT/docs/ALGORITHMS.md" | wc -l) sections)"
