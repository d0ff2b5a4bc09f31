#!/usr/bin/env bash
# demo.sh — one prompt through the default model with four KV caches (keys and values), so that
# the trade-off shows at a glance: text, KV bytes, bits per element and tok/s of each.
#   fp16               the uncompressed reference (the engine computes what llama.cpp computes)
#   turboquant_mse-4   the best ~4-bit config: in README.md's headline table (ctx 2048, 20 chunks)
#                      the lowest KL (0.030, ppl 15.78 vs 15.26) of the configs that store at most
#                      4.5 bits/elem. kivi-4 scores better (KL 0.013) but stores 5.3 bits/elem,
#                      and its fp16 window of the 128 newest tokens would hold this whole short
#                      demo in fp16, showing no compression at all.
#   turboquant_mse-3   the best ~3-bit config: the lowest KL (0.116, ppl 17.75) at 3.26 bits/elem;
#                      asym-k4v2 (same size) has KL 0.137, kivi-2 (3.4 bits) 0.446;
#                      turboquant_mse-3+oc4 is a little better (0.108) but stores 3.63 bits/elem.
#   turboquant_rvq-1   the extreme: 1 bit per residual stage (2.26 bits/elem). Shown to mark the
#                      limit: on the default model its greedy text turns into a loop (KL 1.66).
#   scripts/demo.sh [PATH/TO/veloxquant] [PROMPT]
# Env: VQ_MODELS (model folder), VQ_DEMO_TOKENS (default 64), VQ_DEMO_THREADS (default 2),
#      VQ_DEMO_CHAT=1 to wrap the prompt in the chat template.
set -euo pipefail
VQ="${1:-build/veloxquant}"
PROMPT="${2:-Once upon a time, in a small village by the sea,}"
N="${VQ_DEMO_TOKENS:-64}"
T="${VQ_DEMO_THREADS:-2}"
[ -x "$VQ" ] || { echo "demo: $VQ not found; run make first" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

run() {  # run NAME ARGS...
    local name=$1; shift
    "$VQ" generate -p "$PROMPT" ${VQ_DEMO_CHAT:+--chat} -n "$N" -c 1024 -t "$T" --seed 42 --json "$@" \
        > "$tmp/$name.json"
}
echo "prompt: $PROMPT"
echo "model:  ${VQ_MODELS:-$HOME/.cache/veloxquant/models}/SmolLM2-135M-Instruct.Q4_1.gguf" \
     "(greedy, $N tokens max, $T threads)"
run fp16 --method fp16
run mse4 --method turboquant_mse --bits 4
run mse3 --method turboquant_mse --bits 3
run rvq1 --method turboquant_rvq --bits 1
python3 - "$tmp"/{fp16,mse4,mse3,rvq1}.json <<'PY'
import json, sys, textwrap
runs = [json.load(open(p)) for p in sys.argv[1:]]
labels = ["fp16 (reference)",
          "turboquant_mse 4-bit (best ~4-bit config)",
          "turboquant_mse 3-bit (best ~3-bit config)",
          "turboquant_rvq 1-bit per stage (EXTREME: shown to mark the limit, not for use)"]
short = ["fp16", "turboquant_mse-4", "turboquant_mse-3", "turboquant_rvq-1 (extreme)"]
ref = runs[0]["text"]
def same_prefix(a, b):
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n
for lab, r in zip(labels, runs):
    print()
    print(f"== {lab}")
    for line in textwrap.wrap(r["text"].replace("\n", " ").strip(), 96) or [""]:
        print("   " + line)
print()
cols = ["config", "KV bytes", "bits/elem", "fullKV_x", "prefill tok/s", "decode tok/s", "tokens",
        "= fp16 chars"]
w = [26, 10, 9, 8, 13, 12, 6, 12]
print("  ".join(c.rjust(x) if i else c.ljust(x) for i, (c, x) in enumerate(zip(cols, w))))
for name, r in zip(short, runs):
    # stored bytes over the fp16 bytes of the same tokens, times 16 bits
    bpe = 16.0 * r["kv_bytes"] / r["kv_fp16_bytes"] if r["kv_fp16_bytes"] else 0.0
    vals = [name, f"{r['kv_bytes']:.0f}", f"{bpe:.2f}", f"{r['fullKV_x']:.2f}",
            f"{r['prefill_tok_s']:.1f}", f"{r['decode_tok_s']:.1f}",
            f"{r['tokens_generated']:.0f}", f"{same_prefix(ref, r['text'])}" if r is not runs[0] else "-"]
    print("  ".join(v.rjust(x) if i else v.ljust(x) for i, (v, x) in enumerate(zip(vals, w))))
print()
print("KV bytes: what the cache stores for these tokens; bits/elem = 16 x KV bytes / fp16 bytes")
print("(per-layer side data weighs more at this short length than in the README's ctx-2048 table).")
print("= fp16 chars: how many characters of the text equal the fp16 text. tok/s on this machine,")
print("this run; quality over many prompts: README.md, headline table (ctx 2048).")
PY
