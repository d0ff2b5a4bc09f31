#!/usr/bin/env bash
# CLI tests for `estimate-memory`: exit codes, exact fp16 / int8 / 7-bit arithmetic, KIVI windows,
# presets listed, the GGUF geometry path agrees with the manual geometry, JSON shape.
set -u
VQ="$1"
MODEL="${VQ_MODELS:-$HOME/.cache/veloxquant/models}/SmolLM2-135M-Instruct.Q4_1.gguf"
fail=0; pass=0
OUT=$(mktemp); ERR=$(mktemp); OUT2=$(mktemp)
trap 'rm -f "$OUT" "$ERR" "$OUT2"' EXIT
. "$(dirname "$0")/lib.sh"
py() { python3 -c "$@"; }
GEO="--layers 30 --kv-heads 3 --head-dim 64"

expect_exit 0 "$VQ" estimate-memory --help
grep -q -- "--kv-heads" "$OUT" && ok || bad "help text"
expect_exit 2 "$VQ" estimate-memory $GEO                                   # no ctx
expect_exit 2 "$VQ" estimate-memory -c 100                                 # no geometry
expect_exit 2 "$VQ" estimate-memory -c 100 --layers 2 --kv-heads 2         # partial geometry
expect_exit 2 "$VQ" estimate-memory -c -4 $GEO
expect_exit 2 "$VQ" estimate-memory -c 100 $GEO --method nope
grep -q "unknown method 'nope'" "$ERR" && ok || bad "unknown method message"
expect_exit 2 "$VQ" estimate-memory -c 100 $GEO --method kivi --bits 9
grep -q "kivi accepts 2..8" "$ERR" && ok || bad "kivi --bits 9 message: $(cat "$ERR")"
expect_exit 2 "$VQ" estimate-memory -c 100 $GEO --bogus
expect_exit 2 "$VQ" estimate-memory -c 100 $GEO --head-dim abc
# issue 41: ctx 0 (also after a valid -c) is refused, not printed as 0/0 ratios; a head size the
# cache cannot take is blamed on --head-dim, not on another option
expect_exit 2 "$VQ" estimate-memory -c 0 $GEO
grep -qF "estimate-memory: --ctx: 0 is out of range [1, " "$ERR" && ok || bad "-c 0 message"
expect_exit 2 "$VQ" estimate-memory -c 64 -c 0 $GEO
grep -qF "estimate-memory: --ctx: 0 is out of range" "$ERR" && ok || bad "-c 64 -c 0 message"
for hd in 12 2048; do
    expect_exit 2 "$VQ" estimate-memory -c 64 --layers 2 --kv-heads 2 --head-dim $hd --ratequant 3
    grep -qF "estimate-memory: --head-dim: $hd is not a multiple of 8 in 8..1024" "$ERR" &&
        ! grep -q ratequant "$ERR" && ok || { bad "--head-dim $hd message"; cat "$ERR" >&2; }
done
expect_exit 1 "$VQ" estimate-memory -c 100 -m /nonexistent/model.gguf

# fp16: exactly 2 bytes x (K, V) x layers x heads x head_dim x ctx
expect_exit 0 "$VQ" estimate-memory -c 1000 $GEO --method fp16 --json
py 'import json,sys; d=json.load(open(sys.argv[1])); c=d["configs"]; assert len(c)==1 and c[0]["name"]=="fp16"
assert c[0]["total_bytes"]==2*2*30*3*64*1000 and c[0]["fullKV_x"]==1 and c[0]["bits_per_elem"]==16' "$OUT" \
    && ok || bad "fp16 arithmetic"

# kivi-2, d=64, G=32, R=128, ctx 1000: keys are coded in whole 128-token chunks (896 tokens,
# 28 blocks) with 104 fp16; values keep the newest 128 fp16 and code 872 tokens
expect_exit 0 "$VQ" estimate-memory -c 1000 --layers 1 --kv-heads 1 --head-dim 64 --method kivi --bits 2 --json
py 'import json,sys; c=json.load(open(sys.argv[1]))["configs"][0]
assert c["window_bytes"]==(104+128)*128, c
assert c["total_bytes"]==c["key_bytes"]+c["value_bytes"]+c["window_bytes"]
assert c["key_bytes"] % 28 == 0 and c["value_bytes"] % 872 == 0' "$OUT" && ok || bad "kivi windows"

# kivi-6 (6-bit planes), d=64, G=32, R=0, ctx 1000: keys 31 blocks of 4*64 + 32*64*6/8 bytes and
# 8 fp16 keys; values 1000 tokens of 4*64/32 + 64*6/8 bytes
expect_exit 0 "$VQ" estimate-memory -c 1000 --layers 1 --kv-heads 1 --head-dim 64 --method kivi --bits 6 --residual-length 0 --json
py 'import json,sys; c=json.load(open(sys.argv[1]))["configs"][0]
assert c["name"]=="kivi-6+res0" and c["k_bits"]==6 and c["v_bits"]==6, c
assert c["key_bytes"]==31*(4*64+32*48) and c["value_bytes"]==1000*(8+48) and c["window_bytes"]==8*128, c' \
    "$OUT" && ok || bad "kivi-6 arithmetic"

