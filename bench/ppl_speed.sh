#!/usr/bin/env bash
# ppl_speed.sh — the prefill speed of `veloxquant perplexity` (batched forward passes over
# chunks of CTX tokens, the KV cache compressed as it fills) for fp16 and the --kv presets,
# the caches alternated within each of REPS rounds so that machine drift hits all of them
# alike; medians, and ratios against fp16's median. Writes one JSON file (rows: kv, median
# tok/s, samples, ratio) and prints a Markdown table. docs/BENCHMARK.md describes the protocol.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)

usage() {
    cat <<EOF
usage: bench/ppl_speed.sh [--out FILE] [--vq PATH]

  --out FILE   JSON output (default: bench/results/ppl_speed.json)
  --vq PATH    the veloxquant binary (default: build/veloxquant)
  -h, --help   this text

Environment (defaults in brackets):
  MODEL    GGUF file [the default model]
  CORPUS   text [data/corpus_en.txt]
  CTX      tokens per chunk [2048]
  CHUNKS   chunks per run [2]
  THREADS  threads [2]
  KVS      caches: fp16 and --kv presets [fp16 kv8 kv5 kv4 kv3 kv2]
  REPS     rounds; medians are reported [3]
EOF
}

die() {
    echo "ppl_speed: $*" >&2
    exit 1
}

OUT="$ROOT/bench/results/ppl_speed.json"
VQ="$ROOT/build/veloxquant"
while [ $# -gt 0 ]; do
    case "$1" in
    -h | --help) usage; exit 0 ;;
    --out) [ $# -ge 2 ] || die "--out needs a file"; OUT="$2"; shift ;;
    --vq) [ $# -ge 2 ] || die "--vq needs a path"; VQ="$2"; shift ;;
    *) die "unknown argument '$1' (--help)" ;;
    esac
    shift
done
CORPUS="${CORPUS:-$ROOT/data/corpus_en.txt}"
CTX="${CTX:-2048}"
CHUNKS="${CHUNKS:-2}"
THREADS="${THREADS:-2}"
KVS="${KVS:-fp16 kv8 kv5 kv4 kv3 kv2}"
REPS="${REPS:-3}"
[ -x "$VQ" ] || die "$VQ not built (make)"
[ -f "$CORPUS" ] || die "$CORPUS missing (make bench-data)"
case " $KVS " in *" fp16 "*) ;; *) die "KVS must hold fp16 (the ratios' baseline)" ;; esac
MODEL_ARGS=()
[ -n "${MODEL:-}" ] && MODEL_ARGS=(-m "$MODEL")
COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2> /dev/null || echo unknown)
git -C "$ROOT" diff --quiet HEAD 2> /dev/null || COMMIT="$COMMIT+dirty"
START=$(date -u '+%Y-%m-%d %H:%M')
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for r in $(seq "$REPS"); do
    for kv in $KVS; do
        echo "ppl_speed: round $r of $REPS, $kv" >&2
        "$VQ" perplexity "${MODEL_ARGS[@]}" -f "$CORPUS" -c "$CTX" --chunks "$CHUNKS" \
            -t "$THREADS" --kv "$kv" --json > "$tmp/$kv.$r.json" 2> "$tmp/err" ||
            { cat "$tmp/err" >&2; die "perplexity failed ($kv, round $r)"; }
    done
done

# the CPU and the kernel variant ours ran, as the library reports them (as llama_bench.sh)
CPU=$("$VQ" version --verbose | sed -n 's/^cpu: //p')
python3 - "$tmp" "$OUT" "$KVS" "$REPS" "$COMMIT" "$START" "$CTX" "$CHUNKS" "$THREADS" \
    "${MODEL:-}" "$CPU" <<'PY'
import json, os, statistics, sys, time
tmp, out, kvs, reps, commit, start, ctx, chunks, threads, model, cpu = sys.argv[1:12]
kvs, reps = kvs.split(), int(reps)
rows, base = [], None
for kv in kvs:
    runs = [json.load(open(os.path.join(tmp, "%s.%d.json" % (kv, r)))) for r in range(1, reps + 1)]
    samples = [x["prefill_tok_s"] for x in runs]
    med = statistics.median(samples)
    if kv == "fp16":
        base = med
    rows.append({"kv": kv, "prefill_tok_s": med, "samples": samples,
                 "ppl": runs[0].get("ppl"), "kv_bytes": runs[0].get("kv_bytes")})
for r in rows:
    r["x_fp16"] = r["prefill_tok_s"] / base
env = []
if model:
    env.append("MODEL=%s" % model.replace(os.path.expanduser("~"), "~"))
env += ["CTX=%s" % ctx, "CHUNKS=%s" % chunks, "THREADS=%s" % threads,
        'KVS="%s"' % " ".join(kvs), "REPS=%d" % reps]
d = {"veloxquant_commit": commit, "cpu": cpu, "nproc": os.cpu_count(),
     "date": "%s-%s UTC" % (start, time.strftime("%H:%M", time.gmtime())),
     "model": os.path.basename(model) if model else "SmolLM2-135M-Instruct.Q4_1.gguf",
     "ctx": int(ctx), "chunks": int(chunks), "threads": int(threads), "reps": reps,
     "command": " ".join(env) + " bench/ppl_speed.sh", "rows": rows}
with open(out, "w") as f:
    json.dump(d, f, indent=1)
    f.write("\n")
print("| KV | prefill tok/s (median) | samples | × fp16 |")
print("|---|---:|---|---:|")
for r in rows:
    print("| %s | %.1f | %s | %.2f |" % (r["kv"], r["prefill_tok_s"],
                                         " / ".join("%.1f" % s for s in r["samples"]), r["x_fp16"]))
print("ppl_speed: wrote %s" % out, file=sys.stderr)
PY
