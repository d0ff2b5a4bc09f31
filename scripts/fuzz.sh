#!/usr/bin/env bash
# fuzz.sh — runs every libFuzzer target of a fuzz build (make fuzz) for a fixed time and prints
# one summary line per target: executions, edges covered (libFuzzer "cov") of those instrumented,
# features, corpus size.
#   scripts/fuzz.sh BUILD_DIR [SECONDS_PER_TARGET] [TARGET...]
# Seeds: fuzz/corpus/<name>/ (read only). New inputs go to BUILD_DIR/fuzz-corpus/<name>/, crash,
# leak and timeout reproducers to BUILD_DIR/fuzz-crashes/<name>/. A reproducer worth keeping goes
# into fuzz/corpus/<name>/crashes/ once the bug is fixed: ctest replays it (replay_fuzz_<name>).
# Env: VQ_FUZZ_ARGS (extra libFuzzer flags), VQ_MODELS (fuzz_tokenizer loads the default
# model's vocabulary from there when present). Exit status: 1 when a target found a crash.
set -euo pipefail
cd "$(dirname "$0")/.."
B="${1:?usage: scripts/fuzz.sh BUILD_DIR [SECONDS] [TARGET...]}"
T="${2:-60}"
shift $(( $# >= 2 ? 2 : 1 ))
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    for f in fuzz/fuzz_*.c; do targets+=("$(basename "$f" .c)"); done
fi
status=0
summary=()
for t in "${targets[@]}"; do
    name=${t#fuzz_}
    exe="$B/$t"
    [ -x "$exe" ] || { echo "fuzz: $exe not built (make fuzz builds it)" >&2; exit 2; }
    work="$B/fuzz-corpus/$name"
    art="$B/fuzz-crashes/$name"
    mkdir -p "$work" "$art"
    log="$B/fuzz-$name.log"
    echo "fuzz: $t for ${T}s (log: $log)"
    rc=0
    # -timeout: an input that takes more than 10 s is a hang; -rss_limit_mb: a 2 GB allocation
    # from a few bytes of input is a bug too.
    # shellcheck disable=SC2086
    "$exe" "$work" "fuzz/corpus/$name" -max_total_time="$T" -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix="$art/" -print_final_stats=1 ${VQ_FUZZ_ARGS:-} > "$log" 2>&1 || rc=$?
    # the last status line, e.g. "#123456 DONE cov: 812 ft: 2950 corp: 301/40Kb ..."
    line=$(grep -E '^#[0-9]+[[:space:]]+(DONE|pulse|NEW|REDUCE|INITED)' "$log" | tail -n 1 || true)
    # edges instrumented in the binary (library code the target links, plus the target itself)
    total=$(sed -n 's/^INFO: Loaded 1 modules *(\([0-9]*\) inline 8-bit counters.*/\1/p' "$log" | head -n 1)
    cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<< "$line")
    ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<< "$line")
    corp=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<< "$line")
    runs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\)/\1/p' "$log" | tail -n 1)
    verdict=ok
    if [ "$rc" -ne 0 ]; then
        verdict="FAILED (exit $rc; reproducer in $art/, see $log)"
        status=1
        grep -E 'ERROR: |SUMMARY: |check failed|deadly signal' "$log" | head -n 5 >&2 || true
    fi
    summary+=("$(printf '%-16s runs %-9s edges %5s of %-6s features %-6s corpus %-5s %s' \
        "$t" "${runs:-?}" "${cov:-?}" "${total:-?}" "${ft:-?}" "${corp:-?}" "$verdict")")
done
echo
printf '%s\n' "${summary[@]}"
exit $status
