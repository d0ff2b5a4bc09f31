#!/usr/bin/env python3
"""gen_results.py — the tables of docs/RESULTS.md, generated from the committed results files.

docs/RESULTS.md is prose written by hand with generated tables in it. A table stands between
two marker lines,

    <!-- table: NAME -->
    ... (generated: a line naming the file, command, commit, machine, threads; the table) ...
    <!-- end table -->

and NAME is one of TABLES below: a committed results file (docs/results/*/results.json written
by `veloxquant sweep` or merged by scripts/merge_ppl_results.py, bench/results/*.json written
by bench/llama_bench.sh or bench/serve_bench.py) and the kind of table drawn from it. Every
number of every table comes from its file; the prose around the tables may quote them. A
Markdown table row (a line that starts with "|") outside the markers is an error: a table
without a results file behind it.

Usage:
    python3 scripts/gen_results.py            rewrite the tables of docs/RESULTS.md in place
    python3 scripts/gen_results.py --check    exit 1 (with a diff) when docs/RESULTS.md is not
                                              what this script writes, or holds a table row
                                              outside the markers
    --root DIR  the repository (default: the one holding this script); --doc FILE another
    document (tests). Python standard library only. `make results` runs the first form.
"""
import argparse
import difflib
import json
import os
import re
import subprocess
import sys

BEGIN = re.compile(r"^<!-- table: ([A-Za-z0-9_.-]+) -->$")
END = "<!-- end table -->"

# The quality issue's targets for the presets, against llama.cpp's caches of the same run:
# preset -> (llama.cpp config, factor) on mean KL, or ("ppl", factor) on perplexity vs fp16.
TARGETS = {
    "kv8": ("q8_0", 1.0),
    "kv5": ("q5_0", 0.5),
    "kv4": ("q4_0", 0.33),
    "kv3": ("q4_0", 1.0),
    "kv2": ("ppl", 1.25),
}

