"""serverlib.py — starts `veloxquant serve` on a free loopback port for the server tests and the
load test, and raw HTTP helpers (http.client) for requests the openai client cannot send."""
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLI = os.environ.get("VQ_CLI", os.path.join(ROOT, "build", "veloxquant"))
MODELS = os.environ.get("VQ_MODELS", os.path.expanduser("~/.cache/veloxquant/models"))
MODEL = os.path.join(MODELS, "SmolLM2-135M-Instruct.Q4_1.gguf")
MODEL_ID = "SmolLM2-135M-Instruct.Q4_1"


class Server:
    """A running `veloxquant serve -m MODEL --port 0 ARGS` (model: the default model unless
    given); .port, .url, .stop() (SIGTERM, exit code)."""

    def __init__(self, *args, timeout=120, model=MODEL):
        self.log = []
        cmd = [CLI, "serve", "-m", model, "--port", "0", *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True)
        deadline = time.time() + timeout
        self.port = None
        while time.time() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.log.append(line)
            m = re.search(r"listening on http://[0-9.]+:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                break
        if self.port is None:
            self.proc.kill()
            raise RuntimeError("serve did not start: " + "".join(self.log))
        self.url = f"http://127.0.0.1:{self.port}"

    def request(self, method, path, body=None, headers=None, timeout=120):
        """(status, headers dict, body bytes); body may be bytes, str or a JSON-able object."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body)
        if isinstance(body, str):
            body = body.encode()
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data

    def metrics(self):
        st, _, body = self.request("GET", "/metrics")
        assert st == 200
        out = {}
        for line in body.decode().splitlines():
            if line and not line.startswith("#"):
                k, v = line.rsplit(" ", 1)
                out[k] = float(v)
        return out

    def stop(self, timeout=60):
        """SIGTERM; returns the exit code (1 when the server's stderr holds a sanitizer
        report: UBSan prints without failing the exit code)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rest, _ = self.proc.communicate(timeout=timeout)
            rc = self.proc.returncode
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rest, _ = self.proc.communicate()
            rc = self.proc.returncode
        self.log.append(rest or "")
        text = "".join(self.log)
        if "runtime error:" in text or "Sanitizer" in text:
            print(text[-4000:])
            return rc or 1
        return rc


def run_loadtest(model, threads, clients, requests, n, timeout=900):
    """scripts/serve_loadtest.py on the benchmark's server (kv4, 16 slots of 2048 tokens, the
    default budget) for model: 0 errors, tokens, the percentiles, two or more sequences at
    once, and (not under a sanitizer, whose shadow memory counts) the server's peak RSS within
    the KV budget plus the model; the bound holds when the budget's unused part covers the
    fixed buffers (docs/SERVE.md, "Memory"). Returns the script's JSON result."""
    script = os.path.join(ROOT, "scripts", "serve_loadtest.py")
    serve = "-m %s --kv kv4 --parallel 16 -c 2048 -t %s" % (model, threads)
    r = subprocess.run([sys.executable, script, "--serve", serve, "-C", str(clients), "-R",
                        str(requests), "-n", str(n)], capture_output=True, text=True,
                       timeout=timeout)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout.splitlines()[0])
    assert res["errors"] == 0 and res["completion_tokens"] > 0, res
    for k in ("ttft_p50_s", "ttft_p99_s", "latency_p50_s", "latency_p99_s", "aggregate_tok_s"):
        assert res[k] > 0, (k, res)
    assert res["max_active"] >= 2, res
    if not any(v in os.environ for v in ("ASAN_OPTIONS", "TSAN_OPTIONS")):
        assert res["rss_within_budget_plus_model"] is True, res
    return res
