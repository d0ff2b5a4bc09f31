#!/usr/bin/env bash
# CLI test of the one KV-option table (tools/veloxquant/kvconfig.h): generate, perplexity, sweep
# and bench resolve the same KV config from the same options, with every method's default bits
# taken from its codec traits (`methods --json` default_bits). Uses --print-kv-config, which
# prints the resolved config and exits before any model is loaded (no model needed; one real
# generate run with kivi options when the default model is there).
set -u
VQ="$1"
fail=0; pass=0
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
OUT="$TMP/out"; ERR="$TMP/err"
. "$(dirname "$0")/lib.sh"

expect_exit 0 "$VQ" methods --json
cp "$OUT" "$TMP/methods.json"
methods=$(python3 -c 'import json,sys; print(" ".join(m["name"] for m in json.load(open(sys.argv[1])) if m["implemented"] and "default_bits" in m))' "$TMP/methods.json")
[ "$(echo $methods | wc -w)" -ge 11 ] && ok || bad "methods --json lists the built codecs with traits: $methods"

# same_config LABEL ARGS...: generate, perplexity, sweep (options) and bench print the same JSON
same_config() {
    local label=$1; shift
    local c
    for c in generate perplexity sweep bench; do
        expect_exit 0 "$VQ" $c "$@" --print-kv-config
        cp "$OUT" "$TMP/$c.json"
    done
    for c in perplexity sweep bench; do
        cmp -s "$TMP/generate.json" "$TMP/$c.json" && ok || {
            bad "$label: generate and $c resolve different KV configs"; cat "$TMP/generate.json" "$TMP/$c.json" >&2; }
    done
}

for m in $methods; do
    same_config "$m defaults" --method "$m"
    # the default is the codec's trait
    python3 - "$TMP/generate.json" "$TMP/methods.json" "$m" <<'PY' && ok || bad "$m: default bits differ from its trait"
import json, sys
c = json.load(open(sys.argv[1])); m = sys.argv[3]
t = next(x for x in json.load(open(sys.argv[2])) if x["name"] == m)
assert c["k_method"] == m and c["v_method"] == m, c
assert c["k_bits"] == t["default_bits"] and c["v_bits"] == t["default_bits"], (c, t)
PY
    # its label names the same config in `sweep --configs` (results are keyed by it)
    label=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["config"])' "$TMP/generate.json")
    expect_exit 0 "$VQ" sweep --configs "$label" --print-kv-config
    cmp -s "$TMP/generate.json" "$OUT" && ok || bad "$m: sweep --configs $label differs from --method $m"
done

# every KV option works the same in every command
same_config "kivi G64 R0" --group-size 64 --residual-length 0 --method kivi
grep -q '"config":"kivi-2+g64+res0".*"k_group_size":64,"k_residual_length":0' "$TMP/generate.json" \
    && ok || bad "kivi --group-size 64 --residual-length 0 resolved: $(cat "$TMP/generate.json")"
# and a real run takes them (the cache accepts group 64 without an fp16 window)
MODEL="${VQ_MODELS:-$HOME/.cache/veloxquant/models}/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ -f "$MODEL" ]; then
    expect_exit 0 "$VQ" generate -m "$MODEL" -p "The capital of France is" -n 4 -c 128 -t 2 \
        --method kivi --group-size 64 --residual-length 0
    grep -q "K kivi/2-bit | V kivi/2-bit" "$ERR" && ok || bad "generate kivi G64 R0: $(cat "$ERR")"
fi
same_config "kivi_sink" --method kivi_sink --n-sink-tokens 3 --kv-seed 7 --bits 4
same_config "asym" --k-method turboquant_prod --k-bits 4 --v-method kivi --jl-dim 64
same_config "asym int8 + 3-bit" --k-method int8 --v-method turboquant_mse --v-bits 3
same_config "turboquant_mse k6 v3" --method turboquant_mse --k-bits 6 --v-bits 3
same_config "outliers" --method turboquant_mse --bits 3 --outlier-tokens 2 --outlier-channels 4 --n-calib-tokens 100
same_config "fp16 edges" --method turboquant_mse --keep-fp16-first 1 --keep-fp16-last 2
# VecInfer 1.5 bits: codebook shape (12, 8) from --bits 1.5 and from the sweep preset
same_config "vecinfer 1.5" --method vecinfer --bits 1.5
grep -q '"config":"vecinfer-1.5".*"k_bits":1.5.*"k_pq_codeword_bits":12,"k_pq_subvec_dim":8' "$TMP/generate.json" \
    && ok || bad "vecinfer --bits 1.5 resolved: $(cat "$TMP/generate.json")"