# name -> (file relative to the root, kind, options)
TABLES = {
    # SmolLM2-135M-Instruct Q4_1
    "smollm2-presets": ("docs/results/presets-ctx2048/results.json", "presets", {}),
    "smollm2-sweep-ctx2048": ("docs/results/smollm2-ctx2048/results.json", "sweep", {}),
    "smollm2-sweep-ctx512": ("docs/results/smollm2-ctx512/results.json", "sweep", {}),
    "smollm2-llamacpp-1chunk": ("docs/results/llamacpp-ctx2048-c1/results.json", "presets", {}),
    "smollm2-speed": ("bench/results/llama_bench_smollm2.json", "bench", {}),
    "smollm2-speed-8192-778f0ea": ("bench/results/llama_bench_smollm2_8192.json", "bench", {}),
    "smollm2-speed-8192-1b74d4e":
        ("bench/results/llama_bench_smollm2_8192_1b74d4e.json", "bench", {}),
    "smollm2-speed-8192-e4f3852":
        ("bench/results/llama_bench_smollm2_8192_e4f3852.json", "bench", {"attention": True}),
    "smollm2-speed-424a996":
        ("bench/results/llama_bench_smollm2_424a996.json", "bench", {"attention": True}),
    # Gemma 3 270M Q4_K_M
    "gemma3-presets": ("docs/results/gemma3-presets-ctx2048/results.json", "presets", {}),
    "gemma3-speed": ("bench/results/llama_bench_gemma3.json", "bench", {}),
    "gemma3-speed-depths": ("bench/results/llama_bench_gemma3_depths.json", "bench", {}),
    "gemma3-speed-512t2": ("bench/results/llama_bench_gemma3_depths_512t2.json", "bench", {}),
    # Qwen2.5-Coder 1.5B Instruct Q4_K_M
    "qwen25-presets-c8": ("docs/results/qwen25-presets-ctx2048-c8/results.json", "presets", {}),
    "qwen25-presets": ("docs/results/qwen25-presets-ctx2048/results.json", "presets", {}),
    "qwen25-speed": ("bench/results/llama_bench_qwen25.json", "bench", {}),
    "qwen25-speed-8192": ("bench/results/llama_bench_qwen25_8192.json", "bench",
                          {"attention": True, "memory": True}),
    "qwen25-speed-32768": ("bench/results/generate_qwen25_32768.json", "bench",
                           {"attention": True, "memory": True}),
    "qwen25-speed-8192-r3": ("bench/results/llama_bench_qwen25_8192_r3.json", "bench",
                             {"attention": True, "memory": True}),
    "qwen25-speed-32768-a2e8632": ("bench/results/generate_qwen25_32768_a2e8632.json", "bench",
                                   {"attention": True, "memory": True}),
    "qwen25-speed-8192-62916dc": ("bench/results/llama_bench_qwen25_8192_62916dc.json", "bench",
                                  {"attention": True, "memory": True}),
    "qwen25-speed-32768-62916dc": ("bench/results/generate_qwen25_32768_62916dc.json", "bench",
                                   {"attention": True, "memory": True}),
    "qwen25-speed-amd-d889537": ("bench/results/llama_bench_qwen25_amd_d889537.json", "bench", {}),
    "qwen25-speed-amd-2048-7cc3bfe": ("bench/results/llama_bench_qwen25_amd_2048_7cc3bfe.json",
                                      "bench", {"attention": True, "memory": True}),
    "qwen25-speed-amd-2048-8cb7953": ("bench/results/generate_qwen25_amd_2048_8cb7953.json",
                                      "bench", {"attention": True, "memory": True}),
    "smollm2-ppl-speed-amd": ("bench/results/ppl_speed_smollm2_amd.json", "ppl_speed", {}),
    "qwen25-speed-zen5": ("bench/results/llama_bench_qwen25_zen5_b059fb7.json", "bench", {}),
    "qwen25-speed-zen5-2048": ("bench/results/llama_bench_qwen25_zen5_2048_b059fb7.json", "bench",
                               {"attention": True, "memory": True}),
    "qwen25-speed-zen5-2048-r5": ("bench/results/llama_bench_qwen25_zen5_2048_r5.json", "bench",
                                  {"attention": True, "memory": True}),
    "qwen25-speed-zen5-pf": ("bench/results/llama_bench_qwen25_zen5_1c3603f.json", "bench", {}),
    "qwen25-speed-zen5-32768": ("bench/results/llama_bench_qwen25_zen5_32768_cb050ab.json",
                                "bench", {"attention": True, "memory": True}),
    "smollm2-ppl-speed-zen5": ("bench/results/ppl_speed_smollm2_zen5.json", "ppl_speed", {}),
    "qwen25-serve": ("bench/results/serve_qwen25.json", "serve", {}),
    # veloxquant serve on the default model
    "smollm2-serve": ("bench/results/serve_smollm2.json", "serve", {}),
    "smollm2-serve-admission-fp16": ("bench/results/serve_admission_fp16.json", "serve", {}),
    "smollm2-serve-admission-kv4": ("bench/results/serve_admission_kv4.json", "serve", {}),
    "smollm2-serve-admission-kv3": ("bench/results/serve_admission_kv3.json", "serve", {}),
}

# Committed results files that no table of RESULTS.md shows, and why. --check fails on a
# results file (docs/results/**/*.json, bench/results/*.json) that is in neither TABLES nor
# here, so that a new file gets its table or its reason; the table "other-files" lists these.
NOT_SHOWN = {
    "docs/results/gemma3-ctx2048/results.json":
        "an early partial Gemma 3 sweep (commit e7db769): its fp16 row only, behind the figures "
        "of its folder",
    "docs/results/llamacpp-ctx2048-c1/llamacpp.json":
        "scripts/llamacpp_ppl.py's own output behind the results.json of its folder (the "
        "smollm2-llamacpp-1chunk table)",
    "bench/results/llama_bench.json":
        "bench/llama_bench.sh's default output: depth 8192 at commit 76bec21, superseded by "
        "the later depth-8192 runs",
    "bench/results/llama_bench_vq_smollm2_512.json":
        "depth 512, veloxquant only, commit 7775a26: superseded by the 596965a grid",
    "bench/results/llamacpp_smollm2.json":
        "llama.cpp f16 alone (scripts/golden/bench_llamacpp.py, AMD EPYC, 2026-11-30), before "
        "bench/llama_bench.sh timed both engines in one run",
    "bench/results/llamacpp_smollm2_quiet.json":
        "the same on a quieter hour of that machine",
}

DEFAULT_MODEL = "SmolLM2-135M-Instruct.Q4_1.gguf"


class Bad(Exception):
    pass


def num(v, fmt):
    """v formatted with fmt, or an em dash when the file does not record it."""
    return "—" if v is None else fmt % v


def pct(v):
    return "—" if v is None else "%.1f %%" % (100.0 * v)


