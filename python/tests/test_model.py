"""Model on the default model: greedy fp16 generation equals `veloxquant generate`, streaming
equals the whole text, chat turns reuse the cache, perplexity equals `veloxquant perplexity`'s
(one library call behind both) and kv4's stays near fp16's, and errors are the documented
exceptions."""
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


CORPUS = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "golden", "text_en.txt")


def _cli_ppl(cli, model_path, kv, ctx, chunks, threads):
    out = subprocess.check_output([cli, "perplexity", "-m", model_path, "-f", CORPUS, "-c",
                                   str(ctx), "--chunks", str(chunks), "--kv", kv, "-t",
                                   str(threads), "--json"], stderr=subprocess.DEVNULL)
    return json.loads(out)


def test_perplexity_equals_cli(model_path, cli):
    """Model.perplexity and `veloxquant perplexity` both run the library's vq_perplexity: the
    same text, ctx, chunks, kv and threads give the same perplexity (cJSON prints the double to
    15 or 17 significant digits, always within one ulp, hence the 1e-14 relative bound)."""
    text = open(CORPUS, encoding="utf-8").read()
    res = {}
    for kv in ("fp16", "kv4"):
        with vq.Model(model_path, kv=kv, n_ctx=64, threads=2) as m:
            got = res[kv] = m.perplexity(text, ctx=128, chunks=2)
        want = _cli_ppl(cli, model_path, kv, 128, 2, 2)
        assert got["n"] == want["tokens_scored"] == 2 * 63 and got["chunks"] == want["chunks"]
        assert got["ppl"] == pytest.approx(want["ppl"], rel=1e-14, abs=0), (kv, got, want)
        assert got["nll"] == pytest.approx(want["nll_mean"], rel=1e-14, abs=0)
        assert got["ppl_stderr"] == pytest.approx(want["ppl_stderr"], rel=1e-12)
        assert got["kv_bytes"] == want["kv_bytes"]
    assert 1 < res["fp16"]["ppl"] < 100
    assert abs(res["kv4"]["ppl"] / res["fp16"]["ppl"] - 1) < 0.1, res
    assert res["kv4"]["kv_bytes"] < res["fp16"]["kv_bytes"] == res["fp16"]["fp16_bytes"]


def test_perplexity_errors(fp16):
    with pytest.raises(vq.InvalidArgumentError, match="fewer than one chunk"):
        fp16.perplexity("Too short.", ctx=128)
    with pytest.raises(vq.InvalidArgumentError, match="even"):
        fp16.perplexity(list(range(300)), ctx=127)


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
