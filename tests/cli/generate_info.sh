#!/usr/bin/env bash
# CLI tests for `generate` and `info`: option validation, output, JSON, and truncated/corrupt
# model files (error exit status 1 with a message, never a crash).
set -u
VQ="$1"
MODEL="${VQ_MODELS:-$HOME/.cache/veloxquant/models}/SmolLM2-135M-Instruct.Q4_1.gguf"
fail=0; pass=0
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
OUT="$TMP/out"; ERR="$TMP/err"
. "$(dirname "$0")/lib.sh"
if [ ! -r "$MODEL" ]; then echo "model $MODEL missing (scripts/fetch_models.sh)" >&2; exit 1; fi
export OMP_NUM_THREADS=1

# --- generate: usage and validation
expect_exit 0 "$VQ" generate --help
grep -q -- "--k-method" "$OUT" && ok || bad "generate --help lists --k-method"
expect_exit 2 "$VQ" generate -m "$MODEL"
grep -q "give a prompt" "$ERR" && ok || bad "missing prompt message"
expect_exit 2 "$VQ" generate -p hi -f /etc/hostname
expect_exit 2 "$VQ" generate -p hi --bogus
expect_exit 2 "$VQ" generate -p hi -n -1
expect_exit 2 "$VQ" generate -p hi -n abc
expect_exit 2 "$VQ" generate -p hi -c 0
expect_exit 2 "$VQ" generate -p hi -t 0
expect_exit 2 "$VQ" generate -p hi --top-p 0
expect_exit 2 "$VQ" generate -p hi --temp -1
expect_exit 2 "$VQ" generate -p hi --method nope
grep -q "unknown method 'nope'" "$ERR" && ok || bad "unknown method message"
expect_exit 2 "$VQ" generate -m "$MODEL" -p hi --method turboquant_mse --bits 9 -t 1
grep -qi "bits" "$ERR" && ok || bad "bad bits message"
expect_exit 2 "$VQ" generate -m "$MODEL" -p "a b c d e f g h" -c 4 -t 1
grep -q "leaves no room" "$ERR" && ok || bad "prompt longer than ctx message"
expect_exit 2 "$VQ" generate -p hi --system x
expect_exit 1 "$VQ" generate -m "$TMP/none.gguf" -p hi
grep -q "cannot load model" "$ERR" && ok || bad "missing model message"

# --- generate: a real run (greedy), text and statistics
expect_exit 0 "$VQ" generate -m "$MODEL" -p "The capital of France is" -n 6 -c 64 -t 1
grep -q "Paris" "$OUT" && ok || { bad "greedy continuation should say Paris"; cat "$OUT" >&2; }
grep -q "OMP_WAIT_POLICY" "$ERR" && bad "no wait-policy note without the variable" || ok
# OMP_WAIT_POLICY=passive with several threads: a note on stderr (decode several times slower);
# one thread: none
OMP_WAIT_POLICY=passive expect_exit 0 "$VQ" generate -m "$MODEL" -p "Hi" -n 2 -c 64 -t 2 -q
grep -q "note: OMP_WAIT_POLICY=passive makes the 2 threads sleep" "$ERR" && ok ||
    bad "passive wait policy on 2 threads should print a note"
OMP_WAIT_POLICY=passive expect_exit 0 "$VQ" generate -m "$MODEL" -p "Hi" -n 2 -c 64 -t 1 -q
grep -q "OMP_WAIT_POLICY" "$ERR" && bad "no wait-policy note on one thread" || ok
for k in "prefill:" "decode:" "key_x" "fullKV_x" "peak RSS"; do
    grep -q "$k" "$ERR" && ok || bad "generate stats lack '$k'"
done
# default model via $VQ_MODELS, JSON output, compressed cache
VQ_MODELS="$(dirname "$MODEL")" expect_exit 0 "$VQ" generate -p "Once upon a time" -n 12 -c 64 -t 1 \
    --k-method turboquant_mse --k-bits 4 --v-method turboquant_mse --v-bits 4 --json
