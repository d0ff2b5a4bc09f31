"""test_server_large.py — `veloxquant serve` on Qwen2.5-Coder 1.5B Instruct Q4_K_M (CTest
server_large, label "large": `make test-large`, which fetches the model): greedy chat with an
fp16 cache equals `veloxquant generate --chat` (Qwen's chat template, its tokenizer, the
repacked K-quant kernels); requests decoding side by side in one batched step with a kv4 cache
give what each gives alone; the load-test script at a small size: 0 errors, the server's peak
RSS within the KV budget plus the model."""
import concurrent.futures as cf
import json
import os
import subprocess

import openai
import pytest

from serverlib import CLI, MODELS, Server, run_loadtest

QWEN = os.path.join(MODELS, "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
QWEN_ID = "qwen2.5-coder-1.5b-instruct-q4_k_m"
CTX = 512
THREADS = "2"


@pytest.fixture(scope="module", autouse=True)
def have_model():
    assert os.path.exists(QWEN), ("%s missing: scripts/fetch_models.sh qwen2.5-1.5b (make "
                                  "test-large fetches it)" % QWEN)


def client_of(srv):
    return openai.OpenAI(base_url=srv.url + "/v1", api_key="none", max_retries=0, timeout=600)


def test_chat_equals_generate_fp16():
    q = "Write a Python function that returns the sum of a list."
    srv = Server("--parallel", "2", "-c", str(CTX), "-t", THREADS, "--kv", "fp16", model=QWEN)
    try:
        c = client_of(srv)
        assert [m.id for m in c.models.list().data] == [QWEN_ID]
        r = c.chat.completions.create(model=QWEN_ID, messages=[{"role": "user", "content": q}],
                                      max_tokens=24, temperature=0)
    finally:
        assert srv.stop() == 0
    cmd = [CLI, "generate", "-m", QWEN, "-p", q, "-n", "24", "-c", str(CTX), "-t", THREADS,
           "--json", "--kv", "fp16", "--chat"]
    g = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    assert r.choices[0].message.content == g["text"]
    assert r.usage.prompt_tokens == g["prompt_tokens"]
    assert r.usage.completion_tokens == g["tokens_generated"]


def test_batched_equals_alone_kv4():
    """Three completions decoding in one batched step (16-row groups of repacked Q4_K / Q6_K
    rows against three tokens) give what each gives alone. Each side on a fresh server: a slot
    that kept a compressed cache would give the next request with the same prompt its prefix
    (docs/SERVE.md, "Slots"), whose codes need not equal a fresh prefill's (a KIVI window's
    tokens quantized while the previous answer was generated stay quantized)."""
    prompts = ["def fibonacci(n):", "The capital of France is", "import numpy as np\n"]

    def run(together):
        srv = Server("--parallel", "3", "-c", str(CTX), "-t", THREADS, "--kv", "kv4",
                     model=QWEN)
        try:
            c = client_of(srv)

            def one(p):
                return c.completions.create(model=QWEN_ID, prompt=p, max_tokens=16,
                                            temperature=0).choices[0].text

            if together:
                with cf.ThreadPoolExecutor(len(prompts)) as ex:
                    out = list(ex.map(one, prompts))
            else:
                out = [one(p) for p in prompts]
            return out, srv.metrics()
        finally:
            assert srv.stop() == 0

    alone, _ = run(False)
    together, m = run(True)
    assert together == alone
    assert m["vq_decode_rows_total"] > m["vq_decode_steps_total"]  # some steps had 2+ rows


def test_load_script_small():
    run_loadtest(QWEN, THREADS, 4, 1, 16)
