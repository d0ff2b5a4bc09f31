#!/usr/bin/env bash
# install.sh — the installed library is usable: `cmake --install` of this build into a
# temporary prefix, then every examples/*.c is built against the installed copy only (the
# source tree's include/ is not seen) three ways and run:
#   pkg-config   cc EX.c $(pkg-config --cflags --libs veloxquant), PKG_CONFIG_PATH = the prefix
#                (the installed veloxquant.pc must name that prefix);
#   CMake        a small project doing find_package(veloxquant CONFIG REQUIRED), CMAKE_PREFIX_PATH
#                = the prefix, one executable per example linking veloxquant::veloxquant and
#                one linking veloxquant::veloxquant_static;
# each run with LD_LIBRARY_PATH = the prefix's lib folder, stdin from /dev/null. Any build or
# run failure fails the test.
# Examples and data: an example whose source mentions VQ_MODEL needs a model; it gets the
# default model's path ($VQ_MODELS/SmolLM2-135M-Instruct.Q4_1.gguf, VQ_MODELS defaulting to
# ~/.cache/veloxquant/models) as argv[1] and in $VQ_MODEL, and is skipped with a message when
# that file is absent. Other examples run with no arguments.
# A sanitizer build (VQ_SANITIZE in the build's CMakeCache.txt) builds the examples with the
# same -fsanitize flags and compiler, as the installed library needs its runtime.
# Usage: bash tests/build/install.sh STATIC_LIBRARY SHARED_LIBRARY, with VQ_BUILD_DIR set to
# the build folder (CTest does; default: the shared library's folder). Exit 77: no cmake,
# pkg-config or examples.
set -u
SO=${2:?usage: install.sh STATIC_LIBRARY SHARED_LIBRARY}
BUILD=${VQ_BUILD_DIR:-$(dirname "$SO")}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
command -v cmake >/dev/null || { echo "skip: cmake missing"; exit 77; }
command -v pkg-config >/dev/null || { echo "skip: pkg-config missing"; exit 77; }
shopt -s nullglob
EXAMPLES=("$SRC"/examples/*.c)
[ ${#EXAMPLES[@]} -gt 0 ] || { echo "skip: no examples/*.c"; exit 77; }
[ -f "$BUILD/CMakeCache.txt" ] || { echo "no CMakeCache.txt in $BUILD"; exit 1; }

cache() { sed -n "s/^$1:[A-Z]*=//p" "$BUILD/CMakeCache.txt" | head -1; }
CC=$(cache CMAKE_C_COMPILER); CC=${CC:-cc}
SAN=$(cache VQ_SANITIZE)
SANFLAGS=""
[ -n "$SAN" ] && SANFLAGS="-fsanitize=$SAN -fno-omit-frame-pointer"
MODEL=${VQ_MODELS:-$HOME/.cache/veloxquant/models}/SmolLM2-135M-Instruct.Q4_1.gguf

TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
P="$TMP/prefix"
fail=0; pass=0; skipped=0
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

if ! cmake --install "$BUILD" --prefix "$P" >"$TMP/install.log" 2>&1; then
    cat "$TMP/install.log"; echo "FAIL: cmake --install $BUILD --prefix $P"; exit 1
fi
LIBDIR=$(dirname "$(find "$P" -name 'libveloxquant.so*' | head -1)")
PCDIR=$(dirname "$(find "$P" -name veloxquant.pc | head -1)")
[ -d "$LIBDIR" ] && [ -f "$PCDIR/veloxquant.pc" ] || { echo "FAIL: no library or .pc in $P"; exit 1; }
for f in veloxquant.h vq_engine.h; do
    [ -f "$P/include/$f" ] || bad "$f not installed in $P/include"
done
ls "$P"/bin/veloxquant >/dev/null 2>&1 || bad "the CLI is not installed in $P/bin"
export PKG_CONFIG_PATH="$PCDIR"
[ "$(pkg-config --variable=prefix veloxquant)" = "$P" ] ||
    bad "veloxquant.pc says prefix $(pkg-config --variable=prefix veloxquant), not $P"

run() {  # run NAME EXE SRC: runs one built example, with the model when it needs one
    local name=$1 exe=$2 src=$3 args=()
    if grep -q VQ_MODEL "$src"; then
        if [ ! -f "$MODEL" ]; then
            echo "skip $name: model $MODEL missing"; skipped=$((skipped + 1)); return
        fi
        args=("$MODEL")
    fi
    VQ_MODEL="$MODEL" LD_LIBRARY_PATH="$LIBDIR" timeout 300 "$exe" "${args[@]}" \
        </dev/null >"$TMP/run.log" 2>&1
    local rc=$?
    if [ "$rc" -eq 0 ]; then
        pass=$((pass + 1)); echo "ok $name"
    else
        cat "$TMP/run.log"; bad "$name exited $rc"
    fi
}

# 1. pkg-config
for src in "${EXAMPLES[@]}"; do
    n=$(basename "$src" .c)
    # shellcheck disable=SC2046,SC2086
    if $CC -std=c11 -O1 $SANFLAGS -o "$TMP/pc_$n" "$src" $(pkg-config --cflags --libs veloxquant) \
        -lm >"$TMP/cc.log" 2>&1; then
        run "$n (pkg-config)" "$TMP/pc_$n" "$src"
    else
        cat "$TMP/cc.log"; bad "$n: build with pkg-config"
    fi
done

# 2. CMake: find_package(veloxquant CONFIG REQUIRED), shared and static imported targets
mkdir -p "$TMP/proj"
cat >"$TMP/proj/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.16)
project(vq_examples C)
find_package(veloxquant 0.1 CONFIG REQUIRED)
foreach(src \${EXAMPLES})
  get_filename_component(n \${src} NAME_WE)
  add_executable(\${n} \${src})
  target_link_libraries(\${n} PRIVATE veloxquant::veloxquant m)
  add_executable(\${n}_static \${src})
  target_link_libraries(\${n}_static PRIVATE veloxquant::veloxquant_static m)
endforeach()
EOF
if cmake -S "$TMP/proj" -B "$TMP/proj/build" -DCMAKE_C_COMPILER="$CC" -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_PREFIX_PATH="$P" -DEXAMPLES="$(IFS=';'; echo "${EXAMPLES[*]}")" \
        -DCMAKE_C_FLAGS="$SANFLAGS" -DCMAKE_EXE_LINKER_FLAGS="$SANFLAGS" \
        >"$TMP/cmake.log" 2>&1 && cmake --build "$TMP/proj/build" >>"$TMP/cmake.log" 2>&1; then
    for src in "${EXAMPLES[@]}"; do
        n=$(basename "$src" .c)
        run "$n (find_package, shared)" "$TMP/proj/build/$n" "$src"
        run "$n (find_package, static)" "$TMP/proj/build/${n}_static" "$src"
    done
else
    cat "$TMP/cmake.log"; bad "CMake project with find_package(veloxquant)"
fi

echo "$pass runs passed, $fail failed, $skipped skipped (examples: ${#EXAMPLES[@]}, prefix $P)"
[ "$fail" -eq 0 ]
