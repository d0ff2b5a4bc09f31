#!/usr/bin/env bash
# CLI test for `sweep`: each config runs in a child process; a config made to fail (bits out of
# range) becomes an `error` entry while the others are measured and written; a second run
# keeps finished entries (cached) and retries only the failed one; usage errors. Tiny protocol
# (ctx 64, 1 chunk, 1 probe prompt x 8 tokens) on the first 6 KiB of the corpus.
set -u
VQ="$1"
# PLplot's font and driver libraries keep allocations until exit (sanitizer builds)
export LSAN_OPTIONS="suppressions=$(pwd)/tests/cli/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
MODEL="${VQ_MODELS:-$HOME/.cache/veloxquant/models}/SmolLM2-135M-Instruct.Q4_1.gguf"
CORPUS=data/corpus_en.txt
fail=0; pass=0
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
OUT="$TMP/out"; ERR="$TMP/err"
. "$(dirname "$0")/lib.sh"

expect_exit 0 "$VQ" sweep --help
expect_exit 2 "$VQ" sweep -m "$MODEL" --configs fp16                       # no -o
expect_exit 2 "$VQ" sweep -o "$TMP/x" --configs fp16                        # no model
expect_exit 2 "$VQ" sweep -m "$MODEL" -o "$TMP/x" --configs fp16,nonsense
grep -q "'nonsense' is not a preset" "$ERR" && ok || bad "bad config name message"
expect_exit 2 "$VQ" sweep -m "$MODEL" -o "$TMP/x" -f /nonexistent.txt

if [ ! -f "$MODEL" ] || [ ! -f "$CORPUS" ]; then
    bad "model or corpus missing (scripts/fetch_models.sh, make bench-data)"
    echo "$pass passed, $fail failed"; exit 1
fi
head -c 6144 "$CORPUS" > "$TMP/slice.txt"
ARGS=(-m "$MODEL" -o "$TMP/sw" -f "$TMP/slice.txt" -c 64 --chunks 1 --max-tokens 8 --prompts 1 -t 1)

# turboquant_mse-9 is syntactically a config but 9 bits are out of range: the child fails
expect_exit 1 "$VQ" sweep "${ARGS[@]}" --configs turboquant_mse-4,turboquant_mse-9,fp16
R="$TMP/sw/results.json"
python3 - "$R" <<'EOF' && ok || bad "results.json after a sweep with a failing config"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["schema"] == "veloxquant.results.v1"
assert d["model"]["n_layers"] == 30 and d["model"]["head_dim"] == 64
assert d["model"]["sha256"] == "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
assert d["protocol"]["ctx"] == 64 and len(d["protocol"]["prompts"]) == 1
r = {x["config"]["name"]: x for x in d["results"]}
assert set(r) == {"fp16", "turboquant_mse-4", "turboquant_mse-9"}, list(r)
assert d["results"][0]["config"]["name"] == "fp16"          # the reference runs first
bad = r["turboquant_mse-9"]
assert "error" in bad and "status 2" in bad["error"] and "ppl" not in bad, bad
f, q = r["fp16"], r["turboquant_mse-4"]
for x in (f, q):
    assert "error" not in x, x
    for k in ("ppl", "kld_mean", "top1", "kv_bytes", "key_x", "fullKV_x", "bits_per_elem",
              "tokens_generated", "fp16_prefix_match", "prefill_tok_s", "cosine_k", "peak_rss_mb"):
        assert k in x, (x["config"]["name"], k)
assert f["kld_mean"] == 0 and f["top1"] == 1 and f["fullKV_x"] == 1 and f["bits_per_elem"] == 16
assert f["kv_bytes"] == 2 * 2 * 30 * 3 * 64 * 64
assert q["kld_mean"] > 0 and q["fullKV_x"] > 3.5 and q["kv_bytes"] < f["kv_bytes"]
assert 1 < f["ppl"] < 1000 and 1 < q["ppl"] < 1000
assert q["fp16_prefix_match"] <= q["tokens_generated"] <= 8
EOF
[ -f "$TMP/sw/logs/turboquant_mse-9.log" ] && ok || bad "child log kept"
[ -f "$TMP/sw/fp16.logits" ] && [ -f "$TMP/sw/fp16.probe.json" ] && ok || bad "fp16 reference files"

# resume: finished entries are cached, the failed one is retried (and fails again)
cp "$R" "$TMP/before.json"
expect_exit 1 "$VQ" sweep "${ARGS[@]}" --configs turboquant_mse-4,turboquant_mse-9,fp16
grep -q "turboquant_mse-4 cached" "$OUT" && grep -q "fp16 cached" "$OUT" && ok || bad "cached entries rerun"
grep -q "turboquant_mse-9 \.\.\." "$OUT" && ok || bad "failed entry not retried"
python3 - "$TMP/before.json" "$R" <<'EOF' && ok || bad "cached entries changed"
import json, sys
a = {x["config"]["name"]: x for x in json.load(open(sys.argv[1]))["results"]}
b = {x["config"]["name"]: x for x in json.load(open(sys.argv[2]))["results"]}
assert a["turboquant_mse-4"] == b["turboquant_mse-4"] and a["fp16"] == b["fp16"]
EOF
# a different protocol on the same folder is refused without --force
expect_exit 1 "$VQ" sweep "${ARGS[@]}" --configs fp16 --max-tokens 9
grep -q "another protocol" "$ERR" && ok || bad "protocol change not detected"
# the report reads what the sweep wrote
expect_exit 0 "$VQ" report "$R" -o "$TMP/fig"
[ -f "$TMP/fig/table.md" ] && grep -q "turboquant_mse-9" "$TMP/fig/table.md" && ok || bad "report of sweep results"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
