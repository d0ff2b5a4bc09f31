#!/usr/bin/env bash
# CLI tests for the text options of `generate` (on the library's vq_generate): --stop ends the
# text before the stop string and never prints it; the streamed text equals --json's "text"
# for the same greedy run; -f - reads the prompt from standard input; the llama.cpp spellings
# --ctx-size and -s; finish_reason; the new sampling options and their validation.
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
P="Once upon a time, in a small village,"
G=(generate -m "$MODEL" -c 128 -t 1)

# --- validation and help
expect_exit 0 "$VQ" generate --help
for k in "--stop" "--min-p" "--repeat-penalty" "--repeat-last-n" "--ctx-size" "-s, --seed" "'-': standard input"; do
    grep -q -- "$k" "$OUT" && ok || bad "generate --help lists '$k'"
done
expect_exit 2 "$VQ" generate -p hi --min-p 1.5
expect_exit 2 "$VQ" generate -p hi --repeat-penalty 0
expect_exit 2 "$VQ" generate -p hi --repeat-last-n -1
expect_exit 2 "$VQ" generate -p hi --stop ""
expect_exit 2 "$VQ" generate -p hi --ctx-size 0

# --- streamed text == --json text (greedy), finish_reason length at -n
expect_exit 0 "$VQ" "${G[@]}" -p "$P" -n 30 --json
cp "$OUT" "$TMP/full.json"
expect_exit 0 "$VQ" "${G[@]}" -p "$P" -n 30
cp "$OUT" "$TMP/full.txt"
python3 - "$TMP/full.json" "$TMP/full.txt" <<'PY' && ok || bad "streamed text != --json text"
import json, sys
d = json.load(open(sys.argv[1]))
s = open(sys.argv[2], encoding="utf-8").read()
assert d["finish_reason"] == "length" and d["tokens_generated"] == 30, d
assert len(d["text"]) > 20 and s == d["text"] + "\n", (s, d["text"])
PY

# --- --stop: a stop string from the middle of that text; the output ends right before it
STOP=$(python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["text"]; print(t[len(t)//2:len(t)//2+5])' "$TMP/full.json")
expect_exit 0 "$VQ" "${G[@]}" -p "$P" -n 30 --stop "$STOP" --stop "never-seen-xyz"
cp "$OUT" "$TMP/stop.txt"
grep -q "stopped at a stop string" "$ERR" && ok || bad "--stop: decode line says why"
expect_exit 0 "$VQ" "${G[@]}" -p "$P" -n 30 --stop "$STOP" --json
python3 - "$TMP/full.json" "$TMP/stop.txt" "$OUT" "$STOP" <<'PY' && ok || bad "--stop output"
import json, sys
full = json.load(open(sys.argv[1]))["text"]
s = open(sys.argv[2], encoding="utf-8").read()
d = json.load(open(sys.argv[3]))
stop = sys.argv[4]
want = full[:full.index(stop)]
assert s == want + "\n", (s, want)
assert stop not in s
assert d["text"] == want and d["finish_reason"] == "stop" and not d["stopped_at_eog"], d
assert d["tokens_generated"] < 30, d
PY

# --- -f - reads the prompt from standard input: the same run as -p
printf '%s' "$P" | "$VQ" "${G[@]}" -f - -n 12 --json >"$OUT" 2>"$ERR" && ok || bad "-f - failed"
cp "$OUT" "$TMP/stdin.json"
expect_exit 0 "$VQ" "${G[@]}" -p "$P" -n 12 --json
python3 - "$TMP/stdin.json" "$OUT" <<'PY' && ok || bad "-f - differs from -p"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["prompt_tokens"] == b["prompt_tokens"] and a["text"] == b["text"], (a, b)
PY
"$VQ" generate -m "$MODEL" -f - -n 1 -t 1 </dev/null >"$OUT" 2>"$ERR"
[ $? -eq 1 ] && grep -q "empty" "$ERR" && ok || bad "-f - with empty stdin: exit 1, message"
# -f FILE goes through the tools' input gate: a FIFO or /dev/zero is refused, never read
mkfifo "$TMP/prompt.fifo"
expect_exit 1 timeout 30 "$VQ" generate -m "$MODEL" -f "$TMP/prompt.fifo" -n 1 -t 1
grep -q "prompt file '$TMP/prompt.fifo': not a regular file (a FIFO)" "$ERR" && ok \
    || bad "-f FIFO: $(cat "$ERR")"
expect_exit 1 timeout 30 "$VQ" generate -m "$MODEL" -f /dev/zero -n 1 -t 1
grep -q "not a regular file" "$ERR" && ok || bad "-f /dev/zero: $(cat "$ERR")"

# --- --ctx-size is -c; -s is --seed
expect_exit 0 "$VQ" generate -m "$MODEL" -p "$P" -n 4 -t 1 --ctx-size 96 --json
python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["n_ctx"] == 96' "$OUT" && ok ||
    bad "--ctx-size sets n_ctx"
expect_exit 2 "$VQ" generate -m "$MODEL" -p "a b c d e f g h" --ctx-size 4 -t 1
grep -q "leaves no room" "$ERR" && ok || bad "--ctx-size too small message"
expect_exit 0 "$VQ" "${G[@]}" -p "$P" -n 8 --temp 0.9 -s 5 --min-p 0.05 --repeat-penalty 1.2 --json
cp "$OUT" "$TMP/s1.json"
expect_exit 0 "$VQ" "${G[@]}" -p "$P" -n 8 --temp 0.9 --seed 5 --min-p 0.05 --repeat-penalty 1.2 --json
python3 - "$TMP/s1.json" "$OUT" <<'PY' && ok || bad "-s equals --seed"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["seed"] == 5 and a["text"] == b["text"], (a, b)
PY
# a repeat penalty changes a greedy text that repeats itself
expect_exit 0 "$VQ" "${G[@]}" -p "$P" -n 30 --repeat-penalty 1.5 --json
python3 - "$TMP/full.json" "$OUT" <<'PY' && ok || bad "--repeat-penalty has no effect"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["text"] != b["text"], (a["text"], b["text"])
PY

echo "generate_text: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
