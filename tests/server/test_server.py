"""test_server.py — `veloxquant serve` through the openai client and raw HTTP on loopback:
chat, completion, streaming, stop sequences, usage counts; greedy output with an fp16 cache
equals `veloxquant generate` (alone and with requests decoding side by side in one batch);
a list of malformed requests each answered with its 4xx and an OpenAI error object while the
server keeps serving; a client leaving mid-stream frees its slot; the bounded queue answers 503
with Retry-After; the KV budget is never exceeded; SIGTERM drains and exits 0; the load-test
script at a small size (0 errors, RSS within the KV budget plus the model)."""
import concurrent.futures as cf
import json
import os
import socket
import subprocess
import threading
import time

import openai
import pytest

from serverlib import CLI, MODEL, MODEL_ID, Server, run_loadtest

KEY = "sekret-key"
CTX = 512
THREADS = "1"


@pytest.fixture(scope="module")
def srv():
    s = Server("--parallel", "4", "-c", str(CTX), "-t", THREADS, "--api-key", KEY, "--max-body",
               "65536", "--kv", "fp16")
    yield s
    assert s.stop() == 0


@pytest.fixture(scope="module")
def client(srv):
    return openai.OpenAI(base_url=srv.url + "/v1", api_key=KEY, max_retries=0, timeout=300)


def generate(prompt, n, chat):
    cmd = [CLI, "generate", "-m", MODEL, "-p", prompt, "-n", str(n), "-c", str(CTX), "-t",
           THREADS, "--json", "--kv", "fp16"] + (["--chat"] if chat else [])
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def test_models(client):
    ids = [m.id for m in client.models.list().data]
    assert ids == [MODEL_ID]


def test_chat_equals_generate(client):
    q = "What is the capital of France?"
    r = client.chat.completions.create(model=MODEL_ID, messages=[{"role": "user", "content": q}],
                                       max_tokens=24, temperature=0)
    g = generate(q, 24, chat=True)
    assert r.choices[0].message.content == g["text"]
    assert r.choices[0].message.role == "assistant"
    assert r.usage.prompt_tokens == g["prompt_tokens"]
    assert r.usage.completion_tokens == g["tokens_generated"]
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    assert r.choices[0].finish_reason == ("length" if g["finish_reason"] == "length" else "stop")


def test_completion_equals_generate(client):
    p = "Once upon a time, in a small village,"
    r = client.completions.create(model=MODEL_ID, prompt=p, max_tokens=20, temperature=0)
    g = generate(p, 20, chat=False)
    assert r.choices[0].text == g["text"]
    assert r.usage.prompt_tokens == g["prompt_tokens"]
    assert r.usage.completion_tokens == 20
    assert r.choices[0].finish_reason == "length"


def test_concurrent_greedy_equals_alone(client):
    """Requests decoding together (one batched step) give what each gives alone."""
    prompts = ["The capital of France is", "def fibonacci(n):", "Water boils at",
               "A list of prime numbers: 2, 3, 5,", "Hello, my name is", "The sky is"]
    alone = [client.completions.create(model=MODEL_ID, prompt=p, max_tokens=16,
                                       temperature=0).choices[0].text for p in prompts]
    with cf.ThreadPoolExecutor(len(prompts)) as ex:
        together = list(ex.map(lambda p: client.completions.create(
            model=MODEL_ID, prompt=p, max_tokens=16, temperature=0).choices[0].text, prompts))
    assert together == alone


def test_streaming(client):
    msgs = [{"role": "user", "content": "Name three colors."}]
    full = client.chat.completions.create(model=MODEL_ID, messages=msgs, max_tokens=20,
                                          temperature=0)
    parts, finish, usage = [], None, None
    for ch in client.chat.completions.create(model=MODEL_ID, messages=msgs, max_tokens=20,
                                             temperature=0, stream=True,
                                             stream_options={"include_usage": True}):
        if ch.choices:
            if ch.choices[0].delta.content:
                parts.append(ch.choices[0].delta.content)
            if ch.choices[0].finish_reason:
                finish = ch.choices[0].finish_reason
        if getattr(ch, "usage", None):
            usage = ch.usage
    assert "".join(parts) == full.choices[0].message.content
    assert finish == full.choices[0].finish_reason
    assert usage.completion_tokens == full.usage.completion_tokens
    # text completions stream too
    text = "".join(c.choices[0].text for c in client.completions.create(
        model=MODEL_ID, prompt="The capital of France is", max_tokens=8, temperature=0,
        stream=True))
    assert text == client.completions.create(model=MODEL_ID, prompt="The capital of France is",
                                             max_tokens=8, temperature=0).choices[0].text


