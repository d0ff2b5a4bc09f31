#!/usr/bin/env bash
# CLI tests (issue 41): no option that writes a file may replace what is not a regular file.
# Every output option is pointed at a character device node made here (mknod when run as root;
# otherwise a FIFO stands in), at a symlink to it, at a FIFO and at a folder: each run must fail
# naming the path and "not a regular file", before any work, and every node must still be what
# it was afterwards (the device a character device, the FIFO a FIFO). Never a real device.
# Then inputs that are not regular files are refused at once (no hang, no endless read):
# -f / --text / report inputs / --kl-base / -i given /dev/zero, a FIFO or a folder, and a FIFO
# at a calibration artifact's path in the cache. Cases that need no model run first.
set -u
VQ="$1"
export LSAN_OPTIONS="suppressions=$(pwd)/tests/cli/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
fail=0; pass=0
TMP=$(mktemp -d)
trap 'chmod -R u+w "$TMP" 2>/dev/null; rm -rf "$TMP"' EXIT
OUT="$TMP/out"; ERR="$TMP/err"
. "$(dirname "$0")/lib.sh"
has() { grep -qF -- "$1" "$ERR" && ok || { bad "want '$1' in stderr:"; cat "$ERR" >&2; }; }
T="timeout 120"

# ---- the nodes: dev (a character device of our own, or a FIFO when not root), link -> dev,
# fifo, dir (a folder)
mkdir "$TMP/n"
if [ "$(id -u)" = 0 ] && mknod "$TMP/n/dev" c 1 3 2>/dev/null; then
    DEVKIND="a character device"; DEVTEST=-c
else
    mkfifo "$TMP/n/dev"; DEVKIND="a FIFO"; DEVTEST=-p
fi
ln -s "$TMP/n/dev" "$TMP/n/link"
mkfifo "$TMP/n/fifo"
mkdir "$TMP/n/dir"
nodes_intact() {  # every node is still what it was
    [ $DEVTEST "$TMP/n/dev" ] && [ -L "$TMP/n/link" ] && [ -p "$TMP/n/fifo" ] &&
        [ -d "$TMP/n/dir" ] && ok || { bad "a node was replaced: $*"; ls -la "$TMP/n" >&2; }
}
# refused NODE CMD...: exit $RC (default 1), the path and the reason named, the nodes intact
refused() {
    local node=$1; shift
    expect_exit "${RC:-1}" $T "$@"
    case $node in
    dev) has "'$TMP/n/dev': not a regular file ($DEVKIND)" ;;
    link) has "'$TMP/n/link': not a regular file ($DEVKIND)" ;;
    fifo) has "'$TMP/n/fifo': not a regular file (a FIFO)" ;;
    dir) has "'$TMP/n/dir': it is a folder, not a regular file" ;;
    esac
    nodes_intact "$*"
}

