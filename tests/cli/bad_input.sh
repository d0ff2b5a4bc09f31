#!/usr/bin/env bash
# CLI tests for bad input that used to get through (issue 11): each case checks the exit code
# and the error message. Model cases use copies of the default model edited by gguf_edit.py.
#   - a FIFO as -m: refused at once (no hang) by info, generate, calibrate
#   - overlapping tensor data; a tensor type relabelled (Q4_1 -> Q4_0): refused at load
#   - a tokenizer smaller than the model's vocabulary: refused by generate
#   - a token piece longer than 512 bytes: printed whole
#   - report: out-of-range values, -o a regular file / under a file / a figure path that is a
#     folder, and '|' / newlines in a config name (the table stays intact)
#   - a calibration cache that cannot be written: the calibration just built is used, with
#     a warning naming the path and the cause
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

# ---- report (no model needed) ----
FIX=tests/golden/results_fixture.json
edit_fix() {  # edit_fix OUT.json PYTHON-STATEMENT (d = the fixture)
    python3 - "$FIX" "$1" "$2" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
exec(sys.argv[3])
json.dump(d, open(sys.argv[2], "w"))
EOF
}
edit_fix "$TMP/ppl.json" 'd["results"][1]["ppl"] = -3'
expect_exit 1 "$VQ" report "$TMP/ppl.json" -o "$TMP/r1"
has "results[1].ppl: -3 out of range [1, inf]"
edit_fix "$TMP/keyx.json" 'd["results"][0]["key_x"] = 0'
expect_exit 1 "$VQ" report "$TMP/keyx.json" -o "$TMP/r1"
has "results[0].key_x: 0 out of range (0, inf]"
edit_fix "$TMP/hd.json" 'd["model"]["head_dim"] = 0'
expect_exit 1 "$VQ" report "$TMP/hd.json" -o "$TMP/r1"
has "model.head_dim: 0 out of range [1, 1048576]"
: > "$TMP/afile"
expect_exit 1 "$VQ" report "$FIX" -o "$TMP/afile"
has "report: -o $TMP/afile: exists and is not a folder"
expect_exit 1 "$VQ" report "$FIX" -o "$TMP/afile/sub"
has "report: cannot create the output folder $TMP/afile/sub: Not a directory"
if [ "$FIGURES" -eq 1 ]; then  # a figure path that is a folder (no figures without PLplot)
    mkdir -p "$TMP/r2/SmolLM2-135M-Instruct.Q4_1-throughput.png"
    expect_exit 1 "$VQ" report "$FIX" -o "$TMP/r2"
    has "report: cannot write '$TMP/r2/SmolLM2-135M-Instruct.Q4_1-throughput.png': it is a folder, not a regular file"
    grep -q "Too many tries" "$ERR" && bad "PLplot abort reached" || ok
fi
edit_fix "$TMP/pipe.json" 'd["results"][0]["config"]["name"] = "a|b\nc"; d["results"] = d["results"][:3]'
expect_exit $REPORT_OK "$VQ" report "$TMP/pipe.json" -o "$TMP/r3"
python3 - "$TMP/r3/table.md" <<'EOF' && ok || bad "table.md broken by a '|' or newline in a config name"
import re, sys
rows = [l for l in open(sys.argv[1], encoding="utf-8") if l.startswith("| ") and "|---" not in l]
cells = lambda l: re.split(r"(?<!\\)\|", l.strip())[1:-1]   # unescaped pipes only
table = [l for l in rows if len(cells(l)) == 20]
assert len(table) == 4, len(table)                           # header + 3 configs
assert table[1].startswith("| a\\|b c |"), table[1]
EOF

# ---- model inputs ----
MODEL="${VQ_MODELS:-$HOME/.cache/veloxquant/models}/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ ! -f "$MODEL" ]; then
    echo "bad_input: model not found ($MODEL), model cases skipped" >&2
    echo "$pass passed, $fail failed"
    [ "$fail" -eq 0 ]; exit
