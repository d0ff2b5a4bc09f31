#!/usr/bin/env bash
# demo.sh — one prompt through the default model with an fp16 KV cache and with a 1-bit
# turboquant_rvq KV cache (keys and values), side by side: text, tokens, speed, KV bytes.
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
    "$VQ" generate -p "$PROMPT" ${VQ_DEMO_CHAT:+--chat} -n "$N" -c 1024 -t "$T" --seed 42 --json "$@" > "$tmp/$name.json"
}
echo "prompt: $PROMPT"
echo "model:  ${VQ_MODELS:-$HOME/.cache/veloxquant/models}/SmolLM2-135M-Instruct.Q4_1.gguf (greedy, $N tokens max, $T threads)"
run fp16 --method fp16
run rvq1 --method turboquant_rvq --bits 1
python3 - "$tmp/fp16.json" "$tmp/rvq1.json" <<'PY'
import json, sys, textwrap
runs = [json.load(open(p)) for p in sys.argv[1:]]
labels = ["fp16 K+V", "turboquant_rvq 1-bit K+V"]
W = 48
print()
print(" | ".join(l.ljust(W) for l in labels))
print("-+-".join("-" * W for _ in labels))
cols = [textwrap.wrap(r["text"].replace("\n", " "), W) or [""] for r in runs]
for i in range(max(len(c) for c in cols)):
    print(" | ".join((c[i] if i < len(c) else "").ljust(W) for c in cols))
print()
rows = [("tokens generated", "tokens_generated", "{:.0f}"), ("prefill tok/s", "prefill_tok_s", "{:.1f}"),
        ("decode tok/s", "decode_tok_s", "{:.1f}"), ("KV bytes", "kv_bytes", "{:.0f}"),
        ("key_x", "key_x", "{:.2f}"), ("fullKV_x", "fullKV_x", "{:.2f}"), ("peak RSS MB", "peak_rss_mb", "{:.1f}")]
for name, key, fmt in rows:
    print(name.ljust(18) + "".join(fmt.format(r[key]).rjust(W // 2) for r in runs))
same = 0
a, b = runs[0]["text"], runs[1]["text"]
while same < min(len(a), len(b)) and a[same] == b[same]:
    same += 1
print("identical prefix:".ljust(18) + f"{same} characters")
PY
