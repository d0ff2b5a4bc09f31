#!/usr/bin/env bash
# CLI tests (issue 41) for GGUF tokenizers that must be refused with a message naming the key,
# what was expected and what was found (copies of the default model edited by gguf_edit.py):
# every token string empty, BPE merges missing or empty, an unknown tokenizer.ggml.pre, the
# tokenizer model 'bert' or empty, a scores / token_type array of another count or type, a
# 70 KB token piece. Each is refused by generate, named the same way by perplexity and listed by
# info (the loader's checks, vq_model_check). Also: a tokenizer of another size than the
# vocabulary, and block_count smaller than the layers whose tensors the file holds.
set -u
VQ="$1"
export LSAN_OPTIONS="suppressions=$(pwd)/tests/cli/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
fail=0; pass=0
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
OUT="$TMP/out"; ERR="$TMP/err"
. "$(dirname "$0")/lib.sh"
EDIT="$(dirname "$0")/gguf_edit.py"
has() { grep -qF -- "$1" "$ERR" && ok || { bad "want '$1' in stderr:"; cat "$ERR" >&2; }; }
MODEL="${VQ_MODELS:-$HOME/.cache/veloxquant/models}/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ ! -f "$MODEL" ]; then
    echo "hostile_gguf: model not found ($MODEL), skipped" >&2
    exit 0
fi
echo "The quick brown fox jumps over the lazy dog again and again and again." > "$TMP/t.txt"
# refused EDITS... -- MESSAGE: generate and perplexity refuse the edited copy with MESSAGE
refused() {
    local edits=() msg
    while [ "$1" != "--" ]; do edits+=("$1"); shift; done
    msg=$2
    python3 "$EDIT" "$MODEL" "$TMP/m.gguf" "${edits[@]}" || { bad "edit ${edits[*]}"; return; }
    expect_exit 1 timeout 120 "$VQ" generate -m "$TMP/m.gguf" -p Hello -n 2 -c 64 -t 2
    has "generate: model has no usable tokenizer: $msg"
    grep -q "truncated" "$ERR" && bad "'truncated' for a file that is not" || ok
    expect_exit 1 timeout 120 "$VQ" perplexity -m "$TMP/m.gguf" -f "$TMP/t.txt" -c 64 -t 2
    has "perplexity: $TMP/m.gguf: model has no usable tokenizer: $msg"
    # info lists it by the same checks (vq_model_check), exit 0: the file is readable GGUF
    expect_exit 0 timeout 120 "$VQ" info "$TMP/m.gguf"
    grep -qF "engine: cannot run this model" "$OUT" &&
        grep -qF -- "- model has no usable tokenizer: $msg" "$OUT" &&
        ok || { bad "info does not list '$msg'"; cat "$OUT" >&2; }
}
refused --empty-tokens -- \
    "every one of the 49152 strings of 'tokenizer.ggml.tokens' is empty"
refused --drop-key tokenizer.ggml.merges -- \
    "'tokenizer.ggml.merges' is missing; a 'gpt2' (BPE) tokenizer needs its merges"
refused --trunc-arr tokenizer.ggml.merges 0 -- \
    "'tokenizer.ggml.merges' is empty; a 'gpt2' (BPE) tokenizer needs its merges"
refused --set-str tokenizer.ggml.pre nonesuch -- \
    "'tokenizer.ggml.pre' is 'nonesuch', a pre-tokenizer this engine does not implement"
refused --set-str tokenizer.ggml.model bert -- \
    "'tokenizer.ggml.model' is 'bert'; this engine has the 'gpt2' (BPE) and 'llama'"
refused --set-str tokenizer.ggml.model "" -- \
    "'tokenizer.ggml.model' is empty (0 bytes), expected 'gpt2' or 'llama'"
refused --drop-key tokenizer.ggml.model -- \
    "metadata 'tokenizer.ggml.model' is missing"
refused --drop-key tokenizer.ggml.tokens -- \
    "metadata 'tokenizer.ggml.tokens' is missing"
refused --trunc-arr tokenizer.ggml.token_type 100 -- \
    "'tokenizer.ggml.token_type' is an array of 100 i32, expected an array of 49152 i32"
refused --set-str tokenizer.ggml.token_type x -- \
    "'tokenizer.ggml.token_type' is a string, expected an array of 49152 i32"
refused --set-u32 tokenizer.ggml.tokens 3 -- \
    "'tokenizer.ggml.tokens' is a u32, expected an array of 1..";
refused --token-text 300 "$(python3 -c 'print("y" * 70000, end="")')" -- \
    "entry 300 of 'tokenizer.ggml.tokens' is 70000 bytes, expected at most 65536"
refused --set-str tokenizer.ggml.bos_token_id x -- \
    "'tokenizer.ggml.bos_token_id' is a string, expected a u32 token id"

# a tokenizer of another size than the model's vocabulary: generate and info alike
python3 "$EDIT" "$MODEL" "$TMP/v.gguf" --drop-tokens 100
V="the tokenizer has 49052 tokens but the model's vocabulary (token embedding / output layer)"
V="$V has 49152"
expect_exit 1 "$VQ" generate -m "$TMP/v.gguf" -p Hello -n 2 -c 64 -t 2
has "$V"
expect_exit 0 "$VQ" info "$TMP/v.gguf"
grep -qF -- "- $V" "$OUT" && ok || { bad "info: vocabulary"; cat "$OUT" >&2; }
expect_exit 0 "$VQ" info --json "$TMP/v.gguf"
python3 - "$OUT" <<'EOF' && ok || bad "info --json: engine_problems"
import json, sys
d = json.load(open(sys.argv[1]))
assert any("49052 tokens" in p for p in d["engine_problems"]), d
EOF

# block_count 29 for a 30-layer file: layer 29's tensors would be silently ignored
python3 "$EDIT" "$MODEL" "$TMP/b.gguf" --set-u32 llama.block_count 29
B="9 tensors of layers beyond llama.block_count = 29 (e.g. 'blk.29.attn_norm.weight',"
B="$B layers up to 29)"
expect_exit 1 "$VQ" generate -m "$TMP/b.gguf" -p Hello -n 2 -c 64 -t 2
has "$B"
expect_exit 0 "$VQ" info "$TMP/b.gguf"
grep -qF -- "- $B" "$OUT" && ok || { bad "info: block_count"; cat "$OUT" >&2; }

echo "hostile_gguf: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