# ---- score-logits --save-logits (no model: a tiny VQRAWLG1 stream)
python3 - "$TMP/s1" <<'PY'
import struct, sys
V, ctx, chunks = 8, 8, 1
with open(sys.argv[1], "wb") as f:
    f.write(b"VQRAWLG1" + struct.pack("<IIIIQ", 1, V, ctx, chunks, 0))
    for i in range(chunks * (ctx // 2 - 1)):
        row = struct.pack("<%df" % V, *[float(j) for j in range(V)])
        f.write(struct.pack("<I", i % V) + row)
PY
for n in dev link fifo dir; do
    refused $n "$VQ" score-logits -i "$TMP/s1" --save-logits "$TMP/n/$n" --top-k 4
done
expect_exit 1 "$VQ" score-logits -i "$TMP/s1" --save-logits "$TMP/nope/b.logits" --top-k 4
has "score-logits: --save-logits: cannot write '$TMP/nope/b.logits': folder '$TMP/nope' does not exist"
expect_exit 1 "$VQ" score-logits -i "$TMP/s1" --save-logits "$TMP/b.logits" --top-k 9
has "score-logits: --top-k 9 is larger than the stream's vocabulary (n_vocab 8)"
expect_exit 1 $T "$VQ" score-logits -i "$TMP/n/fifo"
has "score-logits: -i: cannot read logits stream '$TMP/n/fifo': not a regular file (a FIFO)"
expect_exit 1 $T "$VQ" score-logits -i "$TMP/s1" --kl-base "$TMP/n/dir"
has "score-logits: --kl-base: cannot read logits file '$TMP/n/dir': not a regular file (a folder)"
expect_exit 1 $T "$VQ" score-logits -i "$TMP/s1" --kl-base "$TMP/none.logits"
has "score-logits: --kl-base: cannot open logits file '$TMP/none.logits': No such file or directory"
# a device (symlink) left at the writer's temp name is replaced, never written through
ln -s "$TMP/n/dev" "$TMP/ok.logits.tmp"
expect_exit 0 "$VQ" score-logits -i "$TMP/s1" --save-logits "$TMP/ok.logits" --top-k 4
[ -f "$TMP/ok.logits" ] && [ ! -L "$TMP/ok.logits" ] && [ ! -e "$TMP/ok.logits.tmp" ] && ok ||
    { bad "temp name symlink"; ls -la "$TMP" >&2; }
nodes_intact "score-logits"

# ---- precompute --out: the table file in the folder is a node; --out a regular file
TBL=d64_s42_b4.vqcal
mkdir "$TMP/pc"
ln -s "$TMP/n/dev" "$TMP/pc/$TBL"
expect_exit 1 "$VQ" precompute --head-dim 64 --bits 4 --out "$TMP/pc"
has "refusing to replace '$TMP/pc/$TBL': not a regular file ($DEVKIND)"
nodes_intact "precompute"
: > "$TMP/afile"
expect_exit 1 "$VQ" precompute --head-dim 64 --bits 4 --out "$TMP/afile"
has "precompute: --out $TMP/afile: exists and is not a folder"

# ---- report: a figure path and table.md that are nodes; inputs that are not regular files
FIX=tests/golden/results_fixture.json
STEM=SmolLM2-135M-Instruct.Q4_1
mkdir -p "$TMP/rep"
ln -s "$TMP/n/fifo" "$TMP/rep/$STEM-throughput.png"
expect_exit 1 $T "$VQ" report "$FIX" -o "$TMP/rep"
has "report: refusing to replace '$TMP/rep/$STEM-throughput.png': not a regular file (a FIFO)"
nodes_intact "report figure"
expect_exit 1 $T "$VQ" report /dev/zero -o "$TMP/rep2"
has "report: cannot read results file '/dev/zero': not a regular file (a character device)"
expect_exit 1 $T "$VQ" report "$TMP/n/fifo" -o "$TMP/rep2"
has "report: cannot read results file '$TMP/n/fifo': not a regular file (a FIFO)"
# regular files over their kind's cap: refused before they are read (sparse files, no disk)
truncate -s 65M "$TMP/big.json"
expect_exit 1 $T "$VQ" report "$TMP/big.json" -o "$TMP/rep2"
has "report: results file '$TMP/big.json' is 68157440 bytes, over the limit of 67108864 bytes"

MODEL="${VQ_MODELS:-$HOME/.cache/veloxquant/models}/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ ! -f "$MODEL" ]; then
    echo "outputs: model not found ($MODEL), model cases skipped" >&2
    echo "outputs: $pass passed, $fail failed"
    [ "$fail" -eq 0 ]; exit
fi
printf 'The quick brown fox jumps over the lazy dog. %.0s' $(seq 40) > "$TMP/t.txt"

# ---- perplexity --save-logits / --kl-base / -f: all found before the model is loaded
for n in dev link fifo dir; do
    refused $n "$VQ" perplexity -m "$MODEL" -f "$TMP/t.txt" -c 64 --save-logits "$TMP/n/$n"
done
expect_exit 1 "$VQ" perplexity -m "$MODEL" -f "$TMP/t.txt" -c 64 --save-logits "$TMP/nope/x"
has "perplexity: --save-logits: cannot write '$TMP/nope/x': folder '$TMP/nope' does not exist"
if [ "$(id -u)" != 0 ]; then
    mkdir "$TMP/ro"; chmod a-w "$TMP/ro"
    expect_exit 1 "$VQ" perplexity -m "$MODEL" -f "$TMP/t.txt" -c 64 --save-logits "$TMP/ro/x"
    has "perplexity: --save-logits: cannot write '$TMP/ro/x': folder '$TMP/ro' is not writable"
fi
expect_exit 1 $T "$VQ" perplexity -m "$MODEL" -f "$TMP/t.txt" -c 64 --kl-base "$TMP/n/dir"
has "perplexity: --kl-base: cannot read logits file '$TMP/n/dir': not a regular file (a folder)"
expect_exit 1 "$VQ" perplexity -m "$MODEL" -f "$TMP/t.txt" -c 64 --kl-base "$TMP/none.logits"
has "perplexity: --kl-base: cannot open logits file '$TMP/none.logits': No such file or directory"
expect_exit 1 $T "$VQ" perplexity -m "$MODEL" -f /dev/zero -c 64
has "perplexity: -f: cannot read text '/dev/zero': not a regular file (a character device)"
expect_exit 1 $T "$VQ" perplexity -m "$MODEL" -f "$TMP/n/fifo" -c 64
has "perplexity: -f: cannot read text '$TMP/n/fifo': not a regular file (a FIFO)"
truncate -s 257M "$TMP/big.txt"
expect_exit 1 $T "$VQ" perplexity -m "$MODEL" -f "$TMP/big.txt" -c 64
has "perplexity: -f: text '$TMP/big.txt' is 269484032 bytes, over the limit of 268435456 bytes"
nodes_intact "perplexity"

# ---- generate --observe (checked with the options: a usage error)
for n in dev link fifo dir; do
    RC=2 refused $n "$VQ" generate -m "$MODEL" -p Hi -n 1 -c 64 -t 2 --observe "$TMP/n/$n"
done

# ---- calibrate --out / --text
for n in dev link fifo dir; do
    refused $n "$VQ" calibrate -m "$MODEL" --method spectral --n_tokens 48 --threads 2 \
        --out "$TMP/n/$n"
done
expect_exit 1 $T "$VQ" calibrate -m "$MODEL" --method spectral --text /dev/zero
has "calibrate: --text: cannot read text '/dev/zero': not a regular file (a character device)"
expect_exit 1 $T "$VQ" calibrate -m "$MODEL" --method spectral --text "$TMP/n/dir"
has "calibrate: --text: cannot read text '$TMP/n/dir': not a regular file (a folder)"

# ---- sweep: results.json, the reference files and a log that are nodes; -f not a file
for f in results.json fp16.logits fp16.probe.json; do
    rm -rf "$TMP/sw"; mkdir -p "$TMP/sw"
    ln -s "$TMP/n/dev" "$TMP/sw/$f"
    expect_exit 1 $T "$VQ" sweep -m "$MODEL" -f "$TMP/t.txt" -c 64 --chunks 1 --prompts 1 \
        --max-tokens 2 -t 2 --configs fp16 -o "$TMP/sw"
    has "sweep: refusing to replace '$TMP/sw/$f': not a regular file ($DEVKIND)"
    nodes_intact "sweep $f"
done
rm -rf "$TMP/sw"; mkdir -p "$TMP/sw/logs"
ln -s "$TMP/n/fifo" "$TMP/sw/logs/fp16.log"
expect_exit 1 $T "$VQ" sweep -m "$MODEL" -f "$TMP/t.txt" -c 64 --chunks 1 --prompts 1 \
    --max-tokens 2 -t 2 --configs fp16 -o "$TMP/sw"
grep -qF "refusing to replace '$TMP/sw/logs/fp16.log': not a regular file (a FIFO)" "$OUT" && ok ||
    { bad "sweep log FIFO"; cat "$OUT" "$ERR" >&2; }
nodes_intact "sweep log"
expect_exit 2 $T "$VQ" sweep -m "$MODEL" -f /dev/zero -o "$TMP/sw2"
has "sweep: -f: cannot read text '/dev/zero': not a regular file (a character device)"
expect_exit 2 $T "$VQ" sweep -m "$MODEL" -f "$TMP/n/fifo" -o "$TMP/sw2"
has "sweep: -f: cannot read text '$TMP/n/fifo': not a regular file (a FIFO)"

# ---- a FIFO at a calibration artifact's path in the cache: refused at once, rebuilt in memory
export VQ_CACHE_DIR="$TMP/cache"
expect_exit 0 $T "$VQ" generate -m "$MODEL" -p Hi -n 1 -c 64 -t 2 --method spectral --bits 4 \
    --calib-tokens 48
PCA=$(find "$TMP/cache" -name pca.vqcal | head -1)
rm -f "$PCA"; mkfifo "$PCA"
expect_exit 0 $T "$VQ" generate -m "$MODEL" -p Hi -n 1 -c 64 -t 2 --method spectral --bits 4 \
    --calib-tokens 48
has "cannot read artifact '$PCA': not a regular file (a FIFO)"
has "refusing to replace '$PCA': not a regular file (a FIFO); using it for this run only"
[ -p "$PCA" ] && ok || bad "the FIFO in the cache was replaced"
nodes_intact "end"

echo "outputs: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