def test_raw_stream_ends_with_done(srv):
    st, h, body = srv.request("POST", "/v1/completions", {
        "prompt": "Hello", "max_tokens": 4, "stream": True, "temperature": 0},
        headers={"Authorization": "Bearer " + KEY})
    assert st == 200 and h["content-type"].startswith("text/event-stream")
    events = [e for e in body.decode().split("\n\n") if e]
    assert events[-1] == "data: [DONE]"
    assert all(e.startswith("data: ") for e in events)


def test_stop_sequences(client):
    p = "The capital of France is"
    base = client.completions.create(model=MODEL_ID, prompt=p, max_tokens=20,
                                     temperature=0).choices[0].text
    assert "." in base
    r = client.completions.create(model=MODEL_ID, prompt=p, max_tokens=20, temperature=0,
                                  stop=".")
    assert r.choices[0].text == base[:base.index(".")]
    assert r.choices[0].finish_reason == "stop"
    r = client.completions.create(model=MODEL_ID, prompt=p, max_tokens=20, temperature=0,
                                  stop=["zzz", "."])
    assert r.choices[0].text == base[:base.index(".")]


def test_usage_and_sampling(client):
    r = client.completions.create(model=MODEL_ID, prompt="Hello", max_tokens=5, temperature=0.8,
                                  top_p=0.9, seed=7, extra_body={"top_k": 40})
    assert r.usage.completion_tokens <= 5
    r2 = client.completions.create(model=MODEL_ID, prompt="Hello", max_tokens=5, temperature=0.8,
                                   top_p=0.9, seed=7, extra_body={"top_k": 40})
    assert r.choices[0].text == r2.choices[0].text  # same seed, same text


AUTH = {"Authorization": "Bearer " + KEY}
LONG = "word " * 2000  # > CTX tokens
CHAT = "/v1/chat/completions"
CMPL = "/v1/completions"
MSG = [{"role": "user", "content": "hi"}]

