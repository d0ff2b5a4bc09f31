#!/usr/bin/env bash
# Creates the venv of `make test-transformers` (python/veloxquant/transformers.py): torch and
# transformers next to the package, never needed by the rest of veloxquant or by `make test`.
# Usage: bash scripts/install_transformers.sh VENV [debian|pypi]
#
#   debian (default): Debian's CPU-only torch (python3-torch 1.13.1, ~137 MB of packages, ~590 MB
#     installed) for /usr/bin/python3, seen by a venv made with --system-site-packages, and from
#     PyPI transformers 4.45.2, the newest release that runs on torch 1.13 here (4.46 imports
#     torch.distributed.fsdp, which fails on Python 3.11 with torch 1.13).
#   pypi: the current torch and transformers from PyPI. For Linux x86-64 PyPI has only CUDA
#     builds of torch: torch 2.15.0 is a 539 MB wheel that pulls 28 more packages (nvidia-*,
#     triton, cuda-toolkit), a venv of ~5.6 GB; the tests still run on the CPU.
# Idempotent: an existing venv is reused.
set -euo pipefail
VENV=${1:?usage: install_transformers.sh VENV [debian|pypi]}
FROM=${2:-debian}
case "$FROM" in
debian)
    if ! dpkg-query -W -f='${Status}' python3-torch 2>/dev/null | grep -q "install ok installed"; then
        echo "install_transformers: installing Debian's python3-torch (CPU-only)"
        SUDO=""
        [ "$(id -u)" -ne 0 ] && SUDO=sudo
        $SUDO apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
            python3-torch python3-venv
    fi
    test -x "$VENV/bin/python" || /usr/bin/python3 -m venv --system-site-packages "$VENV"
    "$VENV/bin/pip" install -q pytest "transformers==4.45.2"
    ;;
pypi)
    test -x "$VENV/bin/python" || python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q pytest torch transformers
    ;;
*)
    echo "install_transformers: unknown source '$FROM' (debian or pypi)" >&2
    exit 2
    ;;
esac
"$VENV/bin/python" -c 'import torch, transformers; print("install_transformers: torch",
    torch.__version__, "transformers", transformers.__version__)'
