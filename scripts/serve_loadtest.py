#!/usr/bin/env python3
"""serve_loadtest.py — load test of `veloxquant serve` with the openai client (asyncio).

C concurrent clients each send R streamed completion requests one after another; reported:
p50 / p99 time to first token, p50 / p99 latency, aggregate tokens/s (completion tokens of all
clients / wall time), errors (must be 0), the most sequences the server ran at once, the mean
rows of its batched decode steps and the server's peak RSS. Either against a running server
(--url) or one it starts (--serve "ARGS", e.g. --serve "--kv kv4 --parallel 16 -c 2048
--kv-budget 180M"; needs build/veloxquant).

--reserve N asks each request for max_tokens = N - prompt tokens (the KV budget is charged for
an N-token conversation) but reads only --max-tokens tokens and then closes the stream (the
server frees the slot at once): conversations of N tokens admitted, at the cost of short ones.

With --serve it also reports the server's CPU time over the run (user + system, from
/proc/PID/stat) and the completion tokens per server CPU-second, and the machine's 1-minute load
average before and after: on a shared machine the wall-clock tok/s follows the other jobs' load,
the tokens per CPU-second much less (the clients' own CPU is not in it).

Output: a human summary on stderr and one JSON line on stdout.
  python3 scripts/serve_loadtest.py --serve "--kv kv4 --parallel 16" -C 16 -R 20
"""
import argparse
import asyncio
import json
import os
import shlex
import statistics
import sys
import time

import openai

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "server"))

PROMPTS = [
    "Once upon a time, in a small village,",
    "The history of the Roman Empire begins",
    "Here is a recipe for a simple tomato soup:",
    "The three laws of thermodynamics are",
    "def quicksort(arr):",
    "In the year 2050, cities will",
    "A short story about a robot who learns to paint:",
    "The most important thing about learning a language is",
]


def pct(xs, p):
    if not xs:
        return None
    xs = sorted(xs)
    k = min(len(xs) - 1, max(0, int(round(p / 100.0 * (len(xs) - 1)))))
    return xs[k]


async def one(client, model, prompt, args, stats):
    t0 = time.perf_counter()
    ttft, n = None, 0
    max_tokens = args.max_tokens
    if args.reserve:
        max_tokens = args.reserve - 16  # prompts are < 16 tokens
    try:
        stream = await client.completions.create(model=model, prompt=prompt,
                                                 max_tokens=max_tokens, temperature=0,
                                                 stream=True)
        async for ch in stream:
            if ch.choices and ch.choices[0].text:
                if ttft is None:
                    ttft = time.perf_counter() - t0
                n += 1  # one token per chunk (pieces are flushed token by token)
                if args.reserve and n >= args.max_tokens:
                    break
        await stream.close()
        stats["lat"].append(time.perf_counter() - t0)
        if ttft is not None:
            stats["ttft"].append(ttft)
        stats["tokens"] += n
    except Exception as e:  # noqa: BLE001 - every failure is an error to count
        stats["errors"] += 1
        stats["error_samples"].append(repr(e)[:200])


async def client_loop(i, url, key, model, args, stats):
    client = openai.AsyncOpenAI(base_url=url + "/v1", api_key=key or "none", max_retries=0,
                                timeout=args.timeout)
    for r in range(args.requests):
        await one(client, model, PROMPTS[(i + r) % len(PROMPTS)], args, stats)
    await client.close()


async def metrics_poll(url, stop, out):
    import urllib.request
    while not stop.is_set():
        try:
            body = urllib.request.urlopen(url + "/metrics", timeout=5).read().decode()
            for line in body.splitlines():
                if line.startswith("vq_sequences_active "):
                    out["max_active"] = max(out.get("max_active", 0), int(float(line.split()[1])))
                if line.startswith("vq_kv_bytes_in_use "):
                    v = int(float(line.split()[1]))
                    out["max_kv_in_use"] = max(out.get("max_kv_in_use", 0), v)
        except Exception:  # noqa: BLE001
            pass
        try:
            await asyncio.wait_for(stop.wait(), 0.05)
        except asyncio.TimeoutError:
            pass


