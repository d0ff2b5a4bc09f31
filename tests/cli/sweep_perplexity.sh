#!/usr/bin/env bash
# CLI test for `perplexity` (the measurement `sweep` runs per config): usage errors, --json
# output, --save-logits then --kl-base on the same run gives KL 0 and 100% top-1, a compressed
# cache gives KL > 0 and fewer KV bytes, a mismatched base is refused. ctx 64, 2 chunks.
set -u
VQ="$1"
MODEL="${VQ_MODELS:-$HOME/.cache/veloxquant/models}/SmolLM2-135M-Instruct.Q4_1.gguf"
CORPUS=data/corpus_en.txt
fail=0; pass=0
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
OUT="$TMP/out"; ERR="$TMP/err"
. "$(dirname "$0")/lib.sh"

expect_exit 0 "$VQ" perplexity --help
# no -m: the default model, as in every command
VQ_MODELS="$TMP/nomodels" expect_exit 1 "$VQ" perplexity -f "$CORPUS"
grep -q "nomodels/SmolLM2-135M-Instruct.Q4_1.gguf" "$ERR" && ok || bad "perplexity default model"
expect_exit 2 "$VQ" perplexity -m "$MODEL" -f "$CORPUS" -c 63                # odd ctx
expect_exit 2 "$VQ" perplexity -m "$MODEL" -f "$CORPUS" --top-k 0
expect_exit 2 "$VQ" perplexity -m "$MODEL" -f "$CORPUS" --method nope
if [ ! -f "$MODEL" ] || [ ! -f "$CORPUS" ]; then
    bad "model or corpus missing (scripts/fetch_models.sh, make bench-data)"
    echo "$pass passed, $fail failed"; exit 1
fi
expect_exit 2 "$VQ" perplexity -m "$MODEL" -f "$CORPUS" --method kivi --bits 9
grep -q "kivi accepts 2..8" "$ERR" && ok || bad "kivi --bits 9 message: $(cat "$ERR")"
expect_exit 1 "$VQ" perplexity -m "$MODEL" -f /nonexistent.txt
head -c 4096 "$CORPUS" > "$TMP/slice.txt"
P=(-m "$MODEL" -f "$TMP/slice.txt" -c 64 --chunks 2 -t 1 --json)

expect_exit 0 "$VQ" perplexity "${P[@]}" --save-logits "$TMP/base.logits" --top-k 16
cp "$OUT" "$TMP/fp16.json"
[ -s "$TMP/base.logits" ] && [ ! -e "$TMP/base.logits.tmp" ] && ok || bad "saved logits file"
# header 64 bytes + 62 records of 12 + 8*16 bytes
[ "$(stat -c %s "$TMP/base.logits")" -eq $((64 + 62 * 140)) ] && ok || bad "logits file size"
expect_exit 0 "$VQ" perplexity "${P[@]}" --kl-base "$TMP/base.logits"
python3 - "$TMP/fp16.json" "$OUT" <<'EOF' && ok || bad "self KL"
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert a["chunks"] == 2 and a["tokens_scored"] == 62 and 1 < a["ppl"] < 1000
assert b["ppl"] == a["ppl"] and b["kld_mean"] == 0 and b["kld_p99"] == 0 and b["top1"] == 1
assert a["kv_bytes"] == 2 * 2 * 30 * 3 * 64 * 64 and a["fullKV_x"] == 1
EOF
expect_exit 0 "$VQ" perplexity "${P[@]}" --kl-base "$TMP/base.logits" --method turboquant_mse --bits 2
python3 - "$TMP/fp16.json" "$OUT" <<'EOF' && ok || bad "compressed run"
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert b["config"] == "turboquant_mse-2" and b["kld_mean"] > 0 and b["top1"] < 1
assert b["kv_bytes"] < a["kv_bytes"] / 6 and b["fullKV_x"] > 6
EOF
# kivi-6 (keys coded in whole groups of 32, every value coded): close to fp16, far better than
# turboquant_mse-2, at the documented b + 32/G bits on the coded part
cp "$OUT" "$TMP/tq2.json"
expect_exit 0 "$VQ" perplexity "${P[@]}" --kl-base "$TMP/base.logits" --method kivi --bits 6 \
    --residual-length 0
python3 - "$TMP/fp16.json" "$TMP/tq2.json" "$OUT" <<'EOF' && ok || bad "kivi-6 run"
import json, sys
a, t, b = (json.load(open(f)) for f in sys.argv[1:4])
assert b["config"] == "kivi-6+res0" and 0 < b["kld_mean"] < t["kld_mean"] / 10, (b, t)
# (62 scored tokens: int8-activation noise alone moves ppl by a few %, KL is the measure)
assert b["kld_mean"] < 0.01 and abs(b["ppl"] / a["ppl"] - 1) < 0.06, b
assert 2 < b["fullKV_x"] <= 16 / 7 + 1e-9, b
EOF
# a base from another ctx is refused
expect_exit 1 "$VQ" perplexity -m "$MODEL" -f "$TMP/slice.txt" -c 128 --chunks 1 -t 1 --kl-base "$TMP/base.logits"
grep -q "do not match" "$ERR" && ok || bad "mismatched base message"
# plain text output
expect_exit 0 "$VQ" perplexity -m "$MODEL" -f "$TMP/slice.txt" -c 64 --chunks 1 -t 1
grep -q "^perplexity: [0-9.]* +/- " "$OUT" && ok || bad "text output"
grep -q "chunk 1/1 ppl" "$ERR" && ok || bad "progress lines when not a terminal"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