python3 - "$OUT" <<'PY' && ok || bad "generate --json content"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["k_method"] == "turboquant_mse" and d["k_bits"] == 4, d
assert d["tokens_generated"] >= 1 and d["prompt_tokens"] == 4, d
assert d["key_x"] > 3.0 and d["fullKV_x"] > 3.0, d
assert d["decode_tok_s"] > 0 and d["prefill_tok_s"] > 0 and d["peak_rss_mb"] > 10, d
assert isinstance(d["text"], str) and len(d["text"]) > 0
PY
# weights read into huge pages (default) or mapped (VQ_WEIGHTS=mmap): the same greedy text
expect_exit 0 "$VQ" generate -m "$MODEL" -p "The capital of France is" -n 12 -c 64 -t 1 --json
cp "$OUT" "$TMP/read.json"
VQ_WEIGHTS=mmap expect_exit 0 "$VQ" generate -m "$MODEL" -p "The capital of France is" -n 12 -c 64 -t 1 --json
python3 - "$TMP/read.json" "$OUT" <<'PY' && ok || bad "VQ_WEIGHTS=mmap changes the generated text"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["text"] == b["text"] and len(a["text"]) > 0, (a["text"], b["text"])
PY
# K-quant weights repacked at load into 16-row groups (default) or kept in their rows
# (VQ_REPACK=0; docs/ALGORITHMS.md §9.19): the same logits, so the same greedy text, on Gemma 3's
# Q4_K / Q6_K matrices, over a prompt long enough for the four- and eight-token gemm
GEMMA="${VQ_MODELS:-$HOME/.cache/veloxquant/models}/gemma-3-270m-q4_k_m.gguf"
if [ -r "$GEMMA" ]; then
    P="The history of the printing press begins in the fifteenth century, when movable type"
    expect_exit 0 "$VQ" generate -m "$GEMMA" -p "$P" -n 12 -c 96 -t 2 --json
    cp "$OUT" "$TMP/repacked.json"
    VQ_REPACK=0 expect_exit 0 "$VQ" generate -m "$GEMMA" -p "$P" -n 12 -c 96 -t 2 --json
    python3 - "$TMP/repacked.json" "$OUT" <<'PY' && ok || bad "VQ_REPACK=0 changes the generated text"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["prompt_tokens"] >= 13, a["prompt_tokens"]
assert a["text"] == b["text"] and len(a["text"]) > 0, (a["text"], b["text"])
PY
fi
# --timings: per-phase ms per token of the prefill and the decode, as text and in --json; the
# phases add up to the total, the decode counts its evaluated tokens, no "timings" without it
expect_exit 0 "$VQ" generate -m "$MODEL" -p "Once upon a time" -n 6 -c 64 -t 1 --kv kv4 --timings -q
for k in "timings: ms per token" "attention" "attn_out" "ffn" "output" "total"; do
    grep -q "$k" "$ERR" && ok || bad "generate --timings text lacks '$k'"
done
expect_exit 0 "$VQ" generate -m "$MODEL" -p "Once upon a time" -n 6 -c 64 -t 1 --kv kv4 --timings --json
python3 - "$OUT" <<'PY' && ok || bad "generate --timings --json content"
import json, sys
d = json.load(open(sys.argv[1]))
t = d["timings"]
assert t["prefill"]["tokens"] == d["prefill_tokens"] == 4, d
assert t["decode"]["tokens"] == d["decode_tokens"] >= 1, d
for part in ("prefill", "decode"):
    ms = t[part]["ms_per_token"]
    phases = ["qkv", "attention", "attn_out", "ffn", "output", "other"]
    assert all(ms[p] >= 0 for p in phases) and ms["attention"] > 0 and ms["ffn"] > 0, ms
    assert abs(sum(ms[p] for p in phases) - ms["total"]) <= 1e-9 * ms["total"] + 1e-12, ms
# the decode's phases account for its wall time (within clock reads and sampling)
dec_ms = 1e3 / d["decode_tok_s"]
assert 0.5 * dec_ms < t["decode"]["ms_per_token"]["total"] <= 1.05 * dec_ms, (dec_ms, t)
PY
expect_exit 0 "$VQ" generate -m "$MODEL" -p "Hi" -n 2 -c 64 -t 1 --json
grep -q '"timings"' "$OUT" && bad "no timings in --json without --timings" || ok
# every KV option of perplexity/sweep works in generate (one option table): kivi with a group
# of 64 and no fp16 window, default bits (2, as in perplexity and sweep)
expect_exit 0 "$VQ" generate -m "$MODEL" -p "The capital of France is" -n 4 -c 64 -t 1 \
    --group-size 64 --residual-length 0 --method kivi --json
python3 - "$OUT" <<'PY' && ok || bad "generate --group-size 64 --residual-length 0 --method kivi"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["k_method"] == "kivi" and d["v_method"] == "kivi" and d["k_bits"] == 2 and d["v_bits"] == 2, d
assert d["kv_seed"] == 42 and d["tokens_generated"] >= 1, d
PY
# ... and invalid values are refused the same way (group size must divide the window)
expect_exit 2 "$VQ" generate -m "$MODEL" -p hi -n 1 -c 64 -t 1 --method kivi --group-size 48 \
    --residual-length 100
expect_exit 2 "$VQ" generate -p hi --method turboquant_mse --bits 1.5
grep -q "turboquant_mse accepts 1..8" "$ERR" && ok || bad "fractional bits message"
# exact activations: recorded in --json, and "Paris" still comes out greedily
expect_exit 0 "$VQ" generate -m "$MODEL" -p "The capital of France is" -n 4 -c 64 -t 1 --f32-activations --json
python3 - "$OUT" <<'PY' && ok || bad "generate --f32-activations"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["activations"] == "f32" and "Paris" in d["text"], d
PY
# --prompt-tokens N keeps the first N prompt tokens; --depth D evaluates D of them untimed and
# times the rest (bench/llama_bench.sh): the same chunks as -b D, so the same greedy text
head -c 2000 "$(dirname "$0")/../golden/text_en.txt" > "$TMP/long.txt"
expect_exit 0 "$VQ" generate -m "$MODEL" -f "$TMP/long.txt" --prompt-tokens 120 --depth 80 -n 9 \
    -c 256 -t 1 --json
