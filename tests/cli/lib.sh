# lib.sh — helpers shared by the CLI tests (sourced, not run): pass/fail counters, ok / bad,
# and expect_exit CODE CMD... which runs CMD with stdout in $OUT and stderr in $ERR (files the
# caller names first) and counts a pass when it exits with CODE.
fail=${fail:-0}; pass=${pass:-0}
ok()  { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
expect_exit() {  # expect_exit CODE CMD...
    local want=$1; shift
    "$@" >"$OUT" 2>"$ERR"
    local got=$?
    if [ "$got" -eq "$want" ]; then ok; else bad "exit $got (want $want): $*"; cat "$ERR" "$OUT" >&2; fi
}
# FIGURES=1 when the CLI draws report figures (built with PLplot), else 0; REPORT_OK is the exit
# status of a `report` that succeeds: 0, or 3 (table.md written, no figures) without PLplot.
FIGURES=1; REPORT_OK=0
if [ -n "${VQ:-}" ] && "$VQ" report --help 2>/dev/null | grep -q '^figures: not built'; then
    FIGURES=0; REPORT_OK=3
fi
