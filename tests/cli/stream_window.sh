#!/usr/bin/env bash
# CLI test of the StreamingLLM options --window W --sinks S (cache params stream_window /
# stream_sinks): one KV-table entry, so every KV command resolves them the same; the config
# label carries +wWsS and parses back; estimate-memory bounds the bytes at any context; a real
# generate run with a window far below the context runs and reports fewer KV bytes than the
# same run without it; out-of-range values are refused with a message; --sinks alone keeps
# full attention with fp16 sink rows (suffix +sS, parsed back).
set -u
VQ="$1"
MODEL="${VQ_MODELS:-$HOME/.cache/veloxquant/models}/SmolLM2-135M-Instruct.Q4_1.gguf"
fail=0; pass=0
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
OUT="$TMP/out"; ERR="$TMP/err"
. "$(dirname "$0")/lib.sh"

# the same resolved config in every KV command, label with the suffix
for c in generate perplexity sweep bench; do
    expect_exit 0 "$VQ" $c --method turboquant_mse --bits 4 --window 64 --sinks 4 --print-kv-config
    grep -q '"config":"turboquant_mse-4+w64s4"' "$OUT" && grep -q '"stream_window":64,"stream_sinks":4' "$OUT" \
        && ok || bad "$c: window/sinks not in the resolved config: $(cat "$OUT")"
done
# the label parses back (sweep --configs takes config names)
expect_exit 0 "$VQ" sweep --configs turboquant_mse-4+w64s4 --print-kv-config
grep -q '"stream_window":64,"stream_sinks":4' "$OUT" && ok || bad "label +w64s4 does not parse back: $(cat "$OUT")"
expect_exit 0 "$VQ" generate --method turboquant_mse --bits 4 --sinks 4 --print-kv-config
grep -q '"config":"turboquant_mse-4+s4"' "$OUT" && grep -q '"stream_window":0,"stream_sinks":4' "$OUT" \
    && ok || bad "--sinks alone not in the resolved config: $(cat "$OUT")"
expect_exit 0 "$VQ" sweep --configs kivi-4:turboquant_mse-4+g64+res0+s4+kc --print-kv-config
grep -q '"stream_window":0,"stream_sinks":4' "$OUT" && grep -q '"config":"kivi-4:turboquant_mse-4+g64+res0+s4+kc"' "$OUT" \
    && ok || bad "label +s4 does not parse back: $(cat "$OUT")"
expect_exit 0 "$VQ" sweep --configs kivi-2+w128 --print-kv-config
grep -q '"stream_window":128,"stream_sinks":0' "$OUT" && ok || bad "label +w128 does not parse back: $(cat "$OUT")"
# bad values
expect_exit 2 "$VQ" generate --window -1 --print-kv-config
grep -q -- "--window" "$ERR" && ok || bad "negative window: no message naming --window"
expect_exit 2 "$VQ" generate --window 64 --sinks 5000 --print-kv-config
grep -q -- "--sinks" "$ERR" && ok || bad "sinks 5000: no message naming --sinks"

# estimate-memory: bounded bytes (same at 8k and 64k context), far below the full cache
geo="--layers 30 --kv-heads 3 --head-dim 64"
expect_exit 0 "$VQ" estimate-memory $geo -c 8192 --method turboquant_mse --bits 4 --window 512 --sinks 4 --json
b8=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["configs"][0]["total_bytes"])' "$OUT" 2>/dev/null)
expect_exit 0 "$VQ" estimate-memory $geo -c 65536 --method turboquant_mse --bits 4 --window 512 --sinks 4 --json
b64=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["configs"][0]["total_bytes"])' "$OUT" 2>/dev/null)
expect_exit 0 "$VQ" estimate-memory $geo -c 65536 --method turboquant_mse --bits 4 --json
full=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["configs"][0]["total_bytes"])' "$OUT" 2>/dev/null)
if [ -n "$b8" ] && [ "$b8" = "$b64" ] && [ -n "$full" ] && [ "$b64" -lt $((full / 50)) ]; then ok
else bad "estimate-memory with --window 512: 8k=$b8 64k=$b64 full 64k=$full (want equal and < full/50)"; fi

# a real run: a prompt of ~800 tokens with window 32 + 4 sinks frees the pages (256 tokens
# each) below the window and keeps fewer bytes than the full cache
if [ -f "$MODEL" ]; then
    for i in $(seq 40); do echo "The history of the city of Paris is long, and its streets are old."; done > "$TMP/p.txt"
    run() { "$VQ" generate -m "$MODEL" -f "$TMP/p.txt" -n 8 -c 1024 -t 1 \
            --method turboquant_mse --bits 4 --json "$@"; }
    expect_exit 0 run --window 32 --sinks 4
    kw=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["kv_bytes"])' "$OUT" 2>/dev/null)
    nw=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["tokens_generated"])' "$OUT" 2>/dev/null)
    expect_exit 0 run
    kf=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["kv_bytes"])' "$OUT" 2>/dev/null)
    if [ -n "$kw" ] && [ -n "$kf" ] && [ "$kw" -lt "$kf" ] && [ "${nw:-0}" -gt 0 ]; then ok
    else bad "generate --window 32 --sinks 4: kv_bytes $kw (full: $kf), generated $nw"; fi
    # --sinks alone: a real run, full attention, the sink rows on top of the full cache's codes
    expect_exit 0 run --sinks 4
    ks=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["kv_bytes"])' "$OUT" 2>/dev/null)
    if [ -n "$ks" ] && [ "$ks" -gt "$kf" ] && [ "$ks" -le $((kf + 2 * 4 * 64 * 2 * 3 * 30)) ]; then ok
    else bad "generate --sinks 4 alone: kv_bytes $ks (full: $kf), want above"; fi
fi

echo "stream_window: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
