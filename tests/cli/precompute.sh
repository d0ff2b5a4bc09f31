#!/usr/bin/env bash
# CLI tests for `precompute`: usage errors, tables written under $VQ_CACHE_DIR, --check passes
# on fresh files, fails (exit 1, reason) on a flipped byte, a truncated or missing file, and
# on a file made for another seed.
set -u
VQ="$1"
fail=0; pass=0
. "$(dirname "$0")/lib.sh"
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
export VQ_CACHE_DIR="$TMP/cache"
D="$VQ_CACHE_DIR/precompute/0000000000000000000000000000000000000000000000000000000000000000"
"$VQ" precompute --help | grep -q -- "--check" && ok || bad "--help"
"$VQ" precompute >/dev/null 2>&1; [ $? -eq 2 ] && ok || bad "no args must exit 2"
"$VQ" precompute --head-dim 60 --bits 2 >/dev/null 2>&1; [ $? -eq 2 ] && ok || bad "head_dim 60 must exit 2"
"$VQ" precompute --head-dim 64 --bits 2,2 >/dev/null 2>&1; [ $? -eq 2 ] && ok || bad "duplicate bits must exit 2"
"$VQ" precompute --head-dim 64 --bits 9 >/dev/null 2>&1; [ $? -eq 2 ] && ok || bad "bits 9 must exit 2"
"$VQ" precompute --head-dim 64,128 --bits 1,2,3,4 >"$TMP/out" 2>&1 && ok || bad "write"
[ -s "$D/d64_s42_b1234.vqcal" ] && [ -s "$D/d128_s42_b1234.vqcal" ] && ok || bad "files written"
grep -q "(9 tables)" "$TMP/out" && ok || bad "4 gauss + 4 sphere + signs"
"$VQ" precompute --head-dim 64,128 --bits 1,2,3,4 --check >"$TMP/out" 2>&1 && ok || { bad "check fresh"; cat "$TMP/out" >&2; }
[ "$(grep -c "9 tables identical" "$TMP/out")" -eq 2 ] && ok || bad "check output"
# flipped byte in a centroid
cp "$D/d64_s42_b1234.vqcal" "$TMP/good"
python3 - "$D/d64_s42_b1234.vqcal" <<'PY'
import sys
p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[130] ^= 0x01; open(p, 'wb').write(b)
PY
"$VQ" precompute --head-dim 64 --bits 1,2,3,4 --check >/dev/null 2>"$TMP/err"; [ $? -eq 1 ] && ok || bad "corrupt must exit 1"
grep -q "corrupt or truncated" "$TMP/err" && ok || bad "corrupt reason"
head -c 200 "$TMP/good" > "$D/d64_s42_b1234.vqcal"
"$VQ" precompute --head-dim 64 --bits 1,2,3,4 --check >/dev/null 2>"$TMP/err"; [ $? -eq 1 ] && ok || bad "truncated must exit 1"
rm -f "$D/d64_s42_b1234.vqcal"
"$VQ" precompute --head-dim 64 --bits 1,2,3,4 --check >/dev/null 2>"$TMP/err"; [ $? -eq 1 ] && ok || bad "missing must exit 1"
grep -q "missing or unreadable" "$TMP/err" && ok || bad "missing reason"
# a valid file of another seed under this name: a mismatch (signs differ)
"$VQ" precompute --head-dim 64 --bits 1,2,3,4 --seed 7 --out "$TMP" >/dev/null && cp "$TMP/d64_s7_b1234.vqcal" "$D/d64_s42_b1234.vqcal"
"$VQ" precompute --head-dim 64 --bits 1,2,3,4 --check >/dev/null 2>"$TMP/err"; [ $? -eq 1 ] && ok || bad "other seed must exit 1"
grep -q "MISMATCH: stored head_dim 64 seed 7" "$TMP/err" && ok || bad "mismatch reason"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
