#!/usr/bin/env bash
# CLI tests for `methods` and `bench`: exit codes, output shape, error messages.
set -u
VQ="$1"
fail=0; pass=0
OUT=$(mktemp); ERR=$(mktemp)
trap 'rm -f "$OUT" "$ERR"' EXIT
. "$(dirname "$0")/lib.sh"

expect_exit 0 "$VQ" --help
expect_exit 2 "$VQ" no-such-command
expect_exit 0 "$VQ" methods
for m in fp16 fp32 turboquant_mse turboquant_prod qjl polar turboquant_rvq kivi kivi_sink int8; do
    grep -q "^$m .*ready" "$OUT" && ok || bad "methods does not list $m as ready"
done
for m in vecinfer spectral; do   # calibrated codecs: built, marked as needing calibration
    grep -qE "^$m +ready +yes" "$OUT" && ok || bad "methods must list $m as ready, calib yes"
done
expect_exit 0 "$VQ" methods --json
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert any(x["name"]=="turboquant_mse" and x["implemented"] for x in d)' "$OUT" && ok || bad "methods --json"
expect_exit 2 "$VQ" methods --bogus

# bench: every method runs and prints one row per seq_len
for spec in "fp16 16" "fp32 32" "turboquant_mse 4" "turboquant_mse 1" "turboquant_prod 3" "qjl 1" \
            "polar 4" "turboquant_rvq 1" "turboquant_rvq 2" "kivi 2" "kivi_sink 4" "int8 8" \
            "turboquant_mse 5" "turboquant_mse 8"; do
    set -- $spec
    expect_exit 0 "$VQ" bench --method "$1" --bits "$2" --seq_lens 97 300 --repeats 1 --head_dim 64
    [ "$(grep -cE '^ +(97|300) \|' "$OUT")" -eq 2 ] && ok || { bad "bench $1 rows"; cat "$OUT" >&2; }
done
expect_exit 0 "$VQ" bench --method turboquant_mse --bits 4 --seq_len 256 --repeats 1 --compare_optimized
grep -q "baseline_attend_ms" "$OUT" && ok || bad "compare_optimized header"
expect_exit 0 "$VQ" bench --method turboquant_rvq --bits 1 --seq_len 128 --repeats 1 --json
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); r=d["rows"][0]; assert r["seq_len"]==128 and r["cosine_k"]>0.85 and r["key_x"]>4' "$OUT" && ok || bad "bench --json content"
expect_exit 2 "$VQ" bench --method nope
grep -q "unknown method 'nope'" "$ERR" && ok || bad "unknown method message"
expect_exit 2 "$VQ" bench --method turboquant_mse --bits 9
expect_exit 2 "$VQ" bench --method turboquant_mse --seq_len -5
expect_exit 2 "$VQ" bench --method turboquant_mse --head_dim abc
expect_exit 2 "$VQ" bench
expect_exit 0 "$VQ" bench --help

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