# int8 keys (2 + d bytes per token and head) with 3-bit turboquant_mse values (2 + 3d/8)
expect_exit 0 "$VQ" estimate-memory -c 1000 $GEO --k-method int8 --v-method turboquant_mse --v-bits 3 --json
py 'import json,sys; c=json.load(open(sys.argv[1]))["configs"][0]
assert c["k_method"]=="int8" and c["k_bits"]==8 and c["v_bits"]==3, c
assert c["key_bytes"]==30*3*1000*(2+64) and c["value_bytes"]==30*3*1000*(2+24), c' "$OUT" \
    && ok || bad "int8 + turboquant_mse-3 bytes"
expect_exit 0 "$VQ" estimate-memory -c 1000 $GEO --method turboquant_mse --bits 7 --json
py 'import json,sys; c=json.load(open(sys.argv[1]))["configs"][0]
assert c["key_bytes"]==c["value_bytes"]==30*3*1000*(2+56), c' "$OUT" && ok || bad "turboquant_mse-7 bytes"
# a model's sliding windows: the synthetic Mistral-style llama (3 layers x 1 kv head x 64,
# window 32 on every layer) holds what a cache of that geometry with --window 32 holds; fp16 at
# 4096 keeps the pages from (4096 - 32) // 256 * 256 = 3840 on: 256 tokens per layer. Gemma 3:
# 3 global layers hold all 32768 tokens, the 15 windowed ones 512 (1024 bytes a token)
SWA=tests/golden/synth/llama_swa.gguf
expect_exit 0 "$VQ" estimate-memory --layers 3 --kv-heads 1 --head-dim 64 -c 4096 \
    --method turboquant_mse --bits 4 --window 32 --json
cp "$OUT" "$OUT2"
expect_exit 0 "$VQ" estimate-memory -m "$SWA" -c 4096 --method turboquant_mse --bits 4 --json
py 'import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2]))
assert a["geometry"]["swa_window"]==32 and a["geometry"]["n_swa_layers"]==3, a["geometry"]
x, y = a["configs"][0], b["configs"][0]
assert x["total_bytes"]==y["total_bytes"] and x["fullKV_x"]==y["fullKV_x"], (x, y)' "$OUT" "$OUT2" \
    && ok || bad "model windows differ from the same --window"
expect_exit 0 "$VQ" estimate-memory -m "$SWA" -c 4096 --method fp16 --json
py 'import json,sys; c=json.load(open(sys.argv[1]))["configs"][0]
assert c["total_bytes"]==3*256*64*2*2 and c["bits_per_elem"]==16, c' "$OUT" && ok || bad "fp16 windows"
GEMMA="${VQ_MODELS:-$HOME/.cache/veloxquant/models}/gemma-3-270m-q4_k_m.gguf"
expect_exit 0 "$VQ" estimate-memory -m "$GEMMA" -c 32768 --method fp16
grep -q "sliding window 512 on 15 of 18 layers" "$OUT" && grep -qE "^fp16 .* 108527616 " "$OUT" \
    && ok || bad "gemma3 windows at 32768"

# no method: every preset, in order
expect_exit 0 "$VQ" estimate-memory -c 4096 $GEO
for p in fp16 turboquant_mse-4 turboquant_mse-3 turboquant_mse-2 turboquant_prod-4 turboquant_prod-3 \
         turboquant_prod-2 turboquant_rvq-2 turboquant_rvq-1 qjl polar kivi-4 kivi-2 kivi_sink-2 asym-k4v2; do
    grep -q "^$p " "$OUT" && ok || bad "preset $p not listed"
done
# then every other built method at its default bits
for p in fp32 vecinfer-2 spectral-3; do grep -q "^$p " "$OUT" && ok || bad "method row $p not listed"; done
# every compressed config this build has is smaller than fp16
expect_exit 0 "$VQ" estimate-memory -c 4096 $GEO --json
py 'import json,sys; c=json.load(open(sys.argv[1]))["configs"]; f=c[0]["total_bytes"]
built=[x for x in c if "error" not in x]; assert len(built)>=8, len(built)
assert all(x["total_bytes"]<f and x["fullKV_x"]>1 for x in built[1:] if x["name"]!="fp32")
assert [x["total_bytes"] for x in c if x["name"]=="fp32"]==[2*f]' "$OUT" && ok || bad "compression"
# a fractional width is recorded exactly: vecinfer-1.5 is 1.5 bits, not 2
py 'import json,sys; c=json.load(open(sys.argv[1]))["configs"]
v=[x for x in c if x["name"]=="vecinfer-1.5"]; assert len(v)==1, [x["name"] for x in c]
assert v[0]["k_bits"]==1.5 and v[0]["v_bits"]==1.5 and abs(v[0]["bits_per_elem"]-1.5)<1e-9, v' \
    "$OUT" && ok || bad "vecinfer-1.5 widths"

# the GGUF path reads the model geometry (SmolLM2-135M: 30 x 3 x 64)
if [ -f "$MODEL" ]; then
    expect_exit 0 "$VQ" estimate-memory -m "$MODEL" -c 777 --json
    cp "$OUT" "$OUT2"
    expect_exit 0 "$VQ" estimate-memory $GEO -c 777 --json
    py 'import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2]))
assert a["geometry"]["arch"]=="llama" and a["geometry"]["n_layers"]==30 and a["geometry"]["head_dim"]==64
assert a["configs"]==b["configs"]' "$OUT2" "$OUT" && ok || bad "gguf geometry"
else
    bad "model $MODEL missing (run scripts/fetch_models.sh)"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
