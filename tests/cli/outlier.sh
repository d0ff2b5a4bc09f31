#!/usr/bin/env bash
# CLI tests for the outlier modifiers (--outlier-tokens, --outlier-channels, --n-calib-tokens):
# estimate-memory bytes (exact formula for outlier channels, --outlier-fraction for outlier
# tokens), refused combinations with a reason, bench with --n_outlier_channels /
# --outlier_tokens, `methods` lists them as ready, and a sweep config name with modifier
# suffixes round-trips through results.json (options, cached on rerun).
set -u
VQ="$1"
MODEL="${VQ_MODELS:-$HOME/.cache/veloxquant/models}/SmolLM2-135M-Instruct.Q4_1.gguf"
CORPUS="$(dirname "$0")/../../data/corpus_en.txt"
fail=0; pass=0
OUT=$(mktemp); ERR=$(mktemp); TMP=$(mktemp -d)
trap 'rm -rf "$OUT" "$ERR" "$TMP"' EXIT
. "$(dirname "$0")/lib.sh"
GEO="--layers 30 --kv-heads 3 --head-dim 64"

# outlier channels: + 30 * 3 * (512 * (2 + 4) + 2 * 4) bytes, exactly
expect_exit 0 "$VQ" estimate-memory $GEO -c 512 --method turboquant_mse --bits 3 --json
cp "$OUT" "$TMP/plain.json"
expect_exit 0 "$VQ" estimate-memory $GEO -c 512 --method turboquant_mse --bits 3 --outlier-channels 4 --json
python3 - "$TMP/plain.json" "$OUT" <<'EOF' && ok || bad "estimate-memory --outlier-channels bytes"
import json, sys
a = json.load(open(sys.argv[1]))["configs"][0]; b = json.load(open(sys.argv[2]))["configs"][0]
extra = 30 * 3 * (512 * 6 + 8)
assert b["name"] == "turboquant_mse-3+oc4", b["name"]
assert b["outlier_bytes"] == extra and b["total_bytes"] == a["total_bytes"] + extra, (a, b)
EOF
# calibration longer than the context: records only, no channel list
expect_exit 0 "$VQ" estimate-memory $GEO -c 100 --method turboquant_mse --outlier-channels 4 --n-calib-tokens 300 --json
python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["configs"][0]; assert c["outlier_bytes"]==30*3*100*6 and c["name"]=="turboquant_mse-4+oc4t300", c' "$OUT" && ok || bad "n-calib-tokens > ctx"
# outlier tokens: round(0.1 * 512) = 51 tokens per layer, fp16 K and V rows of 128 bytes
expect_exit 0 "$VQ" estimate-memory $GEO -c 512 --method turboquant_rvq --bits 1 --outlier-tokens 2.5 --outlier-fraction 0.1 --json
python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["configs"][0]; assert c["outlier_bytes"]==30*3*2*51*128 and c["outlier_tokens_assumed"]==51 and c["name"]=="turboquant_rvq-1+ot", c' "$OUT" && ok || bad "outlier-tokens estimate"
# presets include the modifier configs
expect_exit 0 "$VQ" estimate-memory $GEO -c 512
grep -q '^turboquant_rvq-1+ot ' "$OUT" && grep -q '^turboquant_mse-3+oc4 ' "$OUT" && ok || bad "modifier presets listed"
# refused combinations, with a reason
expect_exit 2 "$VQ" estimate-memory $GEO -c 512 --method kivi --outlier-channels 4
grep -q "per channel" "$ERR" && ok || bad "kivi + outlier channels reason"
expect_exit 2 "$VQ" estimate-memory $GEO -c 512 --method kivi_sink --outlier-tokens 2
grep -q "kivi_sink" "$ERR" && ok || bad "kivi_sink + outlier tokens reason"
expect_exit 2 "$VQ" estimate-memory $GEO -c 512 --method turboquant_mse --outlier-channels 40
expect_exit 2 "$VQ" estimate-memory $GEO -c 512 --method turboquant_mse --outlier-tokens abc
expect_exit 2 "$VQ" estimate-memory $GEO -c 512 --method turboquant_mse --outlier-fraction 2

