#!/usr/bin/env bash
# CLI tests for `info` on the synthetic models of tests/golden/synth (no default model needed):
# the architectures the engine runs (qwen3, phi3, llama with a window) show their features (the
# Phi-3 window is in the metadata but not applied, as in llama.cpp), and a valid GGUF of an
# architecture it does not run (mamba) is still listed in full, with every reason it cannot run
# (unsupported architecture, missing keys, the llama-layout tensors it lacks, a tensor type
# without kernels), exit status 0; a truncated copy of it exits 1.
set -u
VQ="$1"
SYNTH="$(dirname "$0")/../golden/synth"
fail=0; pass=0
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
OUT="$TMP/out"; ERR="$TMP/err"
. "$(dirname "$0")/lib.sh"

expect_exit 0 "$VQ" info "$SYNTH/unsupported_mamba.gguf"
for k in 'general.architecture                     "mamba"' "mamba.ssm.state_size" "Q3_K" \
         "engine: cannot run this model (12 problems)" \
         "architecture 'mamba' is not supported (llama, qwen2, qwen3, phi3, gemma3)" \
         "missing metadata 'mamba.feed_forward_length'" "missing metadata 'mamba.attention.head_count'" \
         "missing tensor 'blk.0.attn_q.weight'" "missing tensor 'blk.0.ffn_down.weight'" \
         "1 tensor of ggml type 11 (Q3_K), which the engine does not support (e.g. 'blk.0.ssm_in.weight')"; do
    grep -qF -- "$k" "$OUT" && ok || bad "info on mamba lacks '$k'"
done
grep -q "missing tensor 'blk.0.attn_norm.weight'" "$OUT" && bad "attn_norm is there" || ok
expect_exit 0 "$VQ" info --json --tensors "$SYNTH/unsupported_mamba.gguf"
python3 - "$OUT" <<'PY' && ok || bad "info --json on mamba"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["engine_supported"] is False and "model" not in d, d
p = d["engine_problems"]
assert len(p) == 12 and p[0].startswith("architecture 'mamba' is not supported"), p
assert d["metadata"]["general.architecture"] == "mamba" and d["n_tensors"] == len(d["tensors"]) == 5
assert d["tensor_types"] == {"F32": 3, "F16": 1, "Q3_K": 1}, d["tensor_types"]
PY
head -c 3000 "$SYNTH/unsupported_mamba.gguf" > "$TMP/t.gguf"
expect_exit 1 "$VQ" info "$TMP/t.gguf"
[ -s "$ERR" ] && ok || bad "no message for a truncated file"

expect_exit 0 "$VQ" info "$SYNTH/qwen3.gguf"
for k in "model: qwen3" "head_dim 128" "per-head q/k RMSNorm" "tied output head"; do
    grep -qF -- "$k" "$OUT" && ok || bad "info on qwen3 lacks '$k'"
done
expect_exit 0 "$VQ" info --json "$SYNTH/phi3.gguf"
python3 - "$OUT" <<'PY' && ok || bad "info --json on phi3"
import json, sys
d = json.load(open(sys.argv[1]))
m = d["model"]
assert d["engine_supported"] is True and m["arch"] == "phi3", d
assert m["fused_qkv"] and m["fused_gate_up"] and not m["qk_norm"] and m["rope_type"] == "neox", m
# phi3.attention.sliding_window is in the file but not applied (llama.cpp disables it)
assert d["metadata"]["phi3.attention.sliding_window"] == 48 and m["swa_window"] == 0, m
PY
expect_exit 0 "$VQ" info "$SYNTH/llama_swa.gguf"
grep -qF "sliding window of 32 tokens on 3 of 3 layers" "$OUT" && ok || bad "info: llama_swa window"

echo "info_archs: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