def kl(v):
    if v is None:
        return "—"
    return "0" if v == 0 else "%.5f" % v if v >= 1e-5 else "%.1e" % v


def threads_text(n):
    return "%d thread%s" % (n, "" if n == 1 else "s")


def machine(d):
    hw = d.get("hardware", {})
    isa = hw.get("isa", "")
    return "%s%s" % (hw.get("cpu", "?"), ", ISA %s" % isa if isa and isa != "auto" else "")


def md_row(cells):
    return "| " + " | ".join(cells) + " |"


def table(head, align, rows):
    """head: column titles; align: 'l' or 'r' per column; rows: lists of cells."""
    out = [md_row(head), "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|"]
    out += [md_row(r) for r in rows]
    return out


def results_header(path, d, command):
    p = d["protocol"]
    chunks = p.get("chunks", 0)
    lines = ["`%s`: %s, ctx %d, %s; commit %s; %s, %s; written %s." % (
        path, d["model"]["file"], p["ctx"], "%d chunks" % chunks if chunks else "all chunks",
        d.get("git_commit", "?"), machine(d), threads_text(d["hardware"]["cores"]),
        d.get("created_utc", "?"))]
    if command:
        lines += ["", "```sh", command, "```"]
    return lines


def sweep_command(d):
    p = d["protocol"]
    return ("build/veloxquant sweep -m %s -f %s -c %d --chunks %d --max-tokens %d --prompts %d "
            "-t %d -o OUT" % (d["model"]["file"], p.get("corpus", "?"), p["ctx"],
                              p.get("chunks", 0), p["max_tokens"], len(p["prompts"]),
                              d["hardware"]["cores"]))


def config_name(r):
    c = r["config"]
    name = c["name"]
    if c.get("engine") == "llama.cpp" and name.startswith("llama.cpp "):
        name = name[len("llama.cpp "):]
    return name


def table_sweep(path, d, opts):
    head = ["config", "K / V", "bits/elem", "fullKV_x", "ppl", "mean KL", "top-1",
            "decode tok/s", "tokens generated", "fp16 prefix match"]
    rows = []
    for r in d["results"]:
        c = r["config"]
        kv = "%s-%g / %s-%g" % (c["k_method"], c["k_bits"], c["v_method"], c["v_bits"])
        rows.append([c["name"], kv, num(r.get("bits_per_elem"), "%.3f"),
                     num(r.get("fullKV_x"), "%.2f"), num(r.get("ppl"), "%.2f"),
                     num(r.get("kld_mean"), "%.4f"), pct(r.get("top1")),
                     num(r.get("decode_tok_s"), "%.1f"), num(r.get("tokens_generated"), "%.1f"),
                     num(r.get("fp16_prefix_match"), "%.1f")])
    return (results_header(path, d, sweep_command(d)) + [""] +
            table(head, "llrrrrrrrr", rows))


def table_presets(path, d, opts):
    """Quality rows of both engines (scripts/llamacpp_ppl.py + perplexity, merged); a preset's
    target against llama.cpp's cache of the same file when that row is there."""
    res = d["results"]
    llama = {config_name(r): r for r in res if r["config"].get("engine") == "llama.cpp"}
    ours_fp16 = next((r for r in res if r["config"].get("engine") != "llama.cpp" and
                      r["config"]["name"] == "fp16"), None)
    base_ppl = (ours_fp16 or llama.get("f16") or {}).get("ppl")
    with_target = any(r["config"]["name"] in TARGETS for r in res)
    head = ["engine", "config", "bits/elem", "ppl", "mean KL (top-256)", "median KL", "p99 KL",
            "top-1"]
    if any("kld_full_mean" in r for r in res):
        head.append("mean KL (full vocabulary)")
    full = head[-1].endswith("(full vocabulary)")
    if with_target:
        head += ["target", "met"]
    rows = []
    for r in res:
        c = r["config"]
        engine = c.get("engine", "veloxquant")
        name = config_name(r)
        cells = [engine, "**%s**" % name if name in TARGETS else name,
                 num(r.get("bits_per_elem"), "%.3f"), num(r.get("ppl"), "%.4f"),
                 kl(r.get("kld_mean")), kl(r.get("kld_median")), num(r.get("kld_p99"), "%.4f"),
                 pct(r.get("top1"))]
        if full:
            cells.append(kl(r.get("kld_full_mean")))
        if with_target:
            tgt, met = "", ""
            t = TARGETS.get(name) if engine == "veloxquant" else None
            if t and t[0] == "ppl" and base_ppl and r.get("ppl") is not None:
                lim = t[1] * base_ppl
                tgt = "ppl ≤ %g × fp16 = %.2f" % (t[1], lim)
                met = "yes (ppl %+.1f %%)" % (100 * (r["ppl"] / base_ppl - 1)) \
                    if r["ppl"] <= lim else "no"
            elif t and t[0] in llama and llama[t[0]].get("kld_mean") and \
                    r.get("kld_mean") is not None:
                ref = llama[t[0]]["kld_mean"]
                tgt = "≤ %g × %s = %s" % (t[1], t[0], kl(t[1] * ref))
                met = ("yes (%s)" if r["kld_mean"] <= t[1] * ref else "no (%s)") % (
                    "%.2g × %s" % (r["kld_mean"] / ref, t[0]))
            cells += [tgt, met]
        rows.append(cells)
    align = "ll" + "r" * (len(head) - 2 - (2 if with_target else 0)) + ("ll" if with_target
                                                                        else "")
    return results_header(path, d, None) + [""] + table(head, align, rows)