# methods: both modifiers ready
expect_exit 0 "$VQ" methods
grep -qE '^outlier_channels +ready' "$OUT" && grep -qE '^outlier_tokens +ready' "$OUT" && ok || bad "methods lists modifiers as ready"

# bench uses the modifier: more bytes per token, records counted
expect_exit 0 "$VQ" bench --method turboquant_mse --bits 3 --seq_len 300 --repeats 1 --head_dim 64 --json
cp "$OUT" "$TMP/b0.json"
expect_exit 0 "$VQ" bench --method turboquant_mse --bits 3 --seq_len 300 --repeats 1 --head_dim 64 --json --n_outlier_channels 4 --n_calib_tokens 100
python3 - "$TMP/b0.json" "$OUT" <<'EOF' && ok || bad "bench --n_outlier_channels"
import json, sys
a = json.load(open(sys.argv[1])); b = json.load(open(sys.argv[2]))
ra, rb = a["rows"][0], b["rows"][0]
assert b["n_outlier_channels"] == 4 and b["n_calib_tokens"] == 100
assert rb["bytes"] == ra["bytes"] + 300 * 6 + 8, (ra["bytes"], rb["bytes"])
assert rb["cosine_k"] > 0.9 and rb["softmax_kl"] < 1.0
EOF
expect_exit 0 "$VQ" bench --method turboquant_rvq --bits 1 --seq_len 200 --repeats 1 --head_dim 64 --outlier_tokens 2.5
expect_exit 2 "$VQ" bench --method kivi --n_outlier_channels 4
expect_exit 2 "$VQ" bench --method turboquant_mse --outlier_tokens -1

# sweep: a config name with modifier suffixes round-trips (options in results.json; a rerun
# finds it cached)
if [ ! -f "$MODEL" ] || [ ! -f "$CORPUS" ]; then
    bad "model or corpus missing (scripts/fetch_models.sh, make bench-data)"
    echo "$pass passed, $fail failed"; exit 1
fi
expect_exit 2 "$VQ" sweep -m "$MODEL" -o "$TMP/x" --configs turboquant_mse-3+ox4
head -c 6144 "$CORPUS" > "$TMP/slice.txt"
ARGS=(-m "$MODEL" -o "$TMP/sw" -f "$TMP/slice.txt" -c 64 --chunks 1 --max-tokens 4 --prompts 1 -t 1)
expect_exit 0 "$VQ" sweep "${ARGS[@]}" --configs fp16,turboquant_mse-3+oc4t16
python3 - "$TMP/sw/results.json" <<'EOF' && ok || bad "results.json of a modifier config"
import json, sys
d = json.load(open(sys.argv[1]))
r = [x for x in d["results"] if x["config"]["name"] == "turboquant_mse-3+oc4t16"][0]
assert not r.get("error"), r
o = r["config"]["options"]
assert o["n_outlier_channels"] == 4 and o["n_calib_tokens"] == 16, o
# 30 layers x 3 heads x 64 tokens: 2 sides x 26 bytes + records 6 bytes, channel lists, mu
assert r["kv_bytes"] == 30 * 3 * (64 * (2 * 26 + 6) + 8 + 2 * 128), r["kv_bytes"]
EOF
expect_exit 0 "$VQ" sweep "${ARGS[@]}" --configs fp16,turboquant_mse-3+oc4t16
grep -q "turboquant_mse-3+oc4t16 cached" "$OUT" && ok || bad "modifier config cached on rerun"
# perplexity names the config with its suffix
expect_exit 0 "$VQ" perplexity -m "$MODEL" -f "$TMP/slice.txt" -c 64 --chunks 1 -t 1 --method turboquant_rvq --bits 1 --outlier-tokens 2
grep -q "turboquant_rvq-1+ot2" "$OUT" && ok || bad "perplexity config name with +ot2"
# generate takes the modifiers and refuses a bad combination with the reason
expect_exit 0 "$VQ" generate -m "$MODEL" -p "The cat sat on the" -n 4 -t 1 -q --method turboquant_rvq --bits 1 --outlier-tokens 2.5 --outlier-channels 4
expect_exit 2 "$VQ" generate -m "$MODEL" -p "The cat" -n 2 -t 1 -q --method kivi_sink --outlier-tokens 2.5
grep -q "kivi_sink" "$ERR" && ok || bad "generate names the refused modifier combination"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
