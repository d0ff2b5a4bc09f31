#!/usr/bin/env bash
# Installs the Debian packages veloxquant builds and tests with. Idempotent; skips apt when
# everything is present.
set -euo pipefail
PKGS="build-essential cmake pkg-config libcjson-dev libmicrohttpd-dev libplplot-dev plplot-driver-cairo python3 python3-pip python3-venv unzip python3.11-doc"
# The clang build of `make test` (ThreadSanitizer with LLVM's OpenMP runtime and its Archer tool,
# both in libomp-dev), `make fuzz` (libFuzzer and the sanitizer runtimes: libclang-rt-dev),
# symbolized sanitizer reports (llvm-symbolizer: llvm) and `make format` (clang-format).
PKGS="$PKGS clang libclang-rt-dev libomp-dev llvm clang-format"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "install_deps: installing$missing"
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
fi