def bench_command(d):
    rows = d["rows"]
    ours = [r["kv"] for r in rows if r["engine"] == "veloxquant"]
    theirs = [r["kv"] for r in rows if r["engine"] == "llama.cpp"]
    uniq = lambda xs: " ".join(dict.fromkeys(xs))
    env = []
    if d.get("model") and d["model"] != DEFAULT_MODEL:
        env.append("MODEL=~/.cache/veloxquant/models/%s" % d["model"])
    if d.get("omp_wait_policy"):
        env.append("OMP_WAIT_POLICY=%s" % d["omp_wait_policy"])
    env += ['DEPTHS="%s"' % " ".join(str(x) for x in d["depths"]),
            'THREADS="%s"' % " ".join(str(x) for x in d["threads"]),
            'KVS="%s"' % uniq(ours), 'LLAMA_KVS="%s"' % uniq(theirs), "REPS=%d" % d["reps"]]
    if d.get("prefill_tokens", 512) != 512:
        env.append("PREFILL=%d" % d["prefill_tokens"])
    if d.get("decode_tokens", 128) != 128:
        env.append("GEN=%d" % d["decode_tokens"])
    for k in ("llama_fill", "vq_fill"):  # how each side reached its depth, when not the default
        if d.get(k, "eval" if k == "llama_fill" else "each") not in ("eval", "each"):
            env.append("%s=%s" % (k.upper(), d[k]))
    return " ".join(env) + " bench/llama_bench.sh"


def table_bench(path, d, opts):
    rows = d["rows"]
    llama = d.get("llama_cpp") or {}
    lc = llama.get("commit")
    runs = "one run" if d["reps"] == 1 else "medians of %d runs" % d["reps"]
    header = ["`%s`: %s, a %d-token prefill and %d decode steps after `depth` tokens, %s; "
              "veloxquant commit %s%s; %s (%d CPUs); %s.%s" % (
                  path, d["model"], d["prefill_tokens"], d["decode_tokens"], runs,
                  d["veloxquant_commit"], ", llama.cpp %s" % lc if lc else "", d["cpu"],
                  d["nproc"], d["date"], " " + d["note"][0].upper() + d["note"][1:] + "."
                  if d.get("note") else ""),
              "", "```sh", d.get("command") or bench_command(d), "```", ""]
    any_llama = any(r["engine"] == "llama.cpp" for r in rows)
    head = ["depth", "threads", "engine", "KV", "prefill tok/s", "decode tok/s"]
    if any_llama:
        head += ["prefill × llama f16", "decode × llama f16"]
    head += ["prefill × our fp16", "decode × our fp16"]
    if opts.get("attention"):
        head += ["decode attention ms", "attention × fp16", "byte bound × fp16"]
    if opts.get("memory"):
        head += ["KV MB", "peak RSS MB"]
    out = []
    for r in rows:
        cells = [str(r["depth"]), str(r["threads"]), r["engine"], r["kv"],
                 num(r.get("prefill_tok_s"), "%.1f"), num(r.get("decode_tok_s"), "%.1f")]
        if any_llama:
            cells += [num(r.get("prefill_x_llama_f16"), "%.2f"),
                      num(r.get("decode_x_llama_f16"), "%.2f")]
        cells += [num(r.get("prefill_x_fp16"), "%.2f"), num(r.get("decode_x_fp16"), "%.2f")]
        if opts.get("attention"):
            cells += [num(r.get("decode_attn_ms"), "%.2f"), num(r.get("decode_attn_x_fp16"),
                                                                 "%.2f"),
                      num(r.get("decode_bound_x_fp16"), "%.2f")]
        if opts.get("memory"):
            kvb = r.get("kv_bytes")
            cells += [num(kvb / 1e6 if kvb is not None else None, "%.1f"),
                      num(r.get("peak_rss_mb"), "%.0f")]
        out.append(cells)
    return header + table(head, "rrll" + "r" * (len(head) - 4), out)


