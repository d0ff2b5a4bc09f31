#!/usr/bin/env bash
# grammar.sh — one command-line grammar: every command answers --help (exit 0) and names an
# unknown option in its error (with the nearest long option when one is close); a misspelled
# command, method or preset names itself and the nearest valid name; llama.cpp options get a
# one-line explanation instead of a parse error; the original benchmark's underscore spellings
# are aliases of the dashed options; -m defaults to the default model everywhere. No model run.
set -u
VQ=${1:-build/veloxquant}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
OUT="$TMP/out"; ERR="$TMP/err"
. "$(dirname "$0")/lib.sh"

CMDS="generate chat serve info methods bench perplexity score-logits sweep report estimate-memory
calibrate precompute version"
for c in $CMDS; do
    expect_exit 0 "$VQ" $c --help
    grep -q "usage: veloxquant $c" "$OUT" && ok || bad "$c --help: no usage line"
    "$VQ" $c --no-such-option >"$OUT" 2>"$ERR"
    rc=$?
    [ "$rc" = 2 ] && ok || bad "$c --no-such-option: exit $rc (want 2)"
    grep -q -- "--no-such-option" "$ERR" && ok || bad "$c: the unknown option is not named: $(cat "$ERR")"
done
# the nearest long option
expect_exit 2 "$VQ" generate --n-predcit 3
grep -q "unknown option '--n-predcit': did you mean --n-predict?" "$ERR" && ok || bad "--n-predcit: $(cat "$ERR")"
expect_exit 2 "$VQ" bench --mehtod kivi
grep -q "did you mean --method?" "$ERR" && ok || bad "bench --mehtod: $(cat "$ERR")"
# a short option inside an unknown bundle is named by its letter, not by the previous word
expect_exit 2 "$VQ" perplexity -c 64 -Z
grep -q "unknown option '-Z'" "$ERR" && ok || bad "-Z: $(cat "$ERR")"
# the last commands moved off strcmp chains: a misspelled long option gets the nearest one,
# an option without its value names itself, underscore spellings are aliases
for a in "calibrate --mehtod all:--mehtod:--method" "precompute --chek:--chek:--check" \
         "methods --jsn:--jsn:--json" "info --tensros:--tensros:--tensors" \
         "info --ctxx 3:--ctxx:--ctx"; do
    IFS=: read -r args opt want <<< "$a"
    # shellcheck disable=SC2086  # the words split on purpose
    expect_exit 2 "$VQ" $args
    grep -q "unknown option '$opt': did you mean $want?" "$ERR" && ok || bad "$args: $(cat "$ERR")"
done
expect_exit 2 "$VQ" calibrate --n_tokens
grep -q "calibrate: --n-tokens needs a value" "$ERR" && ok || bad "calibrate --n_tokens: $(cat "$ERR")"
expect_exit 2 "$VQ" precompute --head_dim 64
grep -q "precompute: --head-dim and --bits are required" "$ERR" && ok || bad "precompute --head_dim: $(cat "$ERR")"
expect_exit 0 "$VQ" precompute --head_dim 64 --bits 2 --out "$TMP/pc"
expect_exit 0 "$VQ" precompute --head-dim 64 --bits 2 -o "$TMP/pc" --check
expect_exit 2 "$VQ" precompute 64
grep -q "unexpected argument '64'" "$ERR" && ok || bad "precompute 64: $(cat "$ERR")"
# version: the library's CPU line (brand, kernel variant; a VQ_ISA request is named)
expect_exit 0 "$VQ" version --verbose
grep -q "^cpu: .*; kernels: \(scalar\|avx2\|avx512\)" "$OUT" && grep -q "^threads: [1-9]" "$OUT" \
    && ok || bad "version --verbose: $(cat "$OUT")"
