#!/usr/bin/env bash
# deps.sh — the built shared library depends on libm, OpenMP and pthreads only: its NEEDED
# entries are libm, the OpenMP runtime (libgomp, or libomp in a clang build), libpthread, libc
# and the dynamic loader (plus the sanitizer runtimes in a sanitizer build), and `ldd` shows
# neither cJSON nor PLplot anywhere in what it loads (they belong to the CLI and the tools'
# library, tools/common/). First the check must reject a list naming libcjson (a check that
# cannot fail tests nothing).
# Usage: bash tests/build/deps.sh LIBVELOXQUANT.a LIBVELOXQUANT.so   (exit 77: no readelf/ldd)
set -u
SO=${2:?usage: deps.sh STATIC_LIBRARY SHARED_LIBRARY}
command -v readelf >/dev/null || { echo "skip: readelf missing"; exit 77; }
command -v ldd >/dev/null || { echo "skip: ldd missing"; exit 77; }
[ -r "$SO" ] || { echo "cannot read $SO"; exit 1; }

ALLOWED='^(libm|libgomp|libomp|libpthread|libc|libdl|librt|ld-linux[-a-z0-9_.]*|libasan|libubsan|libtsan)\.so'
FORBIDDEN='cjson|plplot|cairo'

check() {  # check NEEDED_LIST LDD_OUTPUT -> prints what is wrong, returns 1 if anything is
    local bad=0 n
    for n in $1; do
        [[ "$n" =~ $ALLOWED ]] || { echo "NEEDED $n: not libm/OpenMP/pthreads/libc"; bad=1; }
    done
    if grep -Ei "$FORBIDDEN" <<<"$2"; then echo "ldd: the library loads the above"; bad=1; fi
    return $bad
}

if check "libm.so.6 libcjson.so.1 libc.so.6" "libcjson.so.1 => /usr/lib/libcjson.so.1" \
    >/dev/null; then
    echo "self-test: a library needing libcjson passed"; exit 1
fi
if ! check "libm.so.6 libgomp.so.1 libc.so.6 ld-linux-x86-64.so.2" "" >/dev/null; then
    echo "self-test: a library needing libm, libgomp and libc failed"; exit 1
fi

NEEDED=$(readelf -d "$SO" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
[ -n "$NEEDED" ] || { echo "no NEEDED entries read from $SO"; exit 1; }
LDD=$(ldd "$SO") || { echo "ldd $SO failed"; exit 1; }
check "$NEEDED" "$LDD" || { echo "FAIL: $SO has dependencies beyond libm, OpenMP, pthreads"; exit 1; }
echo "$(basename "$SO") needs only: $(tr '\n' ' ' <<<"$NEEDED")"
