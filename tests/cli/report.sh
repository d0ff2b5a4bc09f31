#!/usr/bin/env bash
# CLI tests for `report`: six valid, non-trivial PNGs per model from the checked-in fixture,
# table.md holding every number of the fixture, merging of several files, error handling, and
# the figures' layout (--layout-json: no overlapping labels at 3, 22 and 28 configs, no empty
# panels, the fp16 reference line, captions).
# A CLI built without PLplot (-DVQ_PLPLOT=OFF) must write table.md, say in one line how to get
# the figures and exit 3; the figure checks are then skipped and the test exits 77 (skip) once
# everything else has passed.
set -u
VQ="$1"
# PLplot's font and driver libraries keep allocations until exit (sanitizer builds)
export LSAN_OPTIONS="suppressions=$(pwd)/tests/cli/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
FIX=tests/golden/results_fixture.json
fail=0; pass=0
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
OUT="$TMP/out"; ERR="$TMP/err"
. "$(dirname "$0")/lib.sh"

expect_exit 0 "$VQ" report --help
expect_exit 2 "$VQ" report "$FIX"                         # no -o
expect_exit 2 "$VQ" report -o "$TMP/f0"                   # no input
expect_exit 2 "$VQ" report "$FIX" -o "$TMP/f0" --bogus
expect_exit 1 "$VQ" report /nonexistent.json -o "$TMP/f0"
echo '{"schema": "something.else"}' > "$TMP/bad.json"
expect_exit 1 "$VQ" report "$TMP/bad.json" -o "$TMP/f0"
grep -q "schema" "$ERR" && ok || bad "bad schema message"

