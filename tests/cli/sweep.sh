#!/usr/bin/env bash
# CLI test for `sweep`: each config runs in a child process; a config made to fail (bits out of
# range) becomes an `error` entry while the others are measured and written; a second run
# keeps finished entries (cached) and retries only the failed one; usage errors; two models in
# one sweep (a folder each) and `report` over that folder; --repeats and the error bars it gives
# the report. Tiny protocol
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
# no -m: the default model, as in every command ($VQ_MODELS decides where it is)
VQ_MODELS="$TMP/nomodels" expect_exit 1 "$VQ" sweep -o "$TMP/x" --configs fp16
grep -q "nomodels/SmolLM2-135M-Instruct.Q4_1.gguf" "$ERR" && ok || bad "sweep default model"
expect_exit 2 "$VQ" sweep -m "$MODEL" -o "$TMP/x" --configs fp16,nonsense
grep -q "unknown KV config 'nonsense'" "$ERR" && ok || bad "bad config name message"
# a width the method does not take is refused before anything runs, with its widths
expect_exit 2 "$VQ" sweep -m "$MODEL" -o "$TMP/x" --configs fp16,turboquant_mse-9
grep -q "turboquant_mse accepts 1..8" "$ERR" && ok || bad "out-of-range width message"
expect_exit 2 "$VQ" sweep -m "$MODEL" -o "$TMP/x" --configs polar-7
grep -q "polar has a fixed width" "$ERR" && ok || bad "fixed width message"
expect_exit 2 "$VQ" sweep -m "$MODEL" -o "$TMP/x" -f /nonexistent.txt

if [ ! -f "$MODEL" ] || [ ! -f "$CORPUS" ]; then
    bad "model or corpus missing (scripts/fetch_models.sh, make bench-data)"
    echo "$pass passed, $fail failed"; exit 1
fi
head -c 6144 "$CORPUS" > "$TMP/slice.txt"
ARGS=(-m "$MODEL" -o "$TMP/sw" -f "$TMP/slice.txt" -c 64 --chunks 1 --max-tokens 8 --prompts 1 -t 1)

# turboquant_mse-3+oc40 resolves, but 40 outlier channels exceed head_dim / 2: the child fails
expect_exit 1 "$VQ" sweep "${ARGS[@]}" --configs turboquant_mse-4,turboquant_mse-3+oc40,fp16
R="$TMP/sw/results.json"
grep -q "fp16 \.\.\. \[1/3\]" "$OUT" && grep -q "\[3/3, [0-9]* s elapsed, ETA [0-9]* s\]" "$OUT" && ok \
    || bad "sweep progress (i/N, elapsed, ETA): $(cat "$OUT")"
python3 - "$R" <<'EOF' && ok || bad "results.json after a sweep with a failing config"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["schema"] == "veloxquant.results.v1"
assert d["model"]["n_layers"] == 30 and d["model"]["head_dim"] == 64
assert d["model"]["sha256"] == "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
assert d["protocol"]["ctx"] == 64 and len(d["protocol"]["prompts"]) == 1
r = {x["config"]["name"]: x for x in d["results"]}
assert set(r) == {"fp16", "turboquant_mse-4", "turboquant_mse-3+oc40"}, list(r)
assert d["results"][0]["config"]["name"] == "fp16"          # the reference runs first
bad = r["turboquant_mse-3+oc40"]
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
[ -f "$TMP/sw/logs/turboquant_mse-3+oc40.log" ] && ok || bad "child log kept"
[ -f "$TMP/sw/fp16.logits" ] && [ -f "$TMP/sw/fp16.probe.json" ] && ok || bad "fp16 reference files"

# resume: finished entries are cached, the failed one is retried (and fails again)
cp "$R" "$TMP/before.json"
expect_exit 1 "$VQ" sweep "${ARGS[@]}" --configs turboquant_mse-4,turboquant_mse-3+oc40,fp16
grep -q "turboquant_mse-4 cached" "$OUT" && grep -q "fp16 cached" "$OUT" && ok || bad "cached entries rerun"
grep -q "turboquant_mse-3+oc40 \.\.\." "$OUT" && ok || bad "failed entry not retried"
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
expect_exit $REPORT_OK "$VQ" report "$R" -o "$TMP/fig"
[ -f "$TMP/fig/table.md" ] && grep -q "turboquant_mse-3+oc40" "$TMP/fig/table.md" && ok || bad "report of sweep results"

