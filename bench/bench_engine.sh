#!/usr/bin/env bash
# bench_engine.sh — prefill and decode tok/s of `veloxquant generate` at given contexts,
# threads and KV methods; median of R runs; one Markdown table on stdout.
#   bench/bench_engine.sh [VQ] [R]     (env: CTXS="512 4096" THREADS="1 2" METHODS="fp16 turboquant_mse:4 kivi:4"
#                                       (kv:NAME = the --kv preset NAME)
#                                       MODEL=path.gguf, default: generate's default model)
# The prompt of a run at context C is the first (C - 64) * 4 bytes of data/corpus_en.txt
# (about 0.85 (C - 64) tokens); 64 tokens are then generated greedily (no early stop matters:
# decode tok/s counts the tokens actually generated). The README's one-thread table was taken
# with OMP_WAIT_POLICY=passive (no effect on one thread); leave it unset for more threads
# (docs/BENCHMARK.md: it makes 2-thread decode several times slower).
set -euo pipefail
VQ="${1:-build/veloxquant}"
R="${2:-3}"
CTXS="${CTXS:-512 4096}"
THREADS="${THREADS:-1 2}"
METHODS="${METHODS:-fp16 turboquant_mse:4 kivi:4}"
CORPUS="${CORPUS:-data/corpus_en.txt}"
MODEL_ARGS=()
[ -n "${MODEL:-}" ] && MODEL_ARGS=(-m "$MODEL")
[ -f "$CORPUS" ] || { echo "bench_engine: $CORPUS missing (make bench-data)" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
echo "| ctx | threads | method | prompt tokens | prefill tok/s | decode tok/s | KV bytes | fullKV_x | peak RSS MB |"
echo "|---|---|---|---|---|---|---|---|---|"
for c in $CTXS; do
    head -c $(( (c - 64) * 4 )) "$CORPUS" > "$tmp/p$c.txt"
    for t in $THREADS; do
        for mb in $METHODS; do
            m=${mb%%:*}; b=${mb#*:}; args=(--method "$m"); [ "$b" != "$mb" ] && args+=(--bits "$b")
            [ "$m" = kv ] && args=(--kv "$b") # a --kv preset: kv:kv4
            for i in $(seq "$R"); do
                "$VQ" generate "${MODEL_ARGS[@]}" -f "$tmp/p$c.txt" -n 64 -c "$c" -t "$t" "${args[@]}" --json \
                    > "$tmp/r$i.json"
            done
            python3 - "$c" "$t" "$mb" "$tmp" "$R" <<'PY'
import json, statistics, sys
c, t, mb, d, r = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
runs = [json.load(open(f"{d}/r{i}.json")) for i in range(1, r + 1)]
med = lambda k: statistics.median(x[k] for x in runs)
x = runs[0]
print(f"| {c} | {t} | {mb.replace(':', ' ')} | {x.get('prompt_tokens', '?')} | {med('prefill_tok_s'):.1f} | "
      f"{med('decode_tok_s'):.1f} | {x['kv_bytes']} | {x['fullKV_x']:.2f} | {med('peak_rss_mb'):.1f} |")
PY
        done
    done
done