def table_serve(path, d, opts):
    """bench/serve_bench.py: aggregate tokens/s of `veloxquant serve` per client count."""
    runs = "one round" if d["rounds"] == 1 else "medians of %d alternated rounds" % d["rounds"]
    reserve = (" (each charged for a %d-token conversation)" % d["reserve"]
               if d.get("reserve") else "")
    header = ["`%s`: %s, `serve %s` (KV budget %.1f MiB, model %.1f MiB), %d tokens per "
              "request%s, %s; veloxquant commit %s; %s (%d CPUs); %s.%s" % (
                  path, d["model"], d["serve"], d["kv_budget"] / 2**20, d["model_mb"],
                  d["max_tokens"], reserve, runs, d["veloxquant_commit"], d["cpu"], d["nproc"],
                  d["date"], " " + d["note"][0].upper() + d["note"][1:] + "."
                  if d.get("note") else ""),
              "", "```sh", d["command"], "```", ""]
    head = ["clients", "requests", "tok/s", "× 1 client", "decode tok/s", "at once",
            "rows per step", "TTFT p50 / p99 s", "latency p50 / p99 s", "errors", "KV MB in use",
            "peak RSS MB", "RSS ≤ budget + model"]
    out = []
    for r in d["rows"]:
        out.append([str(r["clients"]), str(r["clients"] * r["requests_per_client"]),
                    num(r["aggregate_tok_s"], "%.1f"), num(r["x_first"], "%.2f"),
                    num(r.get("server_decode_tok_s"), "%.1f"), str(r["max_active"]),
                    num(r.get("rows_per_decode_step"), "%.2f"),
                    "%s / %s" % (num(r["ttft_p50_s"], "%.3f"), num(r["ttft_p99_s"], "%.3f")),
                    "%s / %s" % (num(r["latency_p50_s"], "%.2f"),
                                 num(r["latency_p99_s"], "%.2f")),
                    str(r["errors"]), "%.1f" % (r["max_kv_in_use"] / 1e6),
                    num(r["peak_rss_mb"], "%.0f"),
                    "yes" if r["rss_within_budget_plus_model"] else "no"])
    return header + table(head, "rr" + "r" * (len(head) - 2), out)


def committed_files(root):
    """The results files under docs/results/ and bench/results/ (relative paths, sorted): the
    ones git tracks, or every one when root is not a git checkout."""
    try:
        r = subprocess.run(["git", "-C", root, "ls-files", "-z", "--", "docs/results",
                            "bench/results"], capture_output=True, check=True)
        return sorted(f for f in r.stdout.decode().split("\0") if f.endswith(".json"))
    except (OSError, subprocess.CalledProcessError):
        pass
    out = []
    for top in ("docs/results", "bench/results"):
        for d, _, files in os.walk(os.path.join(root, top)):
            out += [os.path.relpath(os.path.join(d, f), root).replace(os.sep, "/")
                    for f in files if f.endswith(".json")]
    return sorted(out)


def table_files(root):
    """Every committed results file that no table shows, with the reason."""
    shown = {t[0] for t in TABLES.values()}
    rows = [["`%s`" % f, NOT_SHOWN[f]] for f in committed_files(root)
            if f not in shown and f in NOT_SHOWN]
    return table(["file", "why no table"], "ll", rows)


