"""Model on the default model: greedy fp16 generation equals `veloxquant generate`, streaming
equals the whole text, chat turns reuse the cache, perplexity with kv4 stays near fp16's, and
errors are the documented exceptions."""
import json
import os
import subprocess

import numpy as np
import pytest

import veloxquant as vq

PROMPT = "The three primary colors are"


@pytest.fixture(scope="module")
def fp16(model_path):
    with vq.Model(model_path, kv="fp16", n_ctx=512, threads=1) as m:
        yield m


def test_generate_equals_cli(fp16, cli, model_path):
    out = subprocess.check_output([cli, "generate", "-m", model_path, "-p", PROMPT, "-n", "24",
                                   "--kv", "fp16", "-t", "1", "-c", "512", "--json"])
    want = json.loads(out)["text"]
    fp16.reset()
    got = fp16.generate(PROMPT, max_tokens=24)
    assert got == want
    assert got.generated <= 24 and got.finish_reason in ("stop", "length")
    assert got.evaluated == got.prompt_tokens == len(fp16.tokenize(PROMPT))


def test_stream_equals_text(fp16):
    fp16.reset()
    whole = fp16.generate(PROMPT, max_tokens=20)
    fp16.reset()
    it = fp16.generate(PROMPT, max_tokens=20, stream=True)
    pieces = list(it)
    assert "".join(pieces) == str(whole) and len(pieces) > 1
    assert it.result == whole
    # a stop string is never streamed nor returned
    stop = str(whole)[len(str(whole)) // 2:][:4]
    if stop.strip():
        fp16.reset()
        cut = fp16.generate(PROMPT, max_tokens=20, stop=[stop])
        assert stop not in cut and cut.finish_reason == "stop"


def test_tokenize_round_trip(fp16):
    text = "Grüße, 世界! naïve café"
    ids = fp16.tokenize(text)
    assert fp16.detokenize(ids) == text


def test_chat_reuses_cache(model_path):
    with vq.Model(model_path, kv="kv4", n_ctx=1024, threads=1) as m:
        msgs = [{"role": "user", "content": "Name a fruit."}]
        a = m.chat(msgs, max_tokens=16)
        msgs += [{"role": "assistant", "content": str(a)},
                 {"role": "user", "content": "And a vegetable?"}]
        b = m.chat(msgs, max_tokens=16)
        assert b.cached > 0 and b.evaluated < b.prompt_tokens
        assert b.cached + b.evaluated == b.prompt_tokens
        mem = m.kv_memory()
        assert 0 < mem["total_bytes"] < mem["fp16_bytes"]


def test_perplexity_kv4_near_fp16(model_path):
    corpus = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "golden", "text_en.txt")
    text = open(corpus, encoding="utf-8").read()
    res = {}
    for kv in ("fp16", "kv4"):
        with vq.Model(model_path, kv=kv, n_ctx=256, threads=2) as m:
            res[kv] = m.perplexity(text, ctx=256)
    assert res["fp16"]["n"] == res["kv4"]["n"] > 100
    assert 1 < res["fp16"]["ppl"] < 100
    assert abs(res["kv4"]["ppl"] / res["fp16"]["ppl"] - 1) < 0.05, res


def test_read_kv(model_path):
    with vq.Model(model_path, kv="fp32", n_ctx=128, threads=1) as m:
        m.generate("Hello there, how are", max_tokens=1)
        k, v = m.read_kv(3)
        i = m.info
        assert k.shape == (m.n_past, i["n_kv_heads"], i["head_dim"]) and np.isfinite(k).all()


def test_model_errors(model_path, tmp_path):
    with pytest.raises(vq.FileError):
        vq.Model(str(tmp_path / "missing.gguf"))
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 60)
    with pytest.raises(vq.Error):
        vq.Model(str(bad))
    with pytest.raises(vq.InvalidArgumentError, match="did you mean kv4"):
        vq.Model(model_path, kv="kv44")


def test_example_compare_codecs(model_path):
    ex = os.path.join(os.path.dirname(__file__), "..", "examples", "compare_codecs.py")
    out = subprocess.check_output([__import__("sys").executable, ex, model_path], text=True)
    rows = [ln for ln in out.splitlines() if ln.startswith(("turboquant", "kivi"))]
    assert len(rows) == 3, out
    cos = [float(r.split()[2]) for r in rows]
    assert all(0.5 < c <= 1.0 for c in cos) and cos[0] > cos[2], out