fi
export VQ_CACHE_DIR="$TMP/cache"

mkfifo "$TMP/fifo"
expect_exit 1 timeout 20 "$VQ" info -m "$TMP/fifo"
has "'$TMP/fifo' is not a regular file (a FIFO)"
expect_exit 1 timeout 20 "$VQ" generate -m "$TMP/fifo" -p hi -n 1
has "'$TMP/fifo' is not a regular file (a FIFO)"
expect_exit 1 timeout 20 "$VQ" calibrate -m "$TMP/fifo" --method spectral
has "'$TMP/fifo' is not a regular file (a FIFO)"

python3 "$EDIT" "$MODEL" "$TMP/m.gguf" --offset blk.0.attn_k.weight 0
expect_exit 1 "$VQ" info -m "$TMP/m.gguf"
has "tensor 'token_embd.weight' (Q8_0, 30081024 bytes) at data offset 0 overlaps tensor 'blk.0.attn_k.weight' at 0"
python3 "$EDIT" "$MODEL" "$TMP/m.gguf" --type blk.0.attn_k.weight 2     # Q4_1 -> Q4_0
expect_exit 1 "$VQ" generate -m "$TMP/m.gguf" -p hi -n 1 -t 2
has "tensor 'blk.0.attn_k.weight' (Q4_0, 62208 bytes) at data offset 31744512 leaves a gap before tensor 'blk.0.attn_output.weight'"

python3 "$EDIT" "$MODEL" "$TMP/m.gguf" --drop-tokens 100
expect_exit 1 "$VQ" generate -m "$TMP/m.gguf" -p hi -n 1 -t 2
has "the tokenizer has 49052 tokens but the model's vocabulary (token embedding / output layer) has 49152"

# the greedy continuation of the prompt is " Paris" (token 7042): give it a 606-byte piece
P="The capital of France is"
ID=$(python3 "$EDIT" "$MODEL" - --find-token "ĠParis")
LONG=$(python3 -c 'print("ĠParis" + "x" * 600)')
python3 "$EDIT" "$MODEL" "$TMP/m.gguf" --token-text "$ID" "$LONG"
expect_exit 0 "$VQ" generate -m "$TMP/m.gguf" -p "$P" -n 1 -t 2
[ "$(head -c 606 "$OUT")" = " Paris$(python3 -c 'print("x" * 600, end="")')" ] && ok || bad "long piece not printed whole"
expect_exit 0 "$VQ" generate -m "$TMP/m.gguf" -p "$P" -n 1 -t 2 --json
python3 -c 'import json,sys; t = json.load(open(sys.argv[1]))["text"]; assert t == " Paris" + "x" * 600, t' \
    "$OUT" && ok || bad "long piece missing from the JSON text"
rm -f "$TMP/m.gguf"

# calibration cache under a regular file: mkdir fails (ENOTDIR, also as root); the run uses
# the calibration it built and says it could not be cached
VQ_CACHE_DIR="$TMP/afile/cache" expect_exit 0 "$VQ" generate -m "$MODEL" -p Hello -n 2 -c 64 -t 2 \
    --method spectral --bits 3 --calib-tokens 48
has "generate: warning: the spectral calibration could not be cached at $TMP/afile/cache/spectral/"
has "pca.vqcal: Not a directory; using it for this run only"
has "generate: built calibration and using it"
VQ_CACHE_DIR="$TMP/afile/cache" expect_exit 0 "$VQ" generate -m "$MODEL" -p Hello -n 2 -c 64 -t 2 \
    --ratequant 3 --calib-tokens 48
has "the ratequant calibration could not be cached at $TMP/afile/cache/ratequant/"
# `calibrate` itself writes nothing else: there it stays an error
VQ_CACHE_DIR="$TMP/afile/cache" expect_exit 1 "$VQ" calibrate -m "$MODEL" --method spectral \
    --n_tokens 48 --threads 2
has "calibrate: cannot write the spectral artifact $TMP/afile/cache/spectral/"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
