#!/bin/bash
# The peer for side-by-side measurements: llama-cpp-python 0.3.36 (its vendored llama.cpp is
# commit 0c1e57098) built from source with -DGGML_NATIVE=ON, plus numpy and gguf, in a venv of
# its own (default build/llama-venv). Used by scripts/llamacpp_ppl.py and scripts/golden/*.py:
#   bash scripts/install_llamacpp.sh            # or: make llamacpp-venv
#   build/llama-venv/bin/python scripts/llamacpp_ppl.py ...
# The build takes 5-15 minutes on 2 cores; a second run finds the venv and returns at once.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV=${LLAMA_VENV:-$ROOT/build/llama-venv}
VERSION=0.3.36
if [ -x "$VENV/bin/python" ] &&
    "$VENV/bin/python" -c "import llama_cpp, gguf, numpy, sys; sys.exit(llama_cpp.__version__ != '$VERSION')" \
        2> /dev/null; then
    echo "install_llamacpp: $VENV has llama-cpp-python $VERSION"
    exit 0
fi
python3 -m venv "$VENV"
"$VENV/bin/pip" install -q numpy gguf
echo "install_llamacpp: building llama-cpp-python $VERSION from source into $VENV (minutes)" >&2
CMAKE_ARGS="-DGGML_NATIVE=ON" CMAKE_BUILD_PARALLEL_LEVEL=${JOBS:-2} \
    "$VENV/bin/pip" install -q --no-binary llama-cpp-python "llama-cpp-python==$VERSION"
"$VENV/bin/python" -c "import llama_cpp; print('install_llamacpp: llama-cpp-python', llama_cpp.__version__)"
