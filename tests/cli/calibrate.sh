#!/usr/bin/env bash
# CLI tests for `calibrate`: usage errors, artifacts written under $VQ_CACHE_DIR with the
# model's sha256 in the path, and loadable by the library (re-run is deterministic).
set -u
VQ="$1"
fail=0; pass=0
. "$(dirname "$0")/lib.sh"
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
export VQ_CACHE_DIR="$TMP/cache"
"$VQ" calibrate --help >/dev/null && ok || bad "--help"
# no -m: the default model, as every command takes it ($VQ_MODELS decides where it is)
VQ_MODELS="$TMP/nomodels" "$VQ" calibrate >/dev/null 2>"$TMP/err"; [ $? -eq 1 ] && ok || bad "calibrate without the default model must exit 1"
grep -q "nomodels/SmolLM2-135M-Instruct.Q4_1.gguf" "$TMP/err" && ok || bad "calibrate default model: $(cat "$TMP/err")"
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
    # a missing codebook is built on demand (reason and progress on stderr), then used
    "$VQ" generate -m "$MODEL" -p "Hello" -n 4 -c 64 -t 2 --k-method vecinfer --k-bits 1 --calib-tokens 48 \
        >"$TMP/out" 2>"$TMP/err" && ok || { bad "generate vecinfer 1-bit builds its codebook on demand"; cat "$TMP/err" >&2; }
    grep -q "no usable calibration.*does not fit this KV config" "$TMP/err" && ok || bad "on-demand build: reason"
    grep -q "building calibration (vecinfer)" "$TMP/err" && ok || bad "on-demand build: progress"
    grep -q "built calibration and using it" "$TMP/err" && ok || bad "on-demand build: says so"
    [ -s "$VQ_CACHE_DIR/vecinfer/$SHA/k8x8_v8x8.vqcal" ] && ok || bad "on-demand vecinfer artifact k8x8_v8x8"
    # corrupt artifact: reported, rebuilt (never used), and the run succeeds
    F="$VQ_CACHE_DIR/spectral/$SHA/pca.vqcal"
    python3 - "$F" <<'PY'
import sys
p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[len(b) // 2] ^= 0x40; open(p, 'wb').write(b)
PY
    "$VQ" generate -m "$MODEL" -p "Hello" -n 4 -c 64 -t 2 --method spectral --bits 3 --calib-tokens 48 \
        >"$TMP/out" 2>"$TMP/err" && ok || { bad "generate spectral with a corrupt artifact"; cat "$TMP/err" >&2; }
    grep -q "pca.vqcal: corrupt or truncated" "$TMP/err" && ok || { bad "corrupt artifact reason"; cat "$TMP/err" >&2; }
    grep -q "built calibration and using it" "$TMP/err" && ok || bad "corrupt artifact rebuilt"
    cmp -s "$F" "$TMP/second.vqcal" && ok || bad "the rebuilt artifact equals a fresh 48-token calibration"
    # the explicit command still works after on-demand builds, and a good artifact is reused silently
    "$VQ" generate -m "$MODEL" -p "Hello" -n 4 -c 64 -t 2 --method spectral --bits 3 \
        >"$TMP/out" 2>"$TMP/err" && ok || bad "generate spectral reuse"
    grep -q "building calibration" "$TMP/err" && bad "a valid artifact must not be rebuilt" || ok
else
    echo "calibrate: model not found ($MODEL), model runs skipped" >&2
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