# (method, path, body, headers, status, param or None)
MALFORMED = [
    ("POST", CHAT, b"", AUTH, 400, None),
    ("POST", CHAT, b"{", AUTH, 400, None),
    ("POST", CHAT, b"not json", AUTH, 400, None),
    ("POST", CHAT, b"[]", AUTH, 400, None),
    ("POST", CHAT, b"\"a string\"", AUTH, 400, None),
    ("POST", CHAT, b"42", AUTH, 400, None),
    ("POST", CHAT, b"null", AUTH, 400, None),
    ("POST", CHAT, b'{"messages": []} trailing', AUTH, 400, None),
    ("POST", CHAT, b'{"messages": [{"role": "user", "content": "\xff\xfe"}]}', AUTH, 400, None),
    ("POST", CHAT, b'{"messages": [{"role": "user", "content": "\xc0\xaf"}]}', AUTH, 400, None),
    ("POST", CHAT, b'{"messages": [{"role": "user", "content": "\xed\xa0\x80"}]}', AUTH, 400,
     None),
    ("POST", CHAT, {}, AUTH, 400, "messages"),
    ("POST", CHAT, {"messages": "hi"}, AUTH, 400, "messages"),
    ("POST", CHAT, {"messages": []}, AUTH, 400, "messages"),
    ("POST", CHAT, {"messages": [1]}, AUTH, 400, "messages"),
    ("POST", CHAT, {"messages": [{"content": "hi"}]}, AUTH, 400, "messages"),
    ("POST", CHAT, {"messages": [{"role": 3, "content": "hi"}]}, AUTH, 400, "messages"),
    ("POST", CHAT, {"messages": [{"role": "wizard", "content": "hi"}]}, AUTH, 400, "messages"),
    ("POST", CHAT, {"messages": [{"role": "user"}]}, AUTH, 400, "messages"),
    ("POST", CHAT, {"messages": [{"role": "user", "content": 5}]}, AUTH, 400, "messages"),
    ("POST", CHAT, {"messages": [{"role": "user", "content": [{"type": "image"}]}]}, AUTH, 400,
     "messages"),
    ("POST", CHAT, {"messages": [{"role": "user", "content": LONG}]}, AUTH, 400, "messages"),
    ("POST", CHAT, {"messages": MSG, "max_tokens": 0}, AUTH, 400, "max_tokens"),
    ("POST", CHAT, {"messages": MSG, "max_tokens": -5}, AUTH, 400, "max_tokens"),
    ("POST", CHAT, {"messages": MSG, "max_tokens": 1.5}, AUTH, 400, "max_tokens"),
    ("POST", CHAT, {"messages": MSG, "max_tokens": "10"}, AUTH, 400, "max_tokens"),
    ("POST", CHAT, {"messages": MSG, "max_tokens": 100000}, AUTH, 400, "max_tokens"),
    ("POST", CHAT, {"messages": MSG, "temperature": -1}, AUTH, 400, "temperature"),
    ("POST", CHAT, {"messages": MSG, "temperature": 3}, AUTH, 400, "temperature"),
    ("POST", CHAT, {"messages": MSG, "temperature": "hot"}, AUTH, 400, "temperature"),
    ("POST", CHAT, {"messages": MSG, "top_p": 0}, AUTH, 400, "top_p"),
    ("POST", CHAT, {"messages": MSG, "top_p": 1.5}, AUTH, 400, "top_p"),
    ("POST", CHAT, {"messages": MSG, "top_p": [1]}, AUTH, 400, "top_p"),
    ("POST", CHAT, {"messages": MSG, "top_k": -1}, AUTH, 400, "top_k"),
    ("POST", CHAT, {"messages": MSG, "top_k": 2.5}, AUTH, 400, "top_k"),
    ("POST", CHAT, {"messages": MSG, "seed": "x"}, AUTH, 400, "seed"),
    ("POST", CHAT, {"messages": MSG, "seed": 1.25}, AUTH, 400, "seed"),
    ("POST", CHAT, {"messages": MSG, "stop": 5}, AUTH, 400, "stop"),
    ("POST", CHAT, {"messages": MSG, "stop": ["a", 1]}, AUTH, 400, "stop"),
    ("POST", CHAT, {"messages": MSG, "stop": ["a", "b", "c", "d", "e"]}, AUTH, 400, "stop"),
    ("POST", CHAT, {"messages": MSG, "stream": "yes"}, AUTH, 400, "stream"),
    ("POST", CHAT, {"messages": MSG, "n": 2}, AUTH, 400, "n"),
    ("POST", CHAT, {"messages": MSG, "n": 0}, AUTH, 400, "n"),
    ("POST", CHAT, {"messages": MSG, "stream_options": 3}, AUTH, 400, "stream_options"),
    ("POST", CHAT, {"messages": MSG, "model": 7}, AUTH, 400, "model"),
    ("POST", CHAT, {"messages": MSG, "model": "gpt-4"}, AUTH, 404, "model"),
    ("POST", CMPL, {}, AUTH, 400, "prompt"),
    ("POST", CMPL, {"prompt": 5}, AUTH, 400, "prompt"),
    ("POST", CMPL, {"prompt": ""}, AUTH, 400, "prompt"),
    ("POST", CMPL, {"prompt": ["a", "b"]}, AUTH, 400, "prompt"),
    ("POST", CMPL, {"prompt": {"text": "a"}}, AUTH, 400, "prompt"),
    ("POST", CMPL, {"prompt": LONG}, AUTH, 400, "messages"),
    ("POST", CMPL, {"prompt": "hi", "max_tokens": 0}, AUTH, 400, "max_tokens"),
    ("POST", CMPL, {"prompt": "hi", "max_tokens": None, "n": 3}, AUTH, 400, "n"),
    ("POST", CMPL, b'{"prompt": "\\ud800"}', AUTH, 400, None),  # a lone surrogate
    ("POST", CMPL, {"prompt": "hi"}, {}, 401, None),
    ("POST", CMPL, {"prompt": "hi"}, {"Authorization": "Bearer wrong"}, 401, None),
    ("POST", CMPL, {"prompt": "hi"}, {"Authorization": KEY}, 401, None),
    ("GET", "/v1/models", None, {}, 401, None),
    ("GET", CHAT, None, AUTH, 405, None),
    ("PUT", CMPL, b"{}", AUTH, 405, None),
    ("POST", "/health", b"{}", AUTH, 405, None),
    ("POST", "/v1/models", b"{}", AUTH, 405, None),
    ("GET", "/v1/nothing", None, AUTH, 404, None),
    ("GET", "/", None, AUTH, 404, None),
    ("POST", CMPL, b'{"prompt": "' + b"a" * 70000 + b'"}', AUTH, 413, None),
]