# two models in one sweep (the second a synthetic qwen3 GGUF with SmolLM2's tokenizer cut to 512
# tokens): one folder per model, each with its own reference, header and rows; the SmolLM2 rows
# equal the one-model run above (same protocol); a rerun keeps both; report over the folder
SYN=tests/golden/synth/qwen3.gguf
TWO=(-f "$TMP/slice.txt" -c 64 --chunks 1 --max-tokens 8 --prompts 1 -t 1
     --configs fp16,turboquant_mse-4)
expect_exit 2 "$VQ" sweep -m "$SYN" -m "$SYN" -o "$TMP/two" "${TWO[@]}"
grep -q "given twice" "$ERR" && ok || bad "a model given twice is not refused"
expect_exit 0 "$VQ" sweep -m "$MODEL" -m "$SYN" -o "$TMP/two" "${TWO[@]}"
grep -q "veloxquant report $TMP/two -o" "$OUT" && ok || bad "sweep does not name the report command"
python3 - "$TMP/two" "$R" <<'EOF' && ok || bad "two-model sweep results"
import json, os, sys
d = sys.argv[1]
# (and the lock file the sweep holds while it runs)
assert sorted(os.listdir(d)) == [".sweep.lock", "SmolLM2-135M-Instruct.Q4_1", "qwen3"], os.listdir(d)
a = json.load(open(d + "/SmolLM2-135M-Instruct.Q4_1/results.json"))
b = json.load(open(d + "/qwen3/results.json"))
one = {x["config"]["name"]: x for x in json.load(open(sys.argv[2]))["results"]}
assert a["model"]["arch"] == "llama" and a["model"]["n_layers"] == 30
assert b["model"]["arch"] == "qwen3" and b["model"]["n_layers"] == 2
assert b["model"]["head_dim"] == 128
assert b["model"]["sha256"] == "f59c40c4c1b9df12efa9b1adda01640b98925b06f279d1d80d6c2bba27b8fb5d"
for r in (a, b):
    assert [x["config"]["name"] for x in r["results"]] == ["fp16", "turboquant_mse-4"]
    assert all("error" not in x for x in r["results"])
ra = {x["config"]["name"]: x for x in a["results"]}
rb = {x["config"]["name"]: x for x in b["results"]}
for k in ("ppl", "kld_mean", "top1", "kv_bytes", "fp16_prefix_match"):
    assert ra["turboquant_mse-4"][k] == one["turboquant_mse-4"][k], k
assert rb["fp16"]["kv_bytes"] == 2 * 2 * 2 * 1 * 128 * 64
assert 0 < rb["turboquant_mse-4"]["kv_bytes"] < rb["fp16"]["kv_bytes"]
assert rb["turboquant_mse-4"]["kld_mean"] > 0 and rb["fp16"]["ppl"] != ra["fp16"]["ppl"]
for m in ("SmolLM2-135M-Instruct.Q4_1", "qwen3"):
    for f in ("fp16.logits", "fp16.probe.json"):
        assert os.path.isfile(os.path.join(d, m, f)), (m, f)
EOF
expect_exit 0 "$VQ" sweep -m "$MODEL" -m "$SYN" -o "$TMP/two" "${TWO[@]}"
[ "$(grep -c ' cached \[[0-9]*/[0-9]*\]$' "$OUT")" -eq 4 ] && ok || bad "two-model rerun does not keep all four entries"
expect_exit $REPORT_OK "$VQ" report "$TMP/two" -o "$TMP/fig2"
for s in SmolLM2-135M-Instruct.Q4_1 qwen3; do
    [ "$FIGURES" -eq 1 ] || break  # built without PLplot: table.md only
    for k in throughput quality memory distortion output report; do
        [ -s "$TMP/fig2/$s-$k.png" ] && ok || bad "missing $s-$k.png"
    done
