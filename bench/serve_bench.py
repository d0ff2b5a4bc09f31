#!/usr/bin/env python3
"""serve_bench.py — how `veloxquant serve`'s aggregate tokens/s grows with concurrent clients:
scripts/serve_loadtest.py at each client count, in alternated rounds, medians, one JSON file.

Each round runs the load test once per client count (a fresh server each time, the same
`serve` arguments); the rounds alternate the counts so that a shared machine's load falls on
all of them. Per client count the file records every round's result (serve_loadtest.py's JSON)
and the medians of the aggregate tokens/s, the server's decode tokens/s, the percentiles and
the peak RSS; and the ratio of each count's median aggregate tokens/s to one client's.
docs/SERVE.md explains the protocol; scripts/gen_results.py draws the table of docs/RESULTS.md.

    python3 bench/serve_bench.py --serve "--kv kv4 --parallel 16 -c 2048 -t 2" \\
        --clients 1:5,16:20 -n 128 --rounds 3 --out bench/results/serve_smollm2.json

--clients C:R,...  client counts C, each sending R requests one after another (default
                   1:5,16:20); -n tokens per request (default 128); --rounds (default 3);
--reserve N        each request charged for an N-token conversation (admission at a budget:
                   the most sequences at once is the number the budget admits).
Needs build/veloxquant (or $VQ_CLI) and the venv with the openai client (make venv).
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def git_commit():
    try:
        return subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def run_once(serve, clients, requests, n, reserve):
    cmd = [sys.executable, os.path.join(ROOT, "scripts", "serve_loadtest.py"), "--serve", serve,
           "-C", str(clients), "-R", str(requests), "-n", str(n)]
    if reserve:
        cmd += ["--reserve", str(reserve)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("serve_bench: %s failed (%d):\n%s" % (" ".join(cmd), r.returncode, r.stderr))
    return json.loads(r.stdout.splitlines()[0])


def med(rounds, key):
    xs = [r[key] for r in rounds if r.get(key) is not None]
    return statistics.median(xs) if xs else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--serve", default="--kv kv4 --parallel 16 -c 2048 -t 2",
                    help="arguments of the veloxquant serve to start")
    ap.add_argument("--clients", default="1:5,16:20", help="C:R pairs, comma-separated")
    ap.add_argument("-n", "--max-tokens", type=int, default=128)
    ap.add_argument("--reserve", type=int, default=0,
                    help="charge each request for a conversation of this many tokens "
                         "(serve_loadtest.py --reserve: admission at a budget)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--note", default="", help="a sentence for the table's header")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "serve.json"))
    a = ap.parse_args()
    counts = []
    for part in a.clients.split(","):
        c, _, r = part.partition(":")
        if not c.isdigit() or not r.isdigit() or int(c) < 1 or int(r) < 1:
            ap.error("--clients: C:R pairs of positive integers, e.g. 1:5,16:20")
        counts.append((int(c), int(r)))
    if a.rounds < 1 or a.max_tokens < 1:
        ap.error("--rounds and -n must be positive")
    results = {c: [] for c, _ in counts}
    for k in range(a.rounds):
        for c, r in counts:
            res = run_once(a.serve, c, r, a.max_tokens, a.reserve)
            results[c].append(res)
            print("round %d/%d, %d clients: %.1f tok/s, errors %d, peak RSS %.1f MiB" %
                  (k + 1, a.rounds, c, res["aggregate_tok_s"], res["errors"],
                   res["peak_rss_mb"] or 0), file=sys.stderr)
    one = med(results[counts[0][0]], "aggregate_tok_s")
    rows = []
    for c, r in counts:
        rs = results[c]
        tok = med(rs, "aggregate_tok_s")
        rows.append({
            "clients": c, "requests_per_client": r,
            "aggregate_tok_s": tok, "x_first": round(tok / one, 2) if one else None,
            "server_decode_tok_s": med(rs, "server_decode_tok_s"),
            "ttft_p50_s": med(rs, "ttft_p50_s"), "ttft_p99_s": med(rs, "ttft_p99_s"),
            "latency_p50_s": med(rs, "latency_p50_s"),
            "latency_p99_s": med(rs, "latency_p99_s"),
            "rows_per_decode_step": med(rs, "rows_per_decode_step"),
            "max_active": max(x["max_active"] for x in rs),
            "max_kv_in_use": max(x["max_kv_in_use"] or 0 for x in rs),
            "errors": sum(x["errors"] for x in rs),
            "peak_rss_mb": max(x["peak_rss_mb"] or 0 for x in rs),
            "rss_within_budget_plus_model": all(x["rss_within_budget_plus_model"] for x in rs),
            "rounds": rs})
    home = os.path.expanduser("~")
    serve = a.serve.replace(home + "/", "~/") if home != "/" else a.serve
    out = {
        "model": results[counts[0][0]][0]["model"], "serve": serve, "max_tokens": a.max_tokens,
        "reserve": a.reserve,
        "rounds": a.rounds, "veloxquant_commit": git_commit(), "cpu": cpu_name(),
        "nproc": os.cpu_count(), "kv_budget": results[counts[0][0]][0]["kv_budget"],
        "model_mb": results[counts[0][0]][0]["model_mb"],
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python3 bench/serve_bench.py --serve \"%s\" --clients %s -n %d%s --rounds %d"
                   % (serve, a.clients, a.max_tokens,
                      " --reserve %d" % a.reserve if a.reserve else "", a.rounds),
        "rows": rows}
    if a.note:
        out["note"] = a.note
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    for row in rows:
        print("%2d clients: %.1f tok/s (x%.2f), errors %d, TTFT p99 %.3f s, latency p99 %.3f s, "
              "peak RSS %.1f MiB" % (row["clients"], row["aggregate_tok_s"], row["x_first"],
                                     row["errors"], row["ttft_p99_s"], row["latency_p99_s"],
                                     row["peak_rss_mb"]))
    return 1 if any(row["errors"] for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
