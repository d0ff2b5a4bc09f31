#!/usr/bin/env bash
# CLI test (issue 41): two sweeps into one output folder. The first holds DIR/.sweep.lock
# (flock, its pid inside) for its whole run; the second, started while it runs, stops at once
# (exit 1) naming that pid, writes nothing, and the first finishes with every config measured.
# A later sweep into the folder takes the lock again (cached rows).
set -u
VQ="$1"
export LSAN_OPTIONS="suppressions=$(pwd)/tests/cli/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
fail=0; pass=0
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
OUT="$TMP/out"; ERR="$TMP/err"
. "$(dirname "$0")/lib.sh"
has() { grep -qF -- "$1" "$ERR" && ok || { bad "want '$1' in stderr:"; cat "$ERR" >&2; }; }
MODEL="${VQ_MODELS:-$HOME/.cache/veloxquant/models}/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ ! -f "$MODEL" ]; then
    echo "sweep_lock: model not found ($MODEL), skipped" >&2
    exit 0
fi
printf 'The quick brown fox jumps over the lazy dog. %.0s' $(seq 60) > "$TMP/t.txt"
ARGS=(-m "$MODEL" -f "$TMP/t.txt" -c 64 --chunks 2 --prompts 1 --max-tokens 4 -t 2)

"$VQ" sweep "${ARGS[@]}" --configs fp16,turboquant_mse-4 -o "$TMP/sw" >"$TMP/out1" 2>"$TMP/err1" &
first=$!
for _ in $(seq 200); do  # until the first holds the lock (its pid is in the file)
    [ "$(cat "$TMP/sw/.sweep.lock" 2>/dev/null)" = "$first" ] && break
    sleep 0.05
done
expect_exit 1 "$VQ" sweep "${ARGS[@]}" --configs fp16,turboquant_mse-4 -o "$TMP/sw"
has "sweep: output folder $TMP/sw is in use by another sweep (pid $first, lock $TMP/sw/.sweep.lock)"
grep -q "fp16 \.\.\." "$OUT" && bad "the second sweep ran a config" || ok
wait "$first"
[ $? -eq 0 ] && ok || { bad "the first sweep failed"; cat "$TMP/out1" "$TMP/err1" >&2; }
python3 - "$TMP/sw/results.json" <<'EOF' && ok || bad "the first sweep's results are incomplete"
import json, sys
r = {e["config"]["name"]: e for e in json.load(open(sys.argv[1]))["results"]}
assert set(r) == {"fp16", "turboquant_mse-4"}, r.keys()
assert all("error" not in e and e["ppl"] > 1 for e in r.values())
EOF
expect_exit 0 "$VQ" sweep "${ARGS[@]}" --configs fp16,turboquant_mse-4 -o "$TMP/sw"
grep -q "turboquant_mse-4 cached" "$OUT" && ok || { bad "rerun"; cat "$OUT" "$ERR" >&2; }

echo "sweep_lock: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