# the fixture: six PNGs + table.md
expect_exit $REPORT_OK "$VQ" report "$FIX" -o "$TMP/fig"
STEM=SmolLM2-135M-Instruct.Q4_1
if [ "$FIGURES" -eq 0 ]; then
    [ "$(grep -c 'install libplplot-dev plplot-driver-cairo and reconfigure' "$ERR")" -eq 1 ] &&
        ok || bad "no one-line message on how to get the figures"
    ls "$TMP/fig"/*.png >/dev/null 2>&1 && bad "PNGs without PLplot" || ok
fi
for k in throughput quality memory distortion output report; do
    [ "$FIGURES" -eq 1 ] || break
    f="$TMP/fig/$STEM-$k.png"
    [ -f "$f" ] || { bad "missing $f"; continue; }
    # a real PNG: signature, IHDR, sane size, decodable IDAT with many distinct pixel values
    python3 - "$f" <<'EOF' && ok || bad "$f is not a valid non-trivial PNG"
import struct, sys, zlib
b = open(sys.argv[1], "rb").read()
assert b[:8] == b"\x89PNG\r\n\x1a\n", "signature"
assert len(b) > 20000, "too small: %d bytes" % len(b)
pos, idat, w = 8, b"", 0
while pos < len(b):
    n, t = struct.unpack(">I4s", b[pos:pos + 8])
    data = b[pos + 8:pos + 8 + n]
    if t == b"IHDR":
        w, h, depth, ctype = struct.unpack(">IIBB", data[:10])
        assert w >= 800 and h >= 400, (w, h)
    if t == b"IDAT":
        idat += data
    pos += 12 + n
raw = zlib.decompress(idat)
assert len(set(raw)) > 32, "flat image"
EOF
done
T="$TMP/fig/table.md"
[ -f "$T" ] && ok || bad "missing table.md"
python3 - "$FIX" "$T" <<'EOF' && ok || bad "table.md does not hold the fixture's numbers"
import json, sys
fix = json.load(open(sys.argv[1]))
rows = {}
for line in open(sys.argv[2], encoding="utf-8"):
    if line.startswith("| ") and not line.startswith("| config"):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 20:   # the results table (not the output previews)
            rows[cells[0]] = cells
import math
def sig4(v):   # 4 significant digits, as fmt_sig in cmd_report.c
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1e4:
        return "%.0f" % v
    if a < 1e-4:
        return "%.3e" % v
    dec = 3 - math.floor(math.log10(a))
    if a * 10 ** dec >= 1e4 - 0.5:
        dec -= 1
    return "%.*f" % (max(dec, 0), v)
keys = ["bits_per_elem", "kv_bytes", "key_x", "fullKV_x", "ppl", "kld_mean", "kld_median",
        "kld_p99", "top1", "cosine_k", "cosine_v", "prefill_tok_s", "decode_tok_s",
        "tokens_generated", "fp16_prefix_match", "peak_rss_mb"]
counts = {"kv_bytes", "tokens_generated", "fp16_prefix_match", "peak_rss_mb"}
for r in fix["results"]:
    name = r["config"]["name"]
    cells = rows[name]
    for i, k in enumerate(keys):
        want = "—" if k not in r else "%.0f" % r[k] if k in counts else sig4(r[k])
        assert cells[3 + i] == want, (name, k, cells[3 + i], want)
    if "error" in r:
        assert r["error"] in cells[-1], (name, cells[-1])
text = open(sys.argv[2], encoding="utf-8").read()
assert fix["model"]["sha256"] in text and "Fixture CPU" in text
assert "The capital of France is Paris." in text
EOF

# two files of one model merge (a later entry replaces an earlier one of the same name); a
# second model gets its own figures
python3 - "$FIX" "$TMP" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
d["results"] = [r for r in d["results"] if r["config"]["name"] == "kivi-2"]
d["results"][0]["ppl"] = 99.5
d["results"].append({"config": {"name": "kivi-4", "k_method": "kivi", "v_method": "kivi",
                                 "k_bits": 4, "v_bits": 4}, "ppl": 14.25, "kv_bytes": 4000000})
# as files written before fractional widths were recorded hold vecinfer-1.5: k_bits 2
d["results"].append({"config": {"name": "vecinfer-1.5", "k_method": "vecinfer",
                                 "v_method": "vecinfer", "k_bits": 2, "v_bits": 2},
                     "ppl": 20.5, "kv_bytes": 1500000})
json.dump(d, open(sys.argv[2] + "/more.json", "w"))
d["model"]["file"] = "other/Second-Model.gguf"
d["model"]["sha256"] = "0" * 64
json.dump(d, open(sys.argv[2] + "/other.json", "w"))
EOF
expect_exit $REPORT_OK "$VQ" report "$FIX" "$TMP/more.json" "$TMP/other.json" -o "$TMP/fig2"
grep -q "^| kivi-2 .*| 99.50 |" "$TMP/fig2/table.md" && ok || bad "merge did not replace kivi-2"
grep -q "^| kivi-4 " "$TMP/fig2/table.md" && ok || bad "merge did not add kivi-4"
grep -q "^| vecinfer-1.5 | vecinfer-1.5 | vecinfer-1.5 |" "$TMP/fig2/table.md" && ok \
    || bad "an old file's vecinfer-1.5 (k_bits 2) is not shown as 1.5 bits"
[ "$(grep -c '^## ' "$TMP/fig2/table.md")" -eq 2 ] && ok || bad "two model sections"
if [ "$FIGURES" -eq 1 ]; then
    [ -f "$TMP/fig2/Second-Model-report.png" ] && [ -f "$TMP/fig2/$STEM-report.png" ] && ok ||
        bad "per-model figures"
fi

# llama.cpp rows (config.engine, as scripts/llamacpp_ppl.py writes them) merge with a sweep of the
# same model: drawn in the quality figure (its frontier beside ours), listed in table.md; the
# picture differs from the one without them
python3 - "$FIX" "$TMP" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
rows = []
for name, t, bits, kl in (("q8_0", "q8_0", 8.5, 0.0042), ("q4_0", "q4_0", 4.5, 0.0751),
                          ("q5_0", "q5_0", 5.5, 0.0212)):
    rows.append({"config": {"name": "llama.cpp " + name, "engine": "llama.cpp", "k_method": t,
                            "v_method": t, "k_bits": int(bits), "v_bits": int(bits)},
                 "bits_per_elem": bits, "kv_bytes": int(92160 * 512 * bits / 8 * 2 / 30),
                 "ppl": 15.0 + kl, "kld_mean": kl, "kld_full_mean": kl * 1.05, "top1": 0.9})
d["results"] = rows
json.dump(d, open(sys.argv[2] + "/llama.json", "w"))
EOF
expect_exit $REPORT_OK "$VQ" report "$FIX" "$TMP/llama.json" -o "$TMP/fig3"
grep -q "^| llama.cpp q4_0 | q4_0 | q4_0 | 4.500 |" "$TMP/fig3/table.md" \
    && ok || bad "llama.cpp row in table.md"
if [ "$FIGURES" -eq 1 ]; then
    cmp -s "$TMP/fig/$STEM-quality.png" "$TMP/fig3/$STEM-quality.png" \
        && bad "quality figure ignores llama.cpp rows" || ok
fi
sed 's/"engine": "llama.cpp"/"engine": "vllm"/' "$TMP/llama.json" > "$TMP/llama_bad.json"
expect_exit 1 "$VQ" report "$TMP/llama_bad.json" -o "$TMP/fig4"
grep -q "engine" "$ERR" && ok || bad "bad engine message"

# the layout pass: every text box and marker of every figure (--layout-json, page pixels) for
# a 3-config sweep, the committed 22-config results and those with llama.cpp's 6 rows beside
# them (28 configs): no two text boxes overlap, no text covers a marker, every text lies inside
# its panel (titles fit) or the page, and each scatter panel names every config it draws
cat > "$TMP/layout_check.py" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
# the configs each panel of the quality figure must name: {"0": cosine ones, "1": KL ones}
names = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
bad = []
for f in d["figures"]:
    page = [0, 0, f["width"], f["height"]]
    texts = [b for b in f["boxes"] if b["kind"] == "text"]
    marks = [b for b in f["boxes"] if b["kind"] in ("mark", "errbar")]
    ov = lambda a, b: a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]
    ins = lambda a, o: a[0] >= o[0] and a[2] <= o[2] and a[1] >= o[1] and a[3] <= o[3]
    for i, a in enumerate(texts):
        o = page if a["panel"] < 0 else f["panels"][a["panel"]]
        if not ins(a["box"], o):
            bad.append("%s: outside its panel: %r" % (f["file"], a["text"]))
        bad += ["%s: overlap: %r / %r" % (f["file"], a["text"], b["text"]) for b in texts[i + 1:]
                if ov(a["box"], b["box"])]
        bad += ["%s: %r covers a marker or error bar" % (f["file"], a["text"]) for m in marks
                if ov(a["box"], m["box"])]
    if f["file"].endswith("-quality.png"):
        for p in range(len(f["panels"])):
            shown = {b["text"] for b in texts if b["panel"] == p}
            bad += ["%s: %s not labelled in panel %d" % (f["file"], n, p)
                    for n in set(names.get(str(p), [])) - shown]
for b in bad[:20]:
    print("FAIL:", b, file=sys.stderr)
sys.exit(1 if bad or not d["figures"] else 0)
EOF
python3 - "$FIX" "$TMP" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
keep = ("fp16", "turboquant_mse-4", "kivi-2")
d["results"] = [r for r in d["results"] if r["config"]["name"] in keep]
json.dump(d, open(sys.argv[2] + "/three.json", "w"))
EOF
if [ "$FIGURES" -eq 1 ]; then
    C22=docs/results/smollm2-ctx2048/results.json
    LL=docs/results/llamacpp-ctx2048-c1/results.json
    for set in "three:$TMP/three.json" "c22:$C22" "c28:$C22 $LL"; do
        tag=${set%%:*}
        # shellcheck disable=SC2086  # the file list splits on purpose
        lay="$TMP/layout_$tag.json"
        expect_exit 0 "$VQ" report ${set#*:} -o "$TMP/lay_$tag" --layout-json "$lay"
        # the configs with a cosine (panel 0) and with a KL above 0 (panel 1; fp16 is the
        # reference line)
        # shellcheck disable=SC2086
        names=$(python3 -c 'import json, sys
rs = [r for f in sys.argv[1:] for r in json.load(open(f))["results"] if "error" not in r]
print(json.dumps({"0": [r["config"]["name"] for r in rs if "cosine_k" in r],
                  "1": [r["config"]["name"] for r in rs if r.get("kld_mean", 0) > 0]}))
' ${set#*:})
        [ "$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["figures"]))' \
            "$lay")" -eq 6 ] && ok || bad "$tag: six figures in the layout"
        python3 "$TMP/layout_check.py" "$lay" "$names" && ok ||
            bad "$tag: text boxes overlap, leave their panel or miss a config"
    done
    # the check can fail: a label moved onto another, a title wider than its panel
    python3 - "$TMP/layout_c22.json" "$TMP" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
t = [b for b in d["figures"][1]["boxes"] if b["kind"] == "text"]
t[-1]["box"] = list(t[-2]["box"])
json.dump(d, open(sys.argv[2] + "/doctored1.json", "w"))
d = json.load(open(sys.argv[1]))
p = [b for b in d["figures"][0]["boxes"] if b["kind"] == "text" and b["panel"] == 0][0]
p["box"][2] = d["figures"][0]["panels"][0][2] + 40
json.dump(d, open(sys.argv[2] + "/doctored2.json", "w"))
EOF
    for k in 1 2; do
        python3 "$TMP/layout_check.py" "$TMP/doctored$k.json" 2>/dev/null &&
            bad "the layout check passes a doctored layout ($k)" || ok
    done
    # an empty panel is left out: the presets results have no cosine, throughput or output
    expect_exit 0 "$VQ" report docs/results/presets-ctx2048/results.json -o "$TMP/lay_p" \
        --layout-json "$TMP/p.json"
    python3 - "$TMP/p.json" <<'EOF' && ok || bad "presets: empty panels drawn, or no KL panel"
import json, sys
d = json.load(open(sys.argv[1]))
files = sorted(f["file"].rsplit("-", 1)[1] for f in d["figures"])
assert files == ["distortion.png", "memory.png", "quality.png", "report.png"], files
texts = [b["text"] for f in d["figures"] for b in f["boxes"] if b["kind"] == "text"]
assert "no data" not in texts and not any("cosine" in t.lower() for t in texts), "cosine panel"
q = [f for f in d["figures"] if f["file"].endswith("quality.png")][0]
assert len(q["panels"]) == 1 and any("KL" in b["text"] for b in q["boxes"]), "KL panel"
EOF
    python3 "$TMP/layout_check.py" "$TMP/p.json" && ok || bad "presets: text boxes overlap"
    # table.md: each preset's definition with its modifiers, values to 4 significant digits
    grep -qF -- '- kv4: `kivi-4:turboquant_mse-4+g64+res0+s1+kc`' "$TMP/lay_p/table.md" && ok ||
        bad "table.md does not define kv4 with its modifiers"
    grep -q '^| kv4 | kivi-4 | turboquant_mse-4 | 4.389 | 12942720 | ' "$TMP/lay_p/table.md" &&
        ok || bad "table.md kv4 row not rounded to 4 significant digits"
    # fp16 (KL 0) is a labelled reference line on the log KL axis; captions give the threads
    L22="$TMP/layout_c22.json"
    # one x range inside a figure: the two quality panels (bits/elem), prefill and decode
    python3 - "$L22" <<'EOF' && ok || bad "the panels of a figure do not share their x range"
import json, sys
for f in json.load(open(sys.argv[1]))["figures"]:
    if f["file"].endswith(("-quality.png", "-throughput.png")):
        xr = f["x_ranges"]
        assert len(xr) == 2 and xr[0] == xr[1], (f["file"], xr)
EOF
    grep -q '"fp16: KL = 0"' "$L22" && ok || bad "no fp16 reference on the KL panel"
    grep -q '1 thread; one run per config' "$L22" && ok || bad "caption: threads, runs"
    grep -q '"errbar"' "$L22" && bad "error bars drawn for a file without repeats" || ok
    # speed repeats (sweep --repeats: prefill_tok_s_runs / decode_tok_s_runs): the throughput
    # bars are the medians with a min .. max error bar per config, the caption says how many
    # runs and threads; nothing overlaps
    python3 - "$TMP/three.json" "$TMP/runs.json" <<'EOF2'
import json, sys
d = json.load(open(sys.argv[1]))
for i, r in enumerate(d["results"]):
    for k in ("prefill_tok_s", "decode_tok_s"):
        runs = [r[k] * f for f in (0.9, 1.0, 1.05 + 0.05 * i)]
        r[k + "_runs"] = runs
        r[k] = sorted(runs)[1]
json.dump(d, open(sys.argv[2], "w"))
EOF2
    expect_exit 0 "$VQ" report "$TMP/runs.json" -o "$TMP/lay_runs" --layout-json "$TMP/runs_lay.json"
    python3 "$TMP/layout_check.py" "$TMP/runs_lay.json" && ok || bad "repeats: text boxes overlap"
    python3 - "$TMP/runs.json" "$TMP/runs_lay.json" <<'EOF2' && ok || bad "repeats: error bars or caption"
import json, sys
d = json.load(open(sys.argv[1]))
lay = json.load(open(sys.argv[2]))
for f in lay["figures"]:
    errs = [b for b in f["boxes"] if b["kind"] == "errbar"]
    texts = [b["text"] for b in f["boxes"] if b["kind"] == "text"]
    if f["file"].endswith(("-throughput.png", "-report.png")):
        # one bar per config and throughput panel, spanning its runs' min .. max
        assert len(errs) == 2 * len(d["results"]), (f["file"], len(errs))
        for r in d["results"]:
            for k in ("prefill_tok_s_runs", "decode_tok_s_runs"):
                want = "%s: %.4g .. %.4g" % (r["config"]["name"], min(r[k]), max(r[k]))
                assert any(e["text"] == want for e in errs), (f["file"], want)
    else:
        assert not errs, f["file"]
    assert any("2 threads; 3 runs per config" in t for t in texts), (f["file"], texts[-2:])
EOF2
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ] || exit 1
if [ "$FIGURES" -eq 0 ]; then
    echo "skip: figure checks (built without PLplot: install libplplot-dev plplot-driver-cairo," \
         "reconfigure with -DVQ_PLPLOT=ON); table.md and error checks passed"
    exit 77
fi