done
python3 - "$TMP/fig2/table.md" <<'EOF' && ok || bad "report over the two-model folder"
import sys
t = open(sys.argv[1], encoding="utf-8").read()
secs = t.split("\n## ")[1:]
assert [s.split("\n")[0] for s in secs] == ["SmolLM2-135M-Instruct.Q4_1", "qwen3"], secs
for s, arch in zip(secs, ("llama, 30 layers", "qwen3, 2 layers")):
    assert arch in s and s.count("\n| fp16 |") == 2 and "\n| turboquant_mse-4 |" in s, s
EOF
# two model files with one file name: the second one's folder gets a suffix
mkdir -p "$TMP/b" && cp tests/golden/synth/llama_swa.gguf "$TMP/b/qwen3.gguf"
expect_exit 0 "$VQ" sweep -m "$SYN" -m "$TMP/b/qwen3.gguf" -o "$TMP/three" "${TWO[@]}"
[ -f "$TMP/three/qwen3/results.json" ] && [ -f "$TMP/three/qwen3-2/results.json" ] && ok \
    || bad "models with one file name share a folder"
grep -qE '"arch":[[:space:]]*"llama"' "$TMP/three/qwen3-2/results.json" && ok || bad "second qwen3.gguf folder"
# the windowed model (window 32 on its 3 layers) records its windows; the report's memory
# figure and table use them (the other model has none)
python3 - "$TMP/three" <<'EOF' && ok || bad "sliding windows in results.json"
import json, sys
a = json.load(open(sys.argv[1] + "/qwen3/results.json"))["model"]
b = json.load(open(sys.argv[1] + "/qwen3-2/results.json"))["model"]
assert "layer_window" not in a and b["layer_window"] == [32, 32, 32], (a, b)
EOF
expect_exit $REPORT_OK "$VQ" report "$TMP/three" -o "$TMP/fig4"
[ "$(grep -c 'sliding window 32 on 3 of 3 layers' "$TMP/fig4/table.md")" -eq 1 ] && ok \
    || bad "report table names the windows"
expect_exit 1 "$VQ" report "$TMP/b" -o "$TMP/fig3"
grep -q "no results.json" "$ERR" && ok || bad "report of a folder without results"

# --repeats N: each config's speed measured N times; results.json records every run and their
# medians as prefill_tok_s / decode_tok_s; without --repeats no runs are recorded (the files
# written before repeats existed read the same); `report` draws the error bars
expect_exit 2 "$VQ" sweep "${ARGS[@]}" --configs fp16 --repeats 0
grep -q "repeats: 0 is out of range" "$ERR" && ok || bad "--repeats 0: $(cat "$ERR")"
expect_exit 0 "$VQ" sweep "${ARGS[@]}" -o "$TMP/rep" --configs fp16,kv4 --repeats 3
python3 - "$TMP/rep/results.json" "$TMP/sw/results.json" <<'EOF' && ok || bad "--repeats 3 in results.json"
import json, statistics, sys
rows = json.load(open(sys.argv[1]))["results"]
assert [r["config"]["name"] for r in rows] == ["fp16", "kv4"], rows
for r in rows:
    for k in ("prefill_tok_s", "decode_tok_s"):
        runs = r[k + "_runs"]
        assert len(runs) == 3 and all(x > 0 for x in runs), (k, runs)
        assert r[k] == statistics.median(runs), (k, r[k], runs)
assert all("decode_tok_s_runs" not in r for r in json.load(open(sys.argv[2]))["results"])
EOF
if [ "$FIGURES" -eq 1 ]; then
    expect_exit 0 "$VQ" report "$TMP/rep" -o "$TMP/fig_rep" --layout-json "$TMP/rep_lay.json"
    python3 - "$TMP/rep_lay.json" <<'EOF' && ok || bad "report of a --repeats sweep: error bars, caption"
import json, sys
f = [f for f in json.load(open(sys.argv[1]))["figures"] if f["file"].endswith("-throughput.png")][0]
assert sum(b["kind"] == "errbar" for b in f["boxes"]) >= 1, "no error bar"
assert any("1 thread; 3 runs per config" in b["text"] for b in f["boxes"]), "caption"
EOF
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