def test_malformed_requests(srv):
    assert len(MALFORMED) >= 50
    bad = []
    for i, (method, path, body, headers, want, param) in enumerate(MALFORMED):
        st, h, data = srv.request(method, path, body, headers)
        ok = st == want
        if ok:
            e = json.loads(data)["error"]
            ok = isinstance(e["message"], str) and e["message"] and isinstance(e["type"], str)
            ok = ok and "param" in e and "code" in e and (param is None or e["param"] == param)
        if not ok:
            bad.append((i, method, path, want, st, data[:200]))
    assert not bad, bad
    st, _, data = srv.request("GET", "/health")
    assert st == 200 and json.loads(data)["status"] == "ok"
    st, _, _ = srv.request("POST", CMPL, {"prompt": "hi", "max_tokens": 2}, AUTH)
    assert st == 200


def test_disconnect_frees_slot(srv):
    body = json.dumps({"prompt": "Once upon a time,", "max_tokens": 400, "stream": True,
                       "temperature": 0}).encode()
    before = srv.metrics()["vq_completion_tokens_total"]
    s = socket.create_connection(("127.0.0.1", srv.port))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Authorization: Bearer " + KEY.encode() + b"\r\nContent-Length: " +
              str(len(body)).encode() + b"\r\n\r\n" + body)
    got = b""
    while got.count(b"data: ") < 3:
        more = s.recv(4096)
        assert more, got
        got += more
    s.close()
    deadline = time.time() + 30
    while time.time() < deadline and srv.metrics()["vq_sequences_active"] > 0:
        time.sleep(0.05)
    m = srv.metrics()
    assert m["vq_sequences_active"] == 0
    # cut short: the slot was freed when the next piece could not be sent, not at 400 tokens
    assert 0 < m["vq_completion_tokens_total"] - before < 400


def test_load_script():
    """scripts/serve_loadtest.py, the benchmark's load test, kept small: 8 clients x 2 streamed
    requests on the benchmark's kv4 server (16 slots of 2048 tokens, the default budget); 0
    errors, the percentiles reported, and the server's peak RSS within the KV budget plus the
    model (not under a sanitizer, whose shadow memory counts)."""
    run_loadtest(MODEL, THREADS, 8, 2, 16, timeout=600)


def test_metrics(srv):
    m = srv.metrics()
    for k in ("vq_requests_total", "vq_prompt_tokens_total", "vq_completion_tokens_total",
              "vq_prefill_tokens_per_second", "vq_decode_tokens_per_second",
              "vq_sequences_active", "vq_sequences_queued", "vq_kv_bytes_in_use",
              "vq_kv_bytes_budget"):
        assert k in m, k
    assert m["vq_kv_bytes_in_use"] <= m["vq_kv_bytes_budget"]


def test_queue_budget_and_sigterm():
    """One slot, a queue of one: the third concurrent request gets 503 with Retry-After; a
    request over the whole budget gets 400; SIGTERM lets the running request finish, exit 0."""
    s = Server("--parallel", "2", "--queue", "1", "-c", "256", "-t", THREADS, "--kv-budget",
               "3M")
    try:
        st, _, data = s.request("POST", CMPL, {"prompt": "hi", "max_tokens": 250})
        assert st == 400 and json.loads(data)["error"]["code"] == "kv_budget_exceeded"
        results = {}

        def run(k):
            results[k] = s.request("POST", CMPL, {"prompt": "Once upon a time,",
                                                  "max_tokens": 120, "temperature": 0})

        ths = [threading.Thread(target=run, args=(k,)) for k in range(4)]
        for t in ths:
            t.start()
            time.sleep(0.3)
        m = s.metrics()
        assert m["vq_kv_bytes_in_use"] <= m["vq_kv_bytes_budget"]
        os.kill(s.proc.pid, 15)  # SIGTERM with requests in flight
        for t in ths:
            t.join(120)
        codes = sorted(r[0] for r in results.values())
        assert 200 in codes and 503 in codes, codes
        for st, h, data in results.values():
            if st == 503:
                assert h.get("retry-after") == "1"
                assert json.loads(data)["error"]["type"] == "server_overloaded"
            else:
                assert st == 200 and json.loads(data)["usage"]["completion_tokens"] > 0
    finally:
        assert s.stop() == 0
