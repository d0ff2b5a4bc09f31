#!/usr/bin/env bash
# run.sh CLI [TEST_FILE] — the server tests (tests/server/test_server.py, or TEST_FILE there:
# test_server_large.py, the 1.5B model's; pytest + the openai client) against
# the `veloxquant` binary CLI, with the Python of the venv that `make test` creates
# ($VQ_PYTHON, else build/venv/bin/python). Exit 77 (skipped) when that Python, pytest or the
# openai package is missing, or the binary was built without libmicrohttpd.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cli=${1:?usage: run.sh CLI [TEST_FILE]}
tests=${2:-test_server.py}
py=${VQ_PYTHON:-$root/build/venv/bin/python}
if [ ! -x "$py" ] || ! "$py" -c "import openai, pytest" 2>/dev/null; then
    echo "run.sh: $py with openai and pytest missing (make test creates build/venv); skipped"
    exit 77
fi
if ! "$cli" serve --help >/dev/null 2>&1; then
    echo "run.sh: $cli serve is not available (built without libmicrohttpd); skipped"
    exit 77
fi
cd "$here" && VQ_CLI=$cli exec "$py" -m pytest -q -p no:cacheprovider "$tests"
