#!/usr/bin/env bash
# CLI tests for `score-logits` (no model): a VQRAWLG1 stream written here with known logits;
# perplexity equals the value computed here in float64, a run against its own saved summary
# gives KL 0 and top-1 1, a perturbed stream gives the top-k + rest KL computed here, and bad
# streams / options fail with a message (exit 1 / 2).
set -u
VQ="$1"
fail=0; pass=0
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
OUT="$TMP/out"; ERR="$TMP/err"
. "$(dirname "$0")/lib.sh"

# stream(path, ctx, chunks, perturb, extra): n_vocab 40, seeded logits; prints the expected
# perplexity (and, with perturb, the expected KL against the unperturbed run's top-5 + rest)
cat > "$TMP/gen.py" <<'PY'
import math, random, struct, sys
path, extra = sys.argv[1], sys.argv[5]
ctx, chunks, perturb = int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
V, K = 40, 5
rng = random.Random(7)
n = chunks * (ctx // 2 - 1)
rows, tg = [], []
for i in range(n):
    rows.append([rng.gauss(0, 2) for _ in range(V)])
    tg.append(rng.randrange(V))
def f32(x): return struct.unpack("<f", struct.pack("<f", x))[0]
def lse(r):
    m = max(f32(x) for x in r)
    return m + math.log(sum(math.exp(f32(x) - m) for x in r))
rng2 = random.Random(11)
q = [[x + perturb * rng2.gauss(0, 1) for x in r] for r in rows]
if extra == "badtarget":
    tg[2] = V
with open(path, "wb") as f:
    f.write(b"VQRAWLG1" + struct.pack("<IIIIQ", 1, V, ctx, chunks, 0))
    for r, t in zip(q, tg):
        f.write(struct.pack("<I", t) + struct.pack("<%df" % V, *r))
    if extra == "trailing": f.write(b"x")
if extra == "badtarget": sys.exit(0)
nll = sum(lse(r) - f32(r[t]) for r, t in zip(q, tg)) / n
kl = 0.0
for p, r in zip(rows, q):
    lp = [f32(x) - lse(p) for x in p]
    ids = sorted(range(V), key=lambda i: (-f32(p[i]), i))[:K]
    lpk = [f32(lp[i]) for i in ids]
    lq = [f32(f32(r[i]) - lse(r)) for i in ids]
    pr = f32(min(1, max(0, 1 - sum(math.exp(x) for x in lpk))))
    qr = f32(min(1, max(0, 1 - sum(math.exp(x) for x in lq))))
    k = sum(math.exp(a) * (a - b) for a, b in zip(lpk, lq))
    if pr > 0: k += pr * (math.log(pr) - math.log(max(qr, 1e-30)))
    kl += max(k, 0)
print("%.12g %.12g" % (math.exp(nll), kl / n))
PY
read -r PPL _ < <(python3 "$TMP/gen.py" "$TMP/s1" 8 2 0 none)
read -r PPL2 KL2 < <(python3 "$TMP/gen.py" "$TMP/s2" 8 2 0.5 none)
python3 "$TMP/gen.py" "$TMP/s3" 10 2 0 none >/dev/null
python3 "$TMP/gen.py" "$TMP/trail" 8 2 0 trailing >/dev/null
python3 "$TMP/gen.py" "$TMP/badt" 8 2 0 badtarget >/dev/null
head -c 500 "$TMP/s1" > "$TMP/short"
printf 'VQRAWLGX%024d' 0 > "$TMP/magic"
num() {
    python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$OUT" "$1"
}
close() {  # close A B TOL: |A - B| <= TOL * max(1, |B|)
    python3 -c "import sys; a,b,t=map(float,sys.argv[1:]); sys.exit(abs(a-b) > t*max(1,abs(b)))" "$@"
}

# --- the base run: perplexity as computed here, summaries saved
expect_exit 0 "$VQ" score-logits -i "$TMP/s1" --save-logits "$TMP/b.logits" --top-k 5 --json
close "$(num ppl)" "$PPL" 1e-9 && ok || bad "ppl $(num ppl) != $PPL"
[ "$(num tokens_scored)" = 6 ] && ok || bad "tokens_scored"
# --- against itself: exactly 0 and 100 %
expect_exit 0 "$VQ" score-logits -i "$TMP/s1" --kl-base "$TMP/b.logits" --json
[ "$(num kld_mean)" = 0 ] && [ "$(num top1)" = 1 ] && ok || bad "self KL $(num kld_mean)"
# --- a perturbed stream from stdin: the top-5 + rest KL computed here
"$VQ" score-logits --kl-base "$TMP/b.logits" --json < "$TMP/s2" > "$OUT" 2>"$ERR" \
    && ok || bad "stdin run"
close "$(num kld_mean)" "$KL2" 1e-6 && ok || bad "KL $(num kld_mean) != $KL2"
close "$(num ppl)" "$PPL2" 1e-9 && ok || bad "ppl2 $(num ppl) != $PPL2"
expect_exit 0 "$VQ" score-logits -i "$TMP/s2" --kl-base "$TMP/b.logits"
grep -q "KL(base || this): mean" "$OUT" && ok || bad "text output"

# --- bad streams and options
expect_exit 1 "$VQ" score-logits -i "$TMP/magic"
grep -q "not a VQRAWLG1" "$ERR" && ok || bad "magic message"
expect_exit 1 "$VQ" score-logits -i "$TMP/short"
grep -q "stream ends at position" "$ERR" && ok || bad "truncated message"
expect_exit 1 "$VQ" score-logits -i "$TMP/trail"
grep -q "data after the last position" "$ERR" && ok || bad "trailing message"
expect_exit 1 "$VQ" score-logits -i "$TMP/badt"
grep -q "out of the vocabulary" "$ERR" && ok || bad "bad target message"
expect_exit 1 "$VQ" score-logits -i "$TMP/s3" --kl-base "$TMP/b.logits"
grep -q "does not match" "$ERR" && ok || bad "base mismatch message"
expect_exit 1 "$VQ" score-logits -i "$TMP/none"
expect_exit 1 "$VQ" score-logits -i "$TMP/s1" --kl-base "$TMP/none"
expect_exit 2 "$VQ" score-logits --top-k 0
expect_exit 2 "$VQ" score-logits --bogus
expect_exit 2 "$VQ" score-logits extra
expect_exit 0 "$VQ" score-logits --help
[ ! -e "$TMP/b.logits.tmp" ] && ok || bad "temporary file left"

echo "score_logits: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
