#!/usr/bin/env bash
# CLI tests for mixed precision across layers: --k/v-bits-per-layer validation (length, values),
# fp16 first/last layers and per-layer lists counted identically by estimate-memory and a real
# run, --ratequant wiring (calibrated on demand into $VQ_CACHE_DIR; allocation sum ==
# round(n * B), more sensitive layers never get fewer bits, rebuilt when the artifact is
# corrupt), and the ratequant-B config names round-tripping through sweep / results.json.
set -u
VQ="$1"
MODEL="${VQ_MODELS:-$HOME/.cache/veloxquant/models}/SmolLM2-135M-Instruct.Q4_1.gguf"
fail=0; pass=0
. "$(dirname "$0")/lib.sh"
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
export VQ_CACHE_DIR="$TMP/cache"
OUT="$TMP/out"; ERR="$TMP/err"
GEO="--layers 4 --kv-heads 2 --head-dim 64"

# --- option validation (no model needed) ---
expect_exit 2 "$VQ" estimate-memory -c 100 $GEO --method turboquant_mse --k-bits-per-layer 2,3
grep -q "2 entries, but the model has 4 layers" "$ERR" && ok || bad "bad list length message"
[ "$(wc -l < "$ERR")" = 1 ] && ok || bad "bad list length: one message, not two"
expect_exit 2 "$VQ" estimate-memory -c 100 $GEO --method turboquant_mse --v-bits-per-layer 2,3,4,1,2
grep -q -- "value bits per layer: 5 entries" "$ERR" && ok || bad "bad value list length message"
expect_exit 2 "$VQ" estimate-memory -c 100 $GEO --method turboquant_mse --k-bits-per-layer 2,x,3,4
grep -q "entry 2 of '2,x,3,4' is not an integer" "$ERR" && ok || bad "bad list entry message"
expect_exit 2 "$VQ" estimate-memory -c 100 $GEO --method turboquant_mse --k-bits-per-layer 2,3,9,4
grep -q "layer 2: 9 bits not accepted by turboquant_mse" "$ERR" && ok || bad "unsupported width message"
expect_exit 2 "$VQ" estimate-memory -c 100 $GEO --method turboquant_mse --fp16-layers middle
expect_exit 2 "$VQ" estimate-memory -c 100 $GEO --method turboquant_mse --keep-fp16-first 5
grep -q "the model has 4 layers" "$ERR" && ok || bad "fp16 layers beyond the model"
expect_exit 2 "$VQ" estimate-memory -c 100 $GEO --method vecinfer --ratequant 2
expect_exit 2 "$VQ" estimate-memory -c 100 $GEO --method turboquant_rvq --ratequant 3.5
grep -q "outside the bit-widths 1..2 of turboquant_rvq" "$ERR" && ok || bad "ratequant range message"
expect_exit 2 "$VQ" perplexity -m x -f y --ratequant-values sometimes

