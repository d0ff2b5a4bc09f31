#!/usr/bin/env bash
# CLI tests (issue 41): the results.json reader applies docs/results.schema.json in full, each
# refusal naming the field: two configs of one name, empty strings where the schema sets
# minLength 1, an hardware.isa outside its enum, data after the object, and 1e999 (beyond the
# double range). No model needed.
set -u
VQ="$1"
export LSAN_OPTIONS="suppressions=$(pwd)/tests/cli/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
fail=0; pass=0
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
OUT="$TMP/out"; ERR="$TMP/err"
. "$(dirname "$0")/lib.sh"
has() { grep -qF -- "$1" "$ERR" && ok || { bad "want '$1' in stderr:"; cat "$ERR" >&2; }; }
FIX=tests/golden/results_fixture.json
edit_fix() {  # edit_fix OUT.json PYTHON-STATEMENT (d = the fixture)
    python3 - "$FIX" "$1" "$2" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
exec(sys.argv[3])
json.dump(d, open(sys.argv[2], "w"))
EOF
}
refused() {  # refused FILE MESSAGE
    expect_exit 1 "$VQ" report "$1" -o "$TMP/r"
    has "$2"
}
edit_fix "$TMP/dup.json" 'd["results"][2]["config"]["name"] = d["results"][0]["config"]["name"]'
N=$(python3 -c 'import json, sys
print(json.load(open(sys.argv[1]))["results"][0]["config"]["name"])' "$FIX")
refused "$TMP/dup.json" "results[2].config.name: \"$N\" is also the name of results[0]"
edit_fix "$TMP/e1.json" 'd["results"][1]["config"]["name"] = ""'
refused "$TMP/e1.json" "results[1].config.name: empty string (the schema asks for at least 1"
edit_fix "$TMP/e2.json" 'd["results"][0]["config"]["k_method"] = ""'
refused "$TMP/e2.json" "results[0].config.k_method: empty string"
edit_fix "$TMP/e3.json" 'd["created_utc"] = ""'
refused "$TMP/e3.json" "top.created_utc: empty string"
edit_fix "$TMP/e4.json" 'd["results"][0]["error"] = ""'
refused "$TMP/e4.json" "results[0].error: empty string"
edit_fix "$TMP/isa.json" 'd["hardware"]["isa"] = "sse9"'
refused "$TMP/isa.json" "hardware.isa: \"sse9\" is not one of scalar, avx2, avx512, auto"
{ cat "$FIX"; echo '{"x": 1}'; } > "$TMP/trail.json"
refused "$TMP/trail.json" "data after the JSON object (at byte"
{ cat "$FIX"; printf '\n\n  \n'; } > "$TMP/ws.json"
expect_exit 0 "$VQ" report "$TMP/ws.json" -o "$TMP/r"
python3 - "$FIX" "$TMP/big.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
d["results"][1]["ppl"] = 12345.5
open(sys.argv[2], "w").write(json.dumps(d).replace("12345.5", "1e999"))
EOF
refused "$TMP/big.json" "results[1].ppl: a value beyond the double range is not a finite number"
printf '{"schema": ' > "$TMP/cut.json"
refused "$TMP/cut.json" "not valid JSON (at byte"

echo "results_schema: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