cp "$OUT" "$TMP/d1"
expect_exit 0 "$VQ" generate -m "$MODEL" -f "$TMP/long.txt" --prompt-tokens 120 -b 80 -n 9 \
    -c 256 -t 1 --json
python3 - "$TMP/d1" "$OUT" <<'PY' && ok || bad "generate --prompt-tokens / --depth"
import json, sys
d, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert d["prompt_tokens"] == 120 and d["depth"] == 80 and d["prefill_tokens"] == 40, d
assert b["prompt_tokens"] == 120 and b["depth"] == 0 and b["prefill_tokens"] == 120, b
assert d["tokens_generated"] == 9 and d["decode_tokens"] == 8, d
assert d["prefill_tok_s"] > 0 and d["decode_tok_s"] > 0, d
assert d["text"] == b["text"] and len(d["text"]) > 0, (d["text"], b["text"])
PY
expect_exit 2 "$VQ" generate -m "$MODEL" -p "a b c" --prompt-tokens 50 -n 1 -c 64 -t 1
grep -q "fewer than --prompt-tokens 50" "$ERR" && ok || bad "--prompt-tokens too many message"
expect_exit 2 "$VQ" generate -m "$MODEL" -f "$TMP/long.txt" --prompt-tokens 20 --depth 20 -n 1 \
    -c 64 -t 1
grep -q "depth 20 leaves no prompt token" "$ERR" && ok || bad "--depth >= prompt message"
expect_exit 2 "$VQ" generate -p hi --prompt-tokens 0
expect_exit 2 "$VQ" generate -p hi --depth -1
expect_exit 0 "$VQ" generate -m "$MODEL" -p "Hello" --chat -n 4 -c 128 -t 1 -q
grep -q "decode:" "$ERR" && ok || bad "chat run stats"
expect_exit 0 "$VQ" generate -m "$MODEL" -p "Hi" -n 4 -c 64 -t 1 --temp 0.8 --top-k 20 --top-p 0.9 --seed 3 --json
cp "$OUT" "$TMP/s1"
expect_exit 0 "$VQ" generate -m "$MODEL" -p "Hi" -n 4 -c 64 -t 1 --temp 0.8 --top-k 20 --top-p 0.9 --seed 3 --json
python3 -c 'import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); assert a["text"]==b["text"]' "$TMP/s1" "$OUT" \
    && ok || bad "sampling with a seed is deterministic"

# --- info
expect_exit 0 "$VQ" info --help
VQ_MODELS="$TMP/nomodels" expect_exit 1 "$VQ" info   # no model given: the default one
grep -q "nomodels/SmolLM2-135M-Instruct.Q4_1.gguf" "$ERR" && ok || bad "info default model"
expect_exit 0 "$VQ" info "$MODEL"
for k in "general.architecture" "Q4_1" "KV geometry" "head_dim 64" "30 layers"; do
    grep -q "$k" "$OUT" && ok || bad "info lacks '$k'"
done
expect_exit 0 "$VQ" info --json --tensors --method turboquant_mse --bits 4 --ctx 1024 "$MODEL"
python3 - "$OUT" <<'PY' && ok || bad "info --json content"
import json, sys
d = json.load(open(sys.argv[1]))
m = d["model"]
assert m["n_layers"] == 30 and m["n_kv_heads"] == 3 and m["head_dim"] == 64, m
assert m["kv_fp16_bytes_per_token"] == 2 * 30 * 3 * 64 * 2
assert m["kv_method_bytes_per_token"] < m["kv_fp16_bytes_per_token"] / 3
assert len(d["tensors"]) == d["n_tensors"] == 272
assert d["tensor_types"]["Q4_1"] == 210
PY
expect_exit 2 "$VQ" info --method turboquant_mse --bits 9 "$MODEL"
expect_exit 1 "$VQ" info "$TMP/none.gguf"

# --- truncated and corrupt model files: exit 1 with a message (no signal, no crash)
SIZE=$(stat -c %s "$MODEL")
for cut in 0 7 24 5000 1000000 $((SIZE / 2)) $((SIZE - 1)); do
    head -c "$cut" "$MODEL" > "$TMP/t.gguf"
    expect_exit 1 "$VQ" info "$TMP/t.gguf"
    expect_exit 1 "$VQ" generate -m "$TMP/t.gguf" -p hi -n 1 -t 1
    [ -s "$ERR" ] && ok || bad "no message for truncation at $cut"
done
head -c 2000000 "$MODEL" > "$TMP/c.gguf"
printf '\xff\xff\xff\xff\xff\xff\xff\x7f' | dd of="$TMP/c.gguf" bs=1 seek=16 conv=notrunc 2>/dev/null
expect_exit 1 "$VQ" info "$TMP/c.gguf"
head -c 64 /dev/urandom > "$TMP/r.gguf"
expect_exit 1 "$VQ" generate -m "$TMP/r.gguf" -p hi -n 1

echo "generate_info: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