def cpu_seconds(pid):
    """User + system CPU seconds of process pid so far (all its threads)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def read_metrics(url):
    import urllib.request
    out = {}
    for line in urllib.request.urlopen(url + "/metrics", timeout=10).read().decode().splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
    return out


async def main_async(args, url, model):
    stats = {"lat": [], "ttft": [], "tokens": 0, "errors": 0, "error_samples": []}
    stop = asyncio.Event()
    seen = {}
    poller = asyncio.create_task(metrics_poll(url, stop, seen))
    t0 = time.perf_counter()
    await asyncio.gather(*[client_loop(i, url, args.api_key, model, args, stats)
                           for i in range(args.clients)])
    wall = time.perf_counter() - t0
    stop.set()
    await poller
    return stats, wall, seen


def model_bytes(serve_args):
    """Size of the GGUF that `serve` loads: its -m / --model, else the default model."""
    a = shlex.split(serve_args)
    path = None
    for i, x in enumerate(a):
        if x in ("-m", "--model") and i + 1 < len(a):
            path = a[i + 1]
        elif x.startswith("--model="):
            path = x.split("=", 1)[1]
    if path is None:
        d = os.environ.get("VQ_MODELS") or os.path.expanduser("~/.cache/veloxquant/models")
        path = os.path.join(d, "SmolLM2-135M-Instruct.Q4_1.gguf")
    try:
        return os.path.getsize(path)
    except OSError:
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", help="a running server (default: start one with --serve)")
    ap.add_argument("--serve", default="", help="arguments of the veloxquant serve to start")
    ap.add_argument("-C", "--clients", type=int, default=16)
    ap.add_argument("-R", "--requests", type=int, default=20, help="requests per client")
    ap.add_argument("-n", "--max-tokens", type=int, default=64)
    ap.add_argument("--reserve", type=int, default=0,
                    help="charge each request for a conversation of this many tokens")
    ap.add_argument("--api-key", default=None)
    ap.add_argument("--timeout", type=float, default=600)
    args = ap.parse_args()
    srv = None
    url = args.url
    if not url:
        from serverlib import Server
        srv = Server(*shlex.split(args.serve))
        url = srv.url
    model = json.loads(__import__("urllib.request").request.urlopen(url + "/v1/models").read()
                       )["data"][0]["id"]
    load0 = os.getloadavg()[0]
    cpu0 = cpu_seconds(srv.proc.pid) if srv else None
    try:
        stats, wall, seen = asyncio.run(main_async(args, url, model))
        cpu = cpu_seconds(srv.proc.pid) - cpu0 if srv else None
        load1 = os.getloadavg()[0]
        m = read_metrics(url)
        rss_mb = None
        if srv:
            with open(f"/proc/{srv.proc.pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        rss_mb = int(line.split()[1]) / 1024.0
    finally:
        rc = srv.stop() if srv else 0
    res = {
        "serve": args.serve, "model": model, "clients": args.clients, "requests": args.clients * args.requests,
        "max_tokens": args.max_tokens, "reserve": args.reserve,
        "errors": stats["errors"], "wall_s": round(wall, 3),
        "ttft_p50_s": pct(stats["ttft"], 50), "ttft_p99_s": pct(stats["ttft"], 99),
        "latency_p50_s": pct(stats["lat"], 50), "latency_p99_s": pct(stats["lat"], 99),
        "completion_tokens": stats["tokens"],
        "aggregate_tok_s": round(stats["tokens"] / wall, 2) if wall > 0 else 0,
        "server_decode_tok_s": m.get("vq_decode_tokens_per_second"),
        "rows_per_decode_step": (round(m["vq_decode_rows_total"] / m["vq_decode_steps_total"], 2)
                                 if m.get("vq_decode_steps_total") else None),
        "max_active": int(max(seen.get("max_active", 0), m.get("vq_sequences_active_max", 0))),
        "kv_budget": int(m.get("vq_kv_bytes_budget", 0)),
        "max_kv_in_use": seen.get("max_kv_in_use"),
        "peak_rss_mb": rss_mb, "server_exit": rc,
        # the bound: the server's peak RSS within the KV budget plus the model file
        "model_mb": round(mb / 2**20, 1) if (mb := model_bytes(args.serve)) else None,
        "rss_within_budget_plus_model": (rss_mb * 2**20 <= m.get("vq_kv_bytes_budget", 0) + mb
                                         if rss_mb is not None and mb else None),
        "server_cpu_s": round(cpu, 2) if cpu is not None else None,
        "tok_per_server_cpu_s": round(stats["tokens"] / cpu, 2) if cpu else None,
        "loadavg_1m": [round(load0, 2), round(load1, 2)],
    }
    print(json.dumps(res))
    r = res
    print(f"{r['clients']} clients x {args.requests} requests: errors {r['errors']}, "
          f"TTFT p50 {r['ttft_p50_s']:.3f} s p99 {r['ttft_p99_s']:.3f} s, latency p50 "
          f"{r['latency_p50_s']:.3f} s p99 {r['latency_p99_s']:.3f} s, {r['aggregate_tok_s']} "
          f"tok/s aggregate, {r['max_active']} sequences at once, "
          f"{r['rows_per_decode_step']} rows per decode step", file=sys.stderr)
    if r["rss_within_budget_plus_model"] is not None:
        print(f"peak RSS {r['peak_rss_mb']:.1f} MiB "
              f"{'within' if r['rss_within_budget_plus_model'] else 'ABOVE'} the KV budget "
              f"{r['kv_budget'] / 2**20:.1f} MiB + the model {r['model_mb']} MiB",
              file=sys.stderr)
    if r["server_cpu_s"] is not None:
        print(f"server CPU {r['server_cpu_s']} s: {r['tok_per_server_cpu_s']} tokens per "
              f"CPU-second; load average {r['loadavg_1m'][0]} -> {r['loadavg_1m'][1]}",
              file=sys.stderr)
    if stats["error_samples"]:
        print("errors: " + "; ".join(stats["error_samples"][:5]), file=sys.stderr)
    return 1 if stats["errors"] or rc else 0


if __name__ == "__main__":
    sys.exit(main())
