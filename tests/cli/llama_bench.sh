#!/usr/bin/env bash
# CLI tests for bench/llama_bench.sh: --help, refused arguments and environment values (clear
# message, exit 1 or 2, before anything is built), then a tiny veloxquant-only run
# (LLAMA_KVS="": llama.cpp is neither built nor run) whose table and JSON are checked: one row
# per depth, thread count and cache holding one sample per round, the prefill measured at the
# depth, fp16 ratios exactly 1, the decode attention and the byte bound on our rows.
# When llama-bench is already built (bench/llama_bench.sh --build-only; never built here), a
# tiny run of both engines is checked as well. No timing is asserted.
set -u
VQ="$1"
SCRIPT="$(cd "$(dirname "$0")/../.." && pwd)/bench/llama_bench.sh"
MODEL="${VQ_MODELS:-$HOME/.cache/veloxquant/models}/SmolLM2-135M-Instruct.Q4_1.gguf"
fail=0; pass=0
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
OUT="$TMP/out"; ERR="$TMP/err"
. "$(dirname "$0")/lib.sh"
if [ ! -r "$MODEL" ]; then echo "model $MODEL missing (scripts/fetch_models.sh)" >&2; exit 1; fi
export OMP_NUM_THREADS=1 MODEL
# a cache folder without llama-bench: a refused value must fail before any build starts
export LLAMA_CACHE="$TMP/no-llama-cache"

expect_exit 0 bash "$SCRIPT" --help
grep -q "LLAMA_KVS" "$OUT" && ok || bad "--help lists LLAMA_KVS"
expect_exit 2 bash "$SCRIPT" --bogus
grep -q "unknown argument '--bogus'" "$ERR" && ok || bad "unknown argument message"
expect_exit 1 bash "$SCRIPT" --out
DEPTHS="0 x" expect_exit 1 bash "$SCRIPT"
grep -q "DEPTHS: 'x'" "$ERR" && ok || bad "bad DEPTHS message"
THREADS=0 expect_exit 1 bash "$SCRIPT"
REPS=-1 expect_exit 1 bash "$SCRIPT"
KVS="fp16 kv9" expect_exit 1 bash "$SCRIPT"
grep -q "KVS: 'kv9'" "$ERR" && ok || bad "bad KVS message"
LLAMA_KVS="q3_k" expect_exit 1 bash "$SCRIPT"
grep -q "LLAMA_KVS: 'q3_k'" "$ERR" && ok || bad "bad LLAMA_KVS message"
KVS="" LLAMA_KVS="" expect_exit 1 bash "$SCRIPT"
LLAMA_FILL=restore expect_exit 1 bash "$SCRIPT"
grep -q "LLAMA_FILL: 'restore' is not eval or state" "$ERR" && ok || bad "bad LLAMA_FILL message"
VQ_FILL=twice expect_exit 1 bash "$SCRIPT"
grep -q "VQ_FILL: 'twice' is not each or once" "$ERR" && ok || bad "bad VQ_FILL message"
VQ_FILL=once DEPTHS="0 600" expect_exit 1 bash "$SCRIPT"
grep -q "VQ_FILL=once: depth 0 < PREFILL" "$ERR" && ok || bad "VQ_FILL=once depth message"
[ ! -e "$LLAMA_CACHE" ] && ok || bad "a refused value started a llama.cpp build"
LLAMA_KVS="" CORPUS="$TMP/none.txt" expect_exit 1 bash "$SCRIPT" --vq "$VQ"
grep -q "none.txt missing" "$ERR" && ok || bad "missing corpus message"
LLAMA_KVS="" expect_exit 1 bash "$SCRIPT" --vq "$TMP/no-vq"
grep -q "no-vq missing" "$ERR" && ok || bad "missing veloxquant binary message"