expect_exit 0 "$VQ" sweep --configs vecinfer-1.5 --print-kv-config
cmp -s "$TMP/generate.json" "$OUT" && ok || bad "sweep preset vecinfer-1.5 differs from --bits 1.5"
# a config name round-trips: sweep --configs LABEL equals the options that made LABEL
expect_exit 0 "$VQ" sweep --configs "kivi-2+g64+res0" --print-kv-config
grep -q '"k_group_size":64,"k_residual_length":0' "$OUT" && ok || bad "kivi-2+g64+res0 round trip"

# key scales (+ks / +ksk) and the --kv presets: the same config in every command, names parse
# back, a preset equals its config, and its bits/elem in `methods` stay within the tier
same_config "key scales" --method turboquant_mse --bits 3 --key-scales qk
grep -q '"config":"turboquant_mse-3+ks".*"key_scales":2' "$TMP/generate.json" \
    && ok || bad "--key-scales qk resolved: $(cat "$TMP/generate.json")"
same_config "key scales from keys" --k-method turboquant_mse --k-bits 4 --v-method fp16 --key-scales keys
grep -q '+ksk".*"key_scales":1' "$TMP/generate.json" && ok || bad "--key-scales keys: $(cat "$TMP/generate.json")"
# per-channel KIVI key widths (+kc): resolved the same everywhere, the name round-trips
same_config "key channel bits" --k-method kivi --k-bits 4 --v-method turboquant_mse --group-size 64 --residual-length 0 --key-channel-bits on
grep -q '"config":"kivi-4:turboquant_mse-4+g64+res0+kc".*"key_channel_bits":1' "$TMP/generate.json" \
    && ok || bad "--key-channel-bits on resolved: $(cat "$TMP/generate.json")"
expect_exit 0 "$VQ" sweep --configs "kivi-4:turboquant_mse-4+g64+res0+kc" --print-kv-config
cmp -s "$TMP/generate.json" "$OUT" && ok || bad "kivi-4:turboquant_mse-4+g64+res0+kc round trip"
# ... and with 0-bit channels (+kcz, the kv2 preset's keys)
same_config "key channel bits zero" --k-method kivi --k-bits 2 --v-method turboquant_mse --v-bits 2 --group-size 64 --residual-length 0 --key-channel-bits zero
grep -q '"config":"kivi-2:turboquant_mse-2+g64+res0+kcz".*"key_channel_bits":2' "$TMP/generate.json" \
    && ok || bad "--key-channel-bits zero resolved: $(cat "$TMP/generate.json")"
expect_exit 0 "$VQ" sweep --configs "kivi-2:turboquant_mse-2+g64+res0+kcz" --print-kv-config
cmp -s "$TMP/generate.json" "$OUT" && ok || bad "kivi-2:turboquant_mse-2+g64+res0+kcz round trip"
label=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["config"])' "$TMP/generate.json")
expect_exit 0 "$VQ" sweep --configs "$label" --print-kv-config
cmp -s "$TMP/generate.json" "$OUT" && ok || bad "sweep --configs $label round trip"
expect_exit 0 "$VQ" methods --json
cp "$OUT" "$TMP/methods.json"
for t in kv8 kv5 kv4 kv3 kv2; do
    same_config "--kv $t" --kv $t
    expect_exit 0 "$VQ" sweep --configs "$t" --print-kv-config
    python3 - "$TMP/generate.json" "$OUT" "$t" <<'PY' && ok || bad "sweep --configs $t differs from --kv $t"
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert b.pop("config") == sys.argv[3], b  # sweep labels its rows by the name given
a.pop("config")
assert a == b, (a, b)
PY
    python3 - "$TMP/methods.json" "$t" "$TMP/generate.json" <<'PY' && ok || bad "--kv $t: methods entry"
