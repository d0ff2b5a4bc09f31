#!/usr/bin/env bash
# CLI test for `generate --observe FILE`: the JSON file is valid and complete (one entry per
# layer, means, model and config), fp16 gives cosine ~1 and KL ~0, a 3-bit method gives KL > 0,
# and bad paths / values are refused before the model runs (exit 2, clear message).
set -u
VQ="$1"
MODEL="${VQ_MODELS:-$HOME/.cache/veloxquant/models}/SmolLM2-135M-Instruct.Q4_1.gguf"
fail=0; pass=0
TMP=$(mktemp -d)
trap 'chmod -R u+w "$TMP" 2>/dev/null; rm -rf "$TMP"' EXIT
OUT="$TMP/out"; ERR="$TMP/err"
. "$(dirname "$0")/lib.sh"
if [ ! -r "$MODEL" ]; then echo "model $MODEL missing (scripts/fetch_models.sh)" >&2; exit 1; fi
export OMP_NUM_THREADS=1

expect_exit 0 "$VQ" generate --help
grep -q -- "--observe FILE" "$OUT" && ok || bad "generate --help lists --observe"

# unwritable or invalid destinations: refused before loading the model
expect_exit 2 "$VQ" generate -m "$MODEL" -p hi -n 2 -t 1 --observe "$TMP/no/such/dir/obs.json"
grep -q "cannot write" "$ERR" && ok || { bad "missing folder message"; cat "$ERR" >&2; }
mkdir "$TMP/ro" && chmod a-w "$TMP/ro"
if [ "$(id -u)" != 0 ]; then
    expect_exit 2 "$VQ" generate -m "$MODEL" -p hi -n 2 -t 1 --observe "$TMP/ro/obs.json"
    grep -q "cannot write '$TMP/ro/obs.json'" "$ERR" && ok || { bad "read-only folder message"; cat "$ERR" >&2; }
    [ ! -e "$TMP/ro/obs.json" ] && ok || bad "nothing written into a read-only folder"
fi
expect_exit 2 "$VQ" generate -m "$MODEL" -p hi -n 2 -t 1 --observe "$TMP"
grep -q "is a folder" "$ERR" && ok || bad "folder as file message"
expect_exit 2 "$VQ" generate -m "$MODEL" -p hi -n 2 -t 1 --observe
grep -q "needs a value" "$ERR" && ok || bad "--observe without a value"
expect_exit 2 "$VQ" generate -m "$MODEL" -p hi -n 2 -t 1 --observe "$TMP/o.json" --observe-queries 0

# fp16 reference: exact within fp16 rounding
expect_exit 0 "$VQ" generate -m "$MODEL" -p "The capital of France is" -n 6 -c 64 -t 1 -q \
    --observe "$TMP/fp16.json"
python3 -m json.tool "$TMP/fp16.json" >/dev/null && ok || bad "fp16 observation is not valid JSON"
# a compressed cache, streamed text unchanged by observing
expect_exit 0 "$VQ" generate -m "$MODEL" -p "The capital of France is" -n 6 -c 64 -t 1 \
    --method turboquant_mse --bits 3 --observe "$TMP/tq3.json" --observe-queries 4
cp "$OUT" "$TMP/text_obs"
expect_exit 0 "$VQ" generate -m "$MODEL" -p "The capital of France is" -n 6 -c 64 -t 1 \
    --method turboquant_mse --bits 3
cmp -s "$OUT" "$TMP/text_obs" && ok || bad "--observe changed the generated text"
python3 - "$TMP/fp16.json" "$TMP/tq3.json" <<'PY' && ok || bad "observation content"
import json, math, sys
a = json.load(open(sys.argv[1])); b = json.load(open(sys.argv[2]))
for d in (a, b):
    assert d["schema"] == "veloxquant.observe.v1", d["schema"]
    assert d["model"]["arch"] == "llama" and d["model"]["n_layers"] == 30, d["model"]
    # 6 tokens generated: the prompt and the first 5 generated tokens went through the model
    P = d["prompt_tokens"]
    assert P >= 4 and d["tokens_generated"] == 6, (P, d["tokens_generated"])
    assert d["n_tokens"] == P + 5 and d["n_passes"] == 6, (d["n_tokens"], d["n_passes"])
    assert len(d["layers"]) == 30 and [e["layer"] for e in d["layers"]] == list(range(30))
    for e in d["layers"]:
        for k in ("cos_k", "cos_v", "rel_mse_k", "ip_rel_err", "ip_slope", "ip_bias", "ip_err_sd",
                  "attn_kl_mean", "attn_kl_max", "attn_out_cos", "knorm_mean", "knorm_std",
                  "knorm_max", "knorm_max_over_mean", "chan_max_over_median"):
            assert isinstance(e[k], (int, float)) and math.isfinite(e[k]), (e["layer"], k, e[k])
        assert len(e["cos_k_heads"]) == 3 and len(e["top_channels"]) == 4
        assert e["n_vectors"] == (P + 5) * 3 and e["n_keys"] == (P + 5) * 3
        assert e["knorm_max"] >= e["knorm_mean"] > 0 and e["knorm_max_over_mean"] >= 1
    assert set(d["worst_layers"]) == {"attn_kl_mean", "cos_k", "cos_v", "ip_rel_err"}
    assert d["observer_bytes"] > (P + 5) * 30 * 3 * 64 * 8
assert a["config"]["k_method"] == "fp16" and b["config"]["k_method"] == "turboquant_mse"
assert b["config"]["k_bits"] == 3 and b["sampling"]["max_queries_per_pass"] == 4
assert a["mean"]["cos_k"] > 0.99999 and a["mean"]["cos_v"] > 0.99999, a["mean"]
assert a["mean"]["attn_kl_mean"] < 1e-5, a["mean"]
assert 0.9 < b["mean"]["cos_k"] < 0.999 and 0.9 < b["mean"]["cos_v"] < 0.999, b["mean"]
assert b["mean"]["attn_kl_mean"] > 100 * max(a["mean"]["attn_kl_mean"], 1e-9), b["mean"]
# key norms do not depend on the cache at layer 0 (same prompt tokens)
assert abs(a["layers"][0]["knorm_mean"] - b["layers"][0]["knorm_mean"]) < 1e-3
PY
# --json output and --observe together
expect_exit 0 "$VQ" generate -m "$MODEL" -p "Hello" -n 3 -c 64 -t 1 --json --observe "$TMP/j.json"
python3 -c 'import json,sys; json.load(open(sys.argv[1])); json.load(open(sys.argv[2]))' "$OUT" "$TMP/j.json" \
    && ok || bad "--json stdout and --observe file both valid"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