# check_json FILE ENGINES...: rows, depths and ratios of a tiny run
check_json() {
    python3 - "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
engines = sys.argv[2:]
assert d["depths"] == [0, 40] and d["threads"] == [1] and d["reps"] == 2, d
assert d["prefill_tokens"] == 16 and d["decode_tokens"] == 4, d
assert "; kernels: " in d["cpu"], d["cpu"]  # veloxquant version --verbose's cpu line
rows = d["rows"]
want = {"veloxquant": ["fp16", "kv4"], "llama.cpp": ["f16", "q4_0"]}
keys = [(r["depth"], r["engine"], r["kv"]) for r in rows]
assert keys == [(dd, e, k) for dd in (0, 40) for e in ("llama.cpp", "veloxquant")
                if e in engines for k in want[e]], keys
for r in rows:
    assert r["threads"] == 1 and r["prefill_tok_s"] > 0 and r["decode_tok_s"] > 0, r
    assert len(r["prefill_samples"]) == len(r["decode_samples"]) == 2, r  # 2 rounds
    if r["kv"] == "fp16":
        assert r["prefill_x_fp16"] == 1.0 and r["decode_x_fp16"] == 1.0, r
    if r["engine"] == "veloxquant":  # decode attention and the byte bound (--timings, bytes)
        assert len(r["decode_attn_samples"]) == 2 and r["decode_attn_ms"] > 0, r
        assert 0 < r["kv_bytes"] < r["step_bytes"], r
        if r["kv"] == "fp16":
            assert r["decode_attn_x_fp16"] == 1.0 and r["decode_bound_x_fp16"] == 1.0, r
        else:  # kv4 stores fewer bytes than fp16
            assert r["decode_attn_x_fp16"] > 0 and r["decode_bound_x_fp16"] > 1.0, r
    else:
        assert r["decode_attn_ms"] is None and r["decode_bound_x_fp16"] is None, r
    if "llama.cpp" in engines:
        assert r["prefill_x_llama_f16"] > 0 and r["decode_x_llama_f16"] > 0, r
        assert d["llama_cpp"]["commit"] and d["llama_cpp"]["version"], d["llama_cpp"]
    else:
        assert r["prefill_x_llama_f16"] is None, r
PY
}
TINY=(env DEPTHS="0 40" THREADS=1 KVS="fp16 kv4" REPS=2 PREFILL=16 GEN=4)
expect_exit 0 "${TINY[@]}" LLAMA_KVS="" bash "$SCRIPT" --vq "$VQ" --out "$TMP/vq.json"
check_json "$TMP/vq.json" veloxquant && ok || bad "veloxquant-only JSON"
[ "$(grep -c '^| [0-9]* | 1 | veloxquant |' "$OUT")" = 4 ] && ok || bad "table rows"
grep -q "prefill of 16 tokens and 4 decode steps" "$OUT" && ok || bad "table header"
grep -q "llama.cpp" "$OUT" && bad "a veloxquant-only table names llama.cpp" || ok
# VQ_FILL=once: each cell's prefill (after depth - 16) and decode (at depth) from one run
expect_exit 0 env DEPTHS="16 40" THREADS=1 KVS="fp16" REPS=2 PREFILL=16 GEN=4 VQ_FILL=once \
    LLAMA_KVS="" bash "$SCRIPT" --vq "$VQ" --out "$TMP/once.json"
python3 - "$TMP/once.json" <<'PY' && ok || bad "VQ_FILL=once JSON"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["vq_fill"] == "once" and d["llama_fill"] == "eval", d
assert [(r["depth"], r["kv"]) for r in d["rows"]] == [(16, "fp16"), (40, "fp16")], d["rows"]
for r in d["rows"]:
    assert len(r["prefill_samples"]) == len(r["decode_samples"]) == 2, r
    assert r["prefill_tok_s"] > 0 and r["decode_tok_s"] > 0 and r["decode_attn_ms"] > 0, r
PY

BUILT="$HOME/.cache/veloxquant/llama.cpp-0.3.36"
if [ -x "$BUILT/build/bin/llama-bench" ]; then
    LLAMA_CACHE="$BUILT" expect_exit 0 "${TINY[@]}" LLAMA_KVS="f16 q4_0" bash "$SCRIPT" \
        --vq "$VQ" --out "$TMP/both.json"
    check_json "$TMP/both.json" llama.cpp veloxquant && ok || bad "both engines' JSON"
    grep -q "^llama.cpp [0-9a-f]* (llama-bench " "$OUT" && ok || bad "table names llama.cpp"
    # LLAMA_FILL=state: depth 40 through bench/llama_depth.c (built on first use), depth 0
    # through llama-bench; then llama_depth alone, 16 evaluated cells repeated up to 40
    LLAMA_CACHE="$BUILT" expect_exit 0 "${TINY[@]}" LLAMA_KVS="f16 q4_0" LLAMA_FILL=state \
        bash "$SCRIPT" --vq "$VQ" --out "$TMP/state.json"
    check_json "$TMP/state.json" llama.cpp veloxquant && ok || bad "LLAMA_FILL=state JSON"
    grep -q "restored from a state" "$OUT" && ok || bad "table says the depth was restored"
    expect_exit 0 env LD_PRELOAD="$BUILT/noamx.so" "$BUILT/build/bin/llama_depth" -m "$MODEL" \
        -d 40 -s 16 -p 8 -n 2 -t 1 -ctk q8_0 -ctv q8_0 -fa on -r 2
    python3 - "$OUT" <<'PY' && ok || bad "llama_depth JSON"
import json, sys
t = json.load(open(sys.argv[1]))
assert [(x["n_prompt"], x["n_gen"], x["n_depth"], x["depth_seed"]) for x in t] == \
    [(8, 0, 40, 16), (0, 2, 40, 16)], t
assert all(len(x["samples_ns"]) == 2 and min(x["samples_ns"]) > 0 for x in t), t
assert t[0]["type_k"] == "q8_0" and t[0]["flash_attn"] is True, t
PY
    # f16 without flash attention: V stored transposed, tiled column by column; decode only
    expect_exit 0 env LD_PRELOAD="$BUILT/noamx.so" "$BUILT/build/bin/llama_depth" -m "$MODEL" \
        -d 40 -s 16 -p 0 -n 2 -t 1 -ctk f16 -ctv f16 -fa off -r 1
    python3 -c "import json, sys; t = json.load(open(sys.argv[1])); \
assert [(x['n_prompt'], x['n_gen'], x['flash_attn']) for x in t] == [(0, 2, False)], t" "$OUT" &&
        ok || bad "llama_depth decode-only JSON"
    expect_exit 2 "$BUILT/build/bin/llama_depth" -m "$MODEL" -d 0
    grep -q "'0' is not an integer >= 1" "$ERR" && ok || bad "llama_depth -d 0 message"
else
    echo "llama_bench: llama-bench not built ($BUILT); the two-engine run is not checked"
fi

echo "llama_bench: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