# fp16 edges: layers 0 and 3 cost fp16, layers 1-2 tq_mse 2-bit (centering vectors included)
expect_exit 0 "$VQ" estimate-memory -c 100 $GEO --method turboquant_mse --bits 2 --fp16-layers first,last --json
python3 - "$OUT" <<'PY' && ok || bad "fp16 edge bytes formula / name"
import json, sys
c = json.load(open(sys.argv[1]))["configs"][0]
assert c["name"] == "turboquant_mse-2+fp16f1l1", c["name"]
fp16 = 2 * 100 * 2 * 64 * 2                # one layer, K + V
tq = 2 * 100 * 2 * (2 * 64 // 8 + 2)       # one layer, K + V: codes + sf16 norm per token
mu = 2 * 2 * 64 * 2                        # centering vectors of one layer (K + V)
assert c["total_bytes"] == 2 * fp16 + 2 * tq + 2 * mu, c
PY
expect_exit 0 "$VQ" estimate-memory -c 100 $GEO --method turboquant_mse --keep-fp16-first 2 --keep-fp16-last 2 --json
python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["configs"][0]; assert c["total_bytes"]==c["fp16_bytes"]' "$OUT" \
    && ok || bad "every layer fp16"
# the listing has the RateQuant presets (equal sensitivities without a model)
expect_exit 0 "$VQ" estimate-memory -c 256 --layers 30 --kv-heads 3 --head-dim 64
grep -q "^ratequant-1.5 " "$OUT" && grep -q "^ratequant-2.5 " "$OUT" && ok || bad "ratequant presets listed"

# --- per-layer patterns in config names (+kbDIGITS / +vbDIGITS) ---
# a pattern round-trips through a config name, and is spread over any depth: layer i of n takes
# entry floor(i * len / n); estimate-memory of each --kv preset with a pattern (if any) equals the
# same config given with explicit per-layer lists, at the default model's 30 layers and at 7 and 61
expect_exit 0 "$VQ" sweep --configs "kivi-4:turboquant_mse-4+kb45+vb3+g128+res0" --print-kv-config
grep -q '"config":"kivi-4:turboquant_mse-4+kb45+vb3+g128+res0"' "$OUT" && ok || bad "pattern name round trip: $(cat "$OUT")"
expect_exit 2 "$VQ" sweep --configs "kivi-4+kb4x5" --print-kv-config
expect_exit 2 "$VQ" sweep --configs "kivi-4+kb" --print-kv-config
expect_exit 0 "$VQ" methods --json
cp "$OUT" "$TMP/methods.json"
npat=0
for t in kv8 kv5 kv4 kv3 kv2; do
    args=$(python3 - "$TMP/methods.json" "$t" <<'PY'
import json, sys
m = next(x for x in json.load(open(sys.argv[1])) if x["name"] == sys.argv[2])
base, *suf = m["config"].split("+")
if not any(s[:2] in ("kb", "vb") for s in suf):
    sys.exit(0)
k, _, v = base.partition(":")
v = v or k
out = []
for side, spec in (("k", k), ("v", v)):
    meth, _, b = spec.rpartition("-")
    out += [f"--{side}-method", meth, f"--{side}-bits", b]
for s in suf:
    if s[:2] in ("kb", "vb"):
        out += [f"PAT{s[0]}", s[2:]]
    elif s.startswith("g"):
        out += ["--group-size", s[1:]]
    elif s.startswith("res"):
        out += ["--residual-length", s[3:]]
    else:
        sys.exit(f"unexpected suffix {s}")
print(" ".join(out))
PY
)
    [ -n "$args" ] || continue
    npat=$((npat + 1))
    for L in 30 7 61; do
        expl=$(python3 -c '
import sys
a, L = sys.argv[1].split(), int(sys.argv[2])
o = []
i = 0
while i < len(a):
    if a[i] in ("PATk", "PATv"):
        p = a[i + 1]
        o += ["--%s-bits-per-layer" % a[i][3], ",".join(p[j * len(p) // L] for j in range(L))]
        i += 2
    else:
        o.append(a[i]); i += 1
print(" ".join(o))' "$args" "$L")
        expect_exit 0 "$VQ" estimate-memory --layers "$L" --kv-heads 3 --head-dim 64 -c 2048 --kv "$t" --json
        a=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["configs"][0]["total_bytes"])' "$OUT")
        # shellcheck disable=SC2086
        expect_exit 0 "$VQ" estimate-memory --layers "$L" --kv-heads 3 --head-dim 64 -c 2048 $expl --json
        b=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["configs"][0]["total_bytes"])' "$OUT")
        [ "$a" = "$b" ] && ok || bad "--kv $t at $L layers: $a bytes, explicit lists $b ($expl)"
    done
done
# (no preset carries a pattern since per-channel key widths, +kc, replaced them: the loop
# covers any that does again; npat counts them)
echo "presets with a per-layer pattern: $npat"

if [ ! -f "$MODEL" ]; then
    bad "model $MODEL missing (run scripts/fetch_models.sh)"
echo "$pass passed, $fail failed"; exit 1
fi
SHA=$(sha256sum "$MODEL" | cut -d' ' -f1)
TXT="$TMP/text.txt"
python3 -c 'import sys; open(sys.argv[1],"w").write(("The quick brown fox jumps over the lazy dog. " * 8 + "A stitch in time saves nine.\n") * 30)' "$TXT"

# wrong list length against the model's 30 layers
expect_exit 2 "$VQ" perplexity -m "$MODEL" -f "$TXT" -c 64 --chunks 1 --method turboquant_mse --k-bits-per-layer 2,3,4
grep -q "3 entries, but the model has 30 layers" "$ERR" && ok || bad "perplexity list length"
expect_exit 2 "$VQ" generate -m "$MODEL" -p hi -n 1 -c 32 --method turboquant_mse --v-bits-per-layer 2
grep -q "1 entries, but the model has 30 layers" "$ERR" && ok || bad "generate list length"

# estimate == measured: per-layer lists + fp16 edges
KB=$(python3 -c 'print(",".join(str(1 + i % 4) for i in range(30)))')
VB=$(python3 -c 'print(",".join(str(4 - i % 3) for i in range(30)))')
expect_exit 0 "$VQ" perplexity -m "$MODEL" -f "$TXT" -c 64 --chunks 1 -t 2 --method turboquant_mse \
    --k-bits-per-layer "$KB" --v-bits-per-layer "$VB" --fp16-layers first --keep-fp16-last 2 --json
cp "$OUT" "$TMP/ppl.json"
expect_exit 0 "$VQ" estimate-memory -m "$MODEL" -c 64 --method turboquant_mse \
    --k-bits-per-layer "$KB" --v-bits-per-layer "$VB" --fp16-layers first --keep-fp16-last 2 --json
python3 - "$TMP/ppl.json" "$OUT" "$KB" <<'PY' && ok || bad "lists + fp16 edges: estimate != measured"
import json, sys
r = json.load(open(sys.argv[1])); e = json.load(open(sys.argv[2]))["configs"][0]
assert r["kv_bytes"] == e["total_bytes"], (r["kv_bytes"], e["total_bytes"])
kb = [int(x) for x in sys.argv[3].split(",")]
assert r["k_bits_per_layer"] == [16] + kb[1:28] + [16, 16], r["k_bits_per_layer"]
assert r["config"] == e["name"] == "turboquant_mse-4+fp16f1l2+kbpl+vbpl", (r["config"], e["name"])
PY

# --ratequant: calibrated on demand, allocation printed; estimate-memory uses the same allocation
expect_exit 0 "$VQ" perplexity -m "$MODEL" -f "$TXT" -c 64 --chunks 1 -t 2 --ratequant 1.5 --calib-tokens 48 --json
cp "$OUT" "$TMP/rq.json"; cp "$ERR" "$TMP/rq.err"
grep -q "building calibration (ratequant)" "$ERR" && ok || bad "ratequant calibration built on demand"
grep -q "built calibration and using it" "$ERR" && ok || bad "ratequant build announced"
[ -s "$VQ_CACHE_DIR/ratequant/$SHA/sens.vqcal" ] && ok || bad "sens.vqcal written"
python3 - "$TMP/rq.err" "$TMP/rq.json" <<'PY' && ok || bad "ratequant allocation (sum, monotone, recorded)"
import json, re, sys
err = open(sys.argv[1]).read(); r = json.load(open(sys.argv[2]))
w = [float(x) for x in re.search(r"layer sensitivities \(mean \|\|k\|\|\^2\):(.*)", err).group(1).split()]
b = [int(x) for x in re.search(r"ratequant 1.5: key bits per layer:([\d ]+)\(", err).group(1).split()]
assert len(w) == len(b) == 30
assert sum(b) == round(30 * 1.5), sum(b)
assert all(b[i] >= b[j] for i in range(30) for j in range(30) if w[i] > w[j]), (w, b)
assert len(set(b)) > 1, b                       # SmolLM2's layers differ in sensitivity
assert r["k_bits_per_layer"] == b and r["v_bits_per_layer"] == b and r["ratequant"] == 1.5
assert r["config"] == "ratequant-1.5"
PY
expect_exit 0 "$VQ" estimate-memory -m "$MODEL" -c 64 --ratequant 1.5 --json
python3 -c 'import json,sys; a=json.load(open(sys.argv[1])); e=json.load(open(sys.argv[2]))["configs"][0]
assert a["kv_bytes"]==e["total_bytes"] and e["name"]=="ratequant-1.5", (a["kv_bytes"], e)' "$TMP/rq.json" "$OUT" \
    && ok || bad "ratequant: estimate != measured"
grep -q "building calibration" "$ERR" && bad "valid artifact rebuilt" || ok

# generate takes the same options (artifact reused, allocation printed)
expect_exit 0 "$VQ" generate -m "$MODEL" -p "The capital of France is" -n 3 -c 64 -t 2 --ratequant 2.5 --keep-fp16-last 1 -q
grep -q "ratequant 2.5: key bits per layer:" "$ERR" && ok || bad "generate --ratequant allocation"
grep -q "building calibration" "$ERR" && bad "generate rebuilt a valid artifact" || ok

# with fp16 edge layers the mean holds over the quantized layers (sum 28 x 2.5 = 70)
expect_exit 0 "$VQ" perplexity -m "$MODEL" -f "$TXT" -c 64 --chunks 1 -t 2 --ratequant 2.5 --fp16-layers first,last --json
cp "$OUT" "$TMP/rqe.json"
expect_exit 0 "$VQ" estimate-memory -m "$MODEL" -c 64 --ratequant 2.5 --fp16-layers first,last --json
python3 - "$TMP/rqe.json" "$OUT" <<'PY' && ok || bad "ratequant with fp16 edges"
import json, sys
r = json.load(open(sys.argv[1])); e = json.load(open(sys.argv[2]))["configs"][0]
b = r["k_bits_per_layer"]
assert b[0] == 16 and b[-1] == 16 and sum(b[1:-1]) == 70 and set(b[1:-1]) <= {2, 3}, b
assert r["kv_bytes"] == e["total_bytes"] and r["config"] == e["name"] == "ratequant-2.5+fp16f1l1", (r, e)
PY

# a corrupt sensitivities artifact is reported, rebuilt and the run succeeds
python3 - "$VQ_CACHE_DIR/ratequant/$SHA/sens.vqcal" <<'PY'
import sys
p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[len(b) - 12] ^= 0x01; open(p, 'wb').write(b)
PY
expect_exit 0 "$VQ" perplexity -m "$MODEL" -f "$TXT" -c 64 --chunks 1 -t 2 --ratequant 1.5 --calib-tokens 48 --json
grep -q "sens.vqcal: corrupt or truncated" "$ERR" && ok || { bad "corrupt sens reason"; cat "$ERR" >&2; }
grep -q "built calibration and using it" "$ERR" && ok || bad "corrupt sens rebuilt"
python3 -c 'import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); assert a["ppl"]==b["ppl"]' \
    "$TMP/rq.json" "$OUT" && ok || bad "the rebuilt artifact gives the same run"

# sweep: the ratequant-2.5 preset round-trips through results.json (second run: cached)
SW="$TMP/sweep"
expect_exit 0 "$VQ" sweep -m "$MODEL" --configs ratequant-2.5 -o "$SW" -f "$TXT" -c 64 --chunks 1 \
    --max-tokens 4 --prompts 1 -t 2
python3 - "$SW/results.json" <<'PY' && ok || bad "ratequant-2.5 in results.json"
import json, sys
d = json.load(open(sys.argv[1]))
r = [x for x in d["results"] if x["config"]["name"] == "ratequant-2.5"]
assert len(r) == 1 and "error" not in r[0], r
o = r[0]["config"]["options"]
assert o["ratequant_mbits"] == 2500 and o["v_bits_same_as_k"] == 1, o
digits = str(o["k_bits_l0"]) + str(o["k_bits_l15"])
assert len(digits) == 30 and sum(int(c) for c in digits) == 75, digits
PY
expect_exit 0 "$VQ" sweep -m "$MODEL" --configs ratequant-2.5 -o "$SW" -f "$TXT" -c 64 --chunks 1 \
    --max-tokens 4 --prompts 1 -t 2
grep -q "ratequant-2.5 cached" "$OUT" && ok || bad "sweep resume by name"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
