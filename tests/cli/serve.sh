#!/usr/bin/env bash
# CLI tests for `serve`'s command line (the HTTP API is tests/server/'s): --help, option
# validation (exit 2), a model that cannot be loaded and a KV config that does not parse; a
# binary built without libmicrohttpd says so (exit 77: skipped).
set -u
VQ="$1"
MODEL="${VQ_MODELS:-$HOME/.cache/veloxquant/models}/SmolLM2-135M-Instruct.Q4_1.gguf"
fail=0; pass=0
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
OUT="$TMP/out"; ERR="$TMP/err"
. "$(dirname "$0")/lib.sh"
if ! "$VQ" serve --help >/dev/null 2>&1; then
    echo "serve: built without libmicrohttpd; skipped"; exit 77
fi
expect_exit 0 "$VQ" serve --help
for k in "/v1/chat/completions" "--kv-budget" "--parallel" "--api-key" "SIGTERM" "--k-method"; do
    grep -q -- "$k" "$OUT" && ok || bad "serve --help lists '$k'"
done
expect_exit 0 "$VQ" --help
grep -q "^  serve " "$OUT" && ok || bad "veloxquant --help lists serve"
expect_exit 2 "$VQ" serve --bogus
expect_exit 2 "$VQ" serve --port 70000
expect_exit 2 "$VQ" serve --parallel 0
expect_exit 2 "$VQ" serve -c 0
expect_exit 2 "$VQ" serve --kv-budget lots
expect_exit 2 "$VQ" serve --kv-budget -5M
expect_exit 2 "$VQ" serve --host not-an-ip
expect_exit 2 "$VQ" serve --kv kv44
expect_exit 2 "$VQ" serve extra-arg
expect_exit 1 "$VQ" serve -m "$TMP/none.gguf" --port 0
grep -q "cannot load model" "$ERR" && ok || bad "serve: missing model message"
echo "serve: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
