#!/usr/bin/env bash
# CLI tests for `calibrate`: usage errors, artifacts written under $VQ_CACHE_DIR with the
# model's sha256 in the path, and loadable by the library (re-run is deterministic).
set -u
VQ="$1"
fail=0; pass=0
ok()  { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
export VQ_CACHE_DIR="$TMP/cache"
"$VQ" calibrate --help >/dev/null && ok || bad "--help"
"$VQ" calibrate >/dev/null 2>&1; [ $? -eq 2 ] && ok || bad "missing -m must exit 2"
"$VQ" calibrate -m x --method nope >/dev/null 2>&1; [ $? -eq 2 ] && ok || bad "bad --method must exit 2"
"$VQ" calibrate -m x --key-pq 13,4 >/dev/null 2>&1; [ $? -eq 2 ] && ok || bad "bad --key-pq must exit 2"
"$VQ" calibrate -m /nonexistent.gguf --method spectral >/dev/null 2>&1; [ $? -eq 1 ] && ok || bad "missing model must exit 1"
MODEL="${VQ_MODELS:-$HOME/.cache/veloxquant/models}/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ -f "$MODEL" ]; then
    SHA=$(sha256sum "$MODEL" | cut -d' ' -f1)
    "$VQ" calibrate -m "$MODEL" --method spectral --n_tokens 48 --threads 2 >"$TMP/out" 2>"$TMP/err" && ok || { bad "spectral run"; cat "$TMP/err" >&2; }
    F="$VQ_CACHE_DIR/spectral/$SHA/pca.vqcal"
    [ -s "$F" ] && ok || bad "spectral artifact missing at $F"
    grep -q "signal dims per layer" "$TMP/out" && ok || bad "signal dims line"
    cp "$F" "$TMP/first.vqcal"
    "$VQ" calibrate -m "$MODEL" --method vecinfer --n_tokens 48 --key-pq 5,4 --value-pq 4,8 --threads 2 \
        >"$TMP/out" 2>"$TMP/err" && ok || { bad "vecinfer run"; cat "$TMP/err" >&2; }
    [ -s "$VQ_CACHE_DIR/vecinfer/$SHA/k5x4_v4x8.vqcal" ] && ok || bad "vecinfer artifact"
    "$VQ" calibrate -m "$MODEL" --method spectral --n_tokens 48 --threads 2 --out "$TMP/second.vqcal" >/dev/null 2>&1 && ok || bad "--out"
    cmp -s "$TMP/first.vqcal" "$TMP/second.vqcal" && ok || bad "spectral artifact not deterministic"
    # generate picks the artifacts up from the cache; without them it refuses with a hint
    "$VQ" generate -m "$MODEL" -p "The capital of France is" -n 4 -c 64 -t 2 --method spectral --bits 3 \
        >"$TMP/out" 2>"$TMP/err" && ok || { bad "generate spectral with calibration"; cat "$TMP/err" >&2; }
    "$VQ" generate -m "$MODEL" -p "Hello" -n 4 -c 64 -t 2 --k-method vecinfer --k-bits 1 \
        >"$TMP/out" 2>"$TMP/err"; [ $? -eq 1 ] && ok || bad "generate vecinfer 1-bit without a matching codebook must fail"
    grep -q "veloxquant calibrate" "$TMP/err" && ok || bad "missing-calibration hint"
    VQ_CACHE_DIR="$TMP/empty" "$VQ" generate -m "$MODEL" -p "Hello" -n 4 -c 64 --method spectral \
        >/dev/null 2>&1; [ $? -eq 1 ] && ok || bad "generate spectral without artifacts must fail"
else
    echo "calibrate: model not found ($MODEL), model runs skipped" >&2
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