def table_ppl_speed(path, d, opts):
    """bench/ppl_speed.sh: perplexity's batched prefill per cache, medians of alternated runs."""
    header = ["`%s`: %s, `perplexity -c %d --chunks %d -t %d`, medians of %d alternated rounds; "
              "veloxquant commit %s; %s (%d CPUs); %s.%s" % (
                  path, d["model"], d["ctx"], d["chunks"], d["threads"], d["reps"],
                  d["veloxquant_commit"], d["cpu"], d["nproc"], d["date"],
                  " " + d["note"][0].upper() + d["note"][1:] + "." if d.get("note") else ""),
              "", "```sh", d["command"], "```", ""]
    head = ["KV", "prefill tok/s", "runs", "× our fp16", "KV MB", "perplexity"]
    out = []
    for r in d["rows"]:
        kvb = r.get("kv_bytes")
        out.append([r["kv"], num(r["prefill_tok_s"], "%.1f"),
                    " / ".join("%.1f" % x for x in r["samples"]), num(r["x_fp16"], "%.2f"),
                    num(kvb / 1e6 if kvb is not None else None, "%.1f"),
                    num(r.get("ppl"), "%.4f")])
    return header + table(head, "lrlrrr", out)


KINDS = {"sweep": table_sweep, "presets": table_presets, "bench": table_bench,
         "serve": table_serve, "ppl_speed": table_ppl_speed}


def generate(root, name):
    if name == "other-files":
        return table_files(root)
    if name not in TABLES:
        raise Bad("unknown table '%s' (scripts/gen_results.py TABLES: %s)" %
                  (name, ", ".join(sorted(TABLES))))
    path, kind, opts = TABLES[name]
    full = os.path.join(root, path)
    try:
        with open(full, encoding="utf-8") as f:
            d = json.load(f)
    except (OSError, ValueError) as e:
        raise Bad("table '%s': %s: %s" % (name, path, e))
    try:
        return KINDS[kind](path, d, opts)
    except (KeyError, TypeError, ZeroDivisionError) as e:
        raise Bad("table '%s': %s: missing or bad field %s" % (name, path, e))


def render(root, text):
    """The document with every marked table regenerated; raises Bad on a problem."""
    out, lines, i, used = [], text.split("\n"), 0, set()
    while i < len(lines):
        m = BEGIN.match(lines[i])
        if not m:
            if lines[i].startswith("|"):
                raise Bad("line %d: a table row outside <!-- table: NAME --> markers (every "
                          "table comes from a results file): %s" % (i + 1, lines[i][:60]))
            if lines[i] == END:
                raise Bad("line %d: '%s' without its opening marker" % (i + 1, END))
            out.append(lines[i])
            i += 1
            continue
        j = i + 1
        while j < len(lines) and lines[j] != END:
            if BEGIN.match(lines[j]):
                raise Bad("line %d: table '%s' is not closed before line %d" %
                          (i + 1, m.group(1), j + 1))
            j += 1
        if j == len(lines):
            raise Bad("line %d: table '%s' has no '%s'" % (i + 1, m.group(1), END))
        used.add(m.group(1))
        out += [lines[i]] + generate(root, m.group(1)) + [END]
        i = j + 1
    shown = {t[0] for t in TABLES.values()}
    for f in committed_files(root):
        if f not in shown and f not in NOT_SHOWN:
            raise Bad("%s: a committed results file with no table (add it to TABLES in "
                      "scripts/gen_results.py and a marker here, or its reason to NOT_SHOWN)" % f)
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="compare instead of writing; exit 1 on a difference")
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(
        __file__))))
    ap.add_argument("--doc", default=None, help="the document (default ROOT/docs/RESULTS.md)")
    a = ap.parse_args()
    doc = a.doc or os.path.join(a.root, "docs", "RESULTS.md")
    try:
        with open(doc, encoding="utf-8") as f:
            text = f.read()
        new = render(a.root, text)
    except (OSError, Bad) as e:
        print("gen_results: %s: %s" % (doc, e), file=sys.stderr)
        return 1
    if a.check:
        if new == text:
            print("gen_results: %s: every table is what its results file gives" % doc)
            return 0
        diff = difflib.unified_diff(text.split("\n"), new.split("\n"), doc, "generated",
                                    lineterm="", n=1)
        print("gen_results: %s differs from what scripts/gen_results.py writes (run `make "
              "results`):" % doc, file=sys.stderr)
        for n, line in enumerate(diff):
            if n == 40:
                print("...", file=sys.stderr)
                break
            print(line, file=sys.stderr)
        return 1
    if new != text:
        with open(doc + ".tmp", "w", encoding="utf-8") as f:
            f.write(new)
        os.replace(doc + ".tmp", doc)
    print("gen_results: %s: %d tables" % (doc, new.count(END)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