expect_exit 0 env VQ_ISA=scalar "$VQ" version -v
grep -q "kernels: scalar (VQ_ISA=scalar)" "$OUT" && ok || bad "VQ_ISA=scalar version -v: $(cat "$OUT")"
expect_exit 2 "$VQ" version 1
grep -q "unexpected argument '1'" "$ERR" && ok || bad "version 1: $(cat "$ERR")"
# misspelled command, method, preset
expect_exit 2 "$VQ" genrate
grep -q "unknown command 'genrate': did you mean generate?" "$ERR" && ok || bad "genrate: $(cat "$ERR")"
# every command that takes a method or a preset names the misspelled one and the nearest valid
# one (report, score-logits and precompute take neither; version takes only --verbose)
expect_exit 2 "$VQ" info --method turboqant_mse
grep -q "unknown method 'turboqant_mse': did you mean turboquant_mse?" "$ERR" && ok || bad "info --method: $(cat "$ERR")"
expect_exit 2 "$VQ" methods turboqant_mse
grep -q "unknown method or config 'turboqant_mse': did you mean turboquant_mse?" "$ERR" && ok || bad "methods NAME: $(cat "$ERR")"
expect_exit 2 "$VQ" methods kv33
grep -q "did you mean kv3?" "$ERR" && ok || bad "methods kv33: $(cat "$ERR")"
expect_exit 0 "$VQ" methods kv4
grep -q "^  kv4 " "$OUT" && [ "$(grep -c '^  kv' "$OUT")" = 1 ] && ok || bad "methods kv4 lists kv4 alone: $(cat "$OUT")"
expect_exit 2 "$VQ" calibrate --method vecinfr
grep -q "unknown calibration 'vecinfr': did you mean vecinfer?" "$ERR" && ok || bad "calibrate --method: $(cat "$ERR")"
expect_exit 2 "$VQ" serve --kv kv33 --print-kv-config
grep -q "did you mean kv3?" "$ERR" && ok || bad "serve --kv kv33: $(cat "$ERR")"
expect_exit 2 "$VQ" serve --method turboqant_mse --print-kv-config
grep -q "did you mean turboquant_mse?" "$ERR" && ok || bad "serve --method: $(cat "$ERR")"
expect_exit 2 "$VQ" sweep --configs fp16,kivi-4,turboqant_mse-3 --print-kv-config
grep -q "did you mean turboquant_mse-3?" "$ERR" && ok || bad "sweep --configs: $(cat "$ERR")"
for c in generate perplexity sweep bench estimate-memory chat; do
    expect_exit 2 "$VQ" $c --method turboqant_mse --print-kv-config
    grep -q "unknown method 'turboqant_mse': did you mean turboquant_mse?" "$ERR" && ok \
        || bad "$c --method turboqant_mse: $(cat "$ERR")"
    expect_exit 2 "$VQ" $c --kv kv33 --print-kv-config
    grep -q "did you mean kv3?" "$ERR" && ok || bad "$c --kv kv33: $(cat "$ERR")"
done
# a width a method does not take is refused with the method's widths, not ignored
for c in generate perplexity sweep bench estimate-memory chat; do
    expect_exit 2 "$VQ" $c --method qjl --bits 3 --print-kv-config
    grep -q "qjl has a fixed width (1)" "$ERR" && ok || bad "$c qjl --bits 3: $(cat "$ERR")"
    expect_exit 2 "$VQ" $c --method polar --k-bits 7 --print-kv-config
    grep -q "key bits 7: polar has a fixed width (4)" "$ERR" && ok || bad "$c polar --k-bits 7: $(cat "$ERR")"
done
expect_exit 2 "$VQ" sweep --configs polar-7 --print-kv-config
grep -q "polar has a fixed width (4)" "$ERR" && ok || bad "sweep --configs polar-7: $(cat "$ERR")"
# llama.cpp habits
for a in "-ctk q8_0" "-ctv q4_0" "--cache-type-k q8_0" "-ngl 99" "-fa" "-cnv" "--flash-attn"; do
    expect_exit 2 "$VQ" generate -p hi $a
    grep -q "is a llama.cpp option:" "$ERR" && ok || bad "generate $a: $(cat "$ERR")"
done
expect_exit 2 "$VQ" generate -p hi -ctk q8_0
grep -q -- "--kv" "$ERR" && ok || bad "-ctk does not point at --kv"
# underscore spellings are aliases, in every command
expect_exit 0 "$VQ" bench --method turboquant_mse --head_dim 64 --seq_lens 64 128 --repeats 1 --json
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert [r["seq_len"] for r in d["rows"]]==[64,128] and d["head_dim"]==64' "$OUT" \
    && ok || bad "bench underscore aliases"
expect_exit 0 "$VQ" generate --method kivi --group_size 64 --residual_length 0 --print-kv-config
grep -q '"k_group_size":64,"k_residual_length":0' "$OUT" && ok || bad "generate underscore aliases"
expect_exit 0 "$VQ" estimate-memory --layers 2 --kv_heads 1 --head_dim 64 -c 128 --method fp16
# -m defaults to the default model everywhere ($VQ_MODELS decides where it is)
for c in "info" "perplexity -c 64" "calibrate --method ratequant"; do
    VQ_MODELS="$TMP/nomodels" expect_exit 1 "$VQ" $c
    grep -q "nomodels/SmolLM2-135M-Instruct.Q4_1.gguf" "$ERR" && ok || bad "$c: default model: $(cat "$ERR")"
done
echo "grammar: $pass passed, $fail failed"
[ "$fail" = 0 ]