import json, sys
m = next(x for x in json.load(open(sys.argv[1])) if x["name"] == sys.argv[2])
c = json.load(open(sys.argv[3]))
assert c["config"] == sys.argv[2], c  # --kv runs are labelled by the preset's name
assert m["config"] and m["config"] != m["name"], m
assert 0 < m["bits_per_elem_value"] <= m["bits_per_elem_mean"] <= m["max_bits"], m
PY
done
for c in generate perplexity sweep bench; do
    expect_exit 2 "$VQ" $c --kv kv4 --bits 3 --print-kv-config
    grep -q "give it alone" "$ERR" && ok || bad "$c: --kv with --bits"
    expect_exit 2 "$VQ" $c --method kivi --kv kv4 --print-kv-config
    expect_exit 2 "$VQ" $c --kv kv7 --print-kv-config
    grep -q "unknown KV config 'kv7': did you mean kv8?" "$ERR" && ok || bad "$c: unknown --kv"
    expect_exit 2 "$VQ" $c --key-scales maybe --print-kv-config
done
expect_exit 2 "$VQ" estimate-memory --layers 2 --kv-heads 1 --head-dim 64 -c 100 --method fp16 --key-scales qk
grep -q "key-scales) need a quantized key method" "$ERR" && ok || bad "--key-scales on fp16 keys"
for c in generate perplexity sweep bench; do
    expect_exit 2 "$VQ" $c --method kivi --key-channel-bits maybe --print-kv-config
done
expect_exit 2 "$VQ" estimate-memory --layers 2 --kv-heads 1 --head-dim 64 -c 100 --method turboquant_mse --key-channel-bits on
grep -q "key-channel-bits) need KIVI keys" "$ERR" && ok || bad "--key-channel-bits on turboquant keys"
expect_exit 0 "$VQ" estimate-memory --layers 2 --kv-heads 1 --head-dim 64 -c 100 --method kivi --group-size 64 --residual-length 0 --key-channel-bits on

# the same refusals everywhere: a half width only where a codec takes one, not a number
for c in generate perplexity sweep bench; do
    expect_exit 2 "$VQ" $c --method kivi --bits 1.5 --print-kv-config
    grep -q "kivi accepts 2..8" "$ERR" && ok || bad "$c: message for kivi --bits 1.5"
done
# kivi takes every width 2..8 (keys and values), and refuses 9 with its range before any model
for c in generate perplexity sweep bench; do
    expect_exit 0 "$VQ" $c --method kivi --bits 6 --print-kv-config
    grep -q '"config":"kivi-6".*"k_bits":6.*"v_bits":6' "$OUT" && ok || bad "$c: kivi --bits 6: $(cat "$OUT")"
    expect_exit 0 "$VQ" $c --k-method kivi_sink --k-bits 8 --v-method kivi --v-bits 5 --print-kv-config
    grep -q '"k_method":"kivi_sink".*"k_bits":8.*"v_method":"kivi".*"v_bits":5' "$OUT" && ok \
        || bad "$c: kivi_sink-8 / kivi-5: $(cat "$OUT")"
    expect_exit 2 "$VQ" $c --method kivi --bits 9 --print-kv-config
    grep -q "key bits 9: kivi accepts 2..8" "$ERR" && ok || bad "$c: message for kivi --bits 9: $(cat "$ERR")"
    expect_exit 2 "$VQ" $c --k-method turboquant_mse --v-method kivi_sink --v-bits 1 --print-kv-config
    grep -q "value bits 1: kivi_sink accepts 2..8" "$ERR" && ok || bad "$c: message for kivi_sink --v-bits 1"
    expect_exit 2 "$VQ" $c --method vecinfer --bits 1.25 --print-kv-config
    expect_exit 2 "$VQ" $c --group-size x --print-kv-config
done
# bench times one synthetic layer: per-channel key widths (learned from a model's queries) are
# said to stay one width there
expect_exit 0 "$VQ" bench --kv kv4 --head_dim 64 --seq_len 64 --repeats 1
grep -q "kv4 learns per-channel key widths from a model's queries" "$ERR" && ok \
    || bad "bench --kv kv4: $(cat "$ERR")"
echo "kv_options: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
