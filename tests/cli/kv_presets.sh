#!/usr/bin/env bash
# kv_presets.sh — a config name means one cache everywhere: for every named config the library
# lists (`methods --configs`: fp16, kv8..kv2, the sweep configs), generate, chat, perplexity, sweep,
# bench and estimate-memory print the same resolved cache parameters (--print-kv-config) and
# the same canonical name, the name's own config spelling resolves to the same parameters and
# name, and every command accepts `--kv fp16` as the baseline. No model needed.
set -u
VQ=${1:-build/veloxquant}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
OUT="$TMP/out"; ERR="$TMP/err"
. "$(dirname "$0")/lib.sh"

expect_exit 0 "$VQ" methods --configs
cp "$OUT" "$TMP/configs"
n=$(wc -l < "$TMP/configs")
[ "$n" -ge 20 ] && ok || bad "methods --configs lists $n configs"
for p in fp16 kv8 kv5 kv4 kv3 kv2; do
    grep -q "^$p " "$TMP/configs" && ok || bad "preset $p not listed"
done

CMDS="generate chat perplexity sweep bench estimate-memory"
while read -r name config _; do
    ref=""
    for c in $CMDS; do
        expect_exit 0 "$VQ" $c --kv "$name" --print-kv-config
        if [ -z "$ref" ]; then ref=$(cat "$OUT"); continue; fi
        [ "$(cat "$OUT")" = "$ref" ] && ok || bad "$name: $c resolves differently: $(cat "$OUT") vs $ref"
    done
    grep -q "\"config\":\"$name\"" <<< "$ref" && ok || bad "$name: canonical name: $ref"
    # the config it stands for resolves to the same cache and the same name
    expect_exit 0 "$VQ" sweep --configs "$config" --print-kv-config
    [ "$(cat "$OUT")" = "$ref" ] && ok || bad "$name: '$config' resolves differently: $(cat "$OUT")"
done < "$TMP/configs"

# the baseline by name, everywhere
for c in $CMDS; do
    expect_exit 0 "$VQ" $c --kv fp16 --print-kv-config
    grep -q '"config":"fp16","k_method":"fp16"' "$OUT" && ok || bad "$c --kv fp16: $(cat "$OUT")"
done
# a misspelled preset names itself and the nearest one, in every command
for c in $CMDS; do
    expect_exit 2 "$VQ" $c --kv kv44 --print-kv-config
    grep -q "unknown KV config 'kv44': did you mean kv4?" "$ERR" && ok || bad "$c --kv kv44: $(cat "$ERR")"
done
echo "kv_presets: $pass passed, $fail failed"
[ "$fail" = 0 ]
