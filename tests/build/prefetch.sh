#!/usr/bin/env bash
# prefetch.sh — the software prefetches of the streaming kernels are in the built library.
# gcc 12 deleted prefetches as dead code twice (calls of __builtin_prefetch / _mm_prefetch, and
# a static inline helper of them that was not inlined before dead-code elimination): the
# kernels still computed the same bits, so no other test saw it, and SmolLM2's Q8_0 output
# head streamed at 6.5 GB/s instead of 11 on one thread. The prefetches are asm statements now
# (vq_prefetch, vq_prefetch_l2 in src/core/core.h); this test disassembles the library and
# requires a prefetch instruction in each kernel below. First it must reject a kernel that has
# none (a check that cannot fail tests nothing).
# Usage: bash tests/build/prefetch.sh LIBVELOXQUANT.a   (exit 77: not x86-64 or no objdump)
set -u
LIB=${1:?usage: prefetch.sh LIBRARY}
case "$(uname -m)" in x86_64) ;; *) echo "skip: not x86-64"; exit 77 ;; esac
command -v objdump >/dev/null || { echo "skip: objdump missing"; exit 77; }
[ -r "$LIB" ] || { echo "cannot read $LIB"; exit 1; }

KERNELS="vq_vec_dotr4_q4_0_q8a_avx512vnni vq_vec_dotr4_q4_1_q8a_avx512vnni
vq_vec_dotr4_q5_0_q8a_avx512vnni vq_vec_dotr4_q8_0_q8a_avx512vnni
vq_vec_dotr4_q4_K_q8_K_avx512vnni vq_vec_dotr4_q6_K_q8_K_avx512vnni
vq_vec_dotr16_q4_0_q8a_avx512vnni vq_vec_dotr16_q4_1_q8a_avx512vnni
vq_vec_dotr16_q8_0_q8a_avx512vnni
vq_ggml_scores_f16_avx512 vq_ggml_pv_f16_avx512 vq_ggml_pv_f16_avx2
vq_kivi_score_tiles_avx2 vq_kivi_score_tiles_avx512 vq_kivi_score_tiles_avx512vnni
vq_tq_accumulate_avx2 vq_tq_accumulate_avx512 vq_tq_accumulate_multi_avx512
vq_tq_accumulate_i16_avx512icl vq_tq_accumulate1_i16_avx512icl
vq_wk_accumulate_avx2 vq_wk_accumulate_avx512 vq_wk_accumulate_multi_avx512"

# "count name" per function symbol of the library: prefetch instructions in its body.
COUNTS=$(objdump -d --no-show-raw-insn "$LIB" | awk '
    /^[0-9a-f]+ <[^>]*>:$/ { fn = substr($2, 2, length($2) - 3); seen[fn] = 1; next }
    /\tprefetch/ { c[fn]++ }
    END { for (f in seen) print c[f] + 0, f }')

check() {  # check NAME... -> prints what is wrong, returns 1 if anything is
    local bad=0 k n
    for k in "$@"; do
        n=$(awk -v f="$k" '$2 == f { print $1; exit }' <<<"$COUNTS")
        if [ -z "$n" ]; then echo "$k: not in $LIB"; bad=1
        elif [ "$n" -eq 0 ]; then echo "$k: no prefetch instruction"; bad=1
        fi
    done
    return $bad
}

# a library configured for another processor (no x86 kernels at all) has nothing to check
if ! awk '$2 == "vq_ggml_scores_f16_avx512" { f = 1 } END { exit !f }' <<<"$COUNTS"; then
    echo "skip: $LIB has no x86 kernels"; exit 77
fi
if check vq_vec_dot_q8_0_q8a_avx2 >/dev/null; then
    echo "self-test: a kernel without prefetches passed"; exit 1
fi
# shellcheck disable=SC2086
check $KERNELS || exit 1
echo "prefetches present in $(wc -w <<<"$KERNELS") kernels"
