#!/usr/bin/env python3
"""Generate llama.cpp reference ("golden") data for the golden-tested models.

Produces, in tests/golden/ (see tests/golden/README.md for the formats), per model
(--name smollm2, the default model, gemma3 for Gemma 3 270M, or qwen2.5 for Qwen2.5-Coder 1.5B
Instruct):
  text_en.txt          fixed English prose (Python 3.11 tutorial, rst markup stripped)
  <name>_logits.bin    per-position top-32 log-probs of the text, one context
  tokenizer_ids.json   llama.cpp token ids + detokenized text for fixed prompts
                       (<name>_tokenizer_ids.json for gemma3 and qwen2.5: gemma3_, qwen25_)
  greedy.json          greedy (argmax) continuations of 3 fixed prompts (gemma3_greedy.json,
                       qwen25_greedy.json)
  SHA256SUMS           sha256 manifest of the files above (+ smollm2_logits_ref64.bin,
                       written by ref_forward.py)

Requires llama-cpp-python (version pinned in tests/golden/README.md) and numpy.
NOT run by CI: its outputs are committed. Rerun:
  python3 scripts/golden/gen_golden.py [--name smollm2|gemma3|qwen2.5] [--model PATH] [--out tests/golden]
                                       [--regen-text]

Without --regen-text the committed text_en.txt is reused (the rst sources may differ
between distributions); with it the text is rebuilt from the python3.11-doc sources.
"""
import argparse
import ctypes
import hashlib
import json
import math
import os
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import check_golden  # noqa: E402
import text_extract  # noqa: E402

import llama_cpp  # noqa: E402
from llama_cpp import Llama  # noqa: E402

MODELS_DIR = os.environ.get("VQ_MODELS", os.path.expanduser("~/.cache/veloxquant/models"))
RST_DIR = "/usr/share/doc/python3.11/html/_sources/tutorial"
# (file, number of leading paragraphs to keep; None = all)
TEXT_SOURCES = [("appetite.rst.txt", None), ("classes.rst.txt", 5)]

TOP_K = 32
LOGITS_MAGIC = b"VQGLOGIT"
LOGITS_VERSION = 1
GREEDY_N = 64
SEED = 1234

SYSTEM_DEFAULT = ("You are a helpful AI assistant named SmolLM, trained by Hugging Face")
SYSTEM_DEFAULT_QWEN = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."


def chatml(messages, add_generation_prompt=True, system_default=SYSTEM_DEFAULT):
    """Render the model's ChatML template (tokenizer.chat_template of SmolLM2) as text.

    Same output as the GGUF's Jinja template: a default system message is inserted when
    the first message is not a system message."""
    out = []
    for i, m in enumerate(messages):
        if i == 0 and messages[0]["role"] != "system":
            out.append("<|im_start|>system\n" + system_default + "<|im_end|>\n")
        out.append("<|im_start|>" + m["role"] + "\n" + m["content"] + "<|im_end|>\n")
    if add_generation_prompt:
        out.append("<|im_start|>assistant\n")
    return "".join(out)


def qwen_chat(messages, add_generation_prompt=True):
    """Qwen2.5's template without tools: ChatML with Qwen's default system message."""
    return chatml(messages, add_generation_prompt, SYSTEM_DEFAULT_QWEN)


def check_chat_template(llm, chat=chatml):
    """Cross-check chat() against the GGUF Jinja template rendered by jinja2."""
    tmpl = llm.metadata.get("tokenizer.chat_template")
    if tmpl is None:
        return "no template in GGUF"
    try:
        import jinja2
    except ImportError:
        return "jinja2 missing: not cross-checked"
    msgs = [{"role": "user", "content": "What is the capital of France?"}]
    j = jinja2.Environment().from_string(tmpl).render(messages=msgs, add_generation_prompt=True)
    if j != chat(msgs):
        raise SystemExit("%s() differs from the GGUF template:\n%r\n%r" % (
            chat.__name__, j, chat(msgs)))
    return "matches GGUF tokenizer.chat_template (jinja2)"


def gemma_chat(messages, add_generation_prompt=True):
    """Gemma's chat format (llama.cpp's built-in LLM_CHAT_TEMPLATE_GEMMA; the 270M GGUF carries
    no tokenizer.chat_template): system text merged into the next user turn, "assistant" is
    "model", contents trimmed. BOS comes from the tokenizer (add_bos_token = true)."""
    out, system = [], ""
    for m in messages:
        if m["role"] == "system":
            system += m["content"].strip()
            continue
        role = "model" if m["role"] == "assistant" else m["role"]
        out.append("<start_of_turn>" + role + "\n")
        if system and role != "model":
            out.append(system + "\n\n")
            system = ""
        out.append(m["content"].strip() + "<end_of_turn>\n")
    if add_generation_prompt:
        out.append("<start_of_turn>model\n")
    return "".join(out)


# Per model: file, output names, chat format, logits context. Gemma 3's sliding window is 512
# tokens: its logits run covers more positions (n_eval 1280) so that the window matters, with
# swa_full = True (a full, position-ordered cache for the windowed layers, as the engine keeps;
# llama.cpp's default SWA cache is a ring buffer of n_swa + n_ubatch cells whose reordering
# changes the summation order).
MODELS = {
    "smollm2": dict(file="SmolLM2-135M-Instruct.Q4_1.gguf", logits="smollm2_logits.bin",
                    tokenizer="tokenizer_ids.json", greedy="greedy.json", chat=chatml,
                    n_ctx=1024, n_eval=1024, swa_full=None),
    "gemma3": dict(file="gemma-3-270m-q4_k_m.gguf", logits="gemma3_logits.bin",
                   tokenizer="gemma3_tokenizer_ids.json", greedy="gemma3_greedy.json",
                   chat=gemma_chat, n_ctx=1280, n_eval=1280, swa_full=True),
    # Qwen2.5-Coder 1.5B Instruct Q4_K_M (scripts/fetch_models.sh qwen2.5-1.5b): 1280 positions
    # as for Gemma 3 (three ubatches: 512, 512, 256).
    "qwen2.5": dict(file="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", logits="qwen25_logits.bin",
                    tokenizer="qwen25_tokenizer_ids.json", greedy="qwen25_greedy.json",
                    chat=qwen_chat, n_ctx=1280, n_eval=1280, swa_full=None),
}


PROMPTS = [
    ("english", "Hello world"),
    ("english_sentence", "The quick brown fox jumps over the lazy dog."),
    ("leading_space", " leading space and trailing space "),
    ("contractions", "I'm sure you'll see they've done what we'd've done. DON'T SHOUT, it's OK."),
    ("punctuation", "Wait... what?! (Really) -- yes; no: maybe, \"quoted\" 'single' [brackets] "
                    "{braces} <angle> @#$%^&*_+=|\\/~` end."),
    ("digits", "In 2024, pi=3.14159 and 1234567890 plus 42nd, 007, 1e-5, 100,000.50 and 12345678901234567890."),
    ("multiple_spaces", "a  b   c    d     e          end   "),
    ("tabs_newlines", "line one\n\tindented\n\n\nthree newlines\r\nwindows\t\ttabs\n \n  x\n"),
    ("code", "def square(x):\n    return x ** 2  # comment\n\nprint(square(12))\n"),
    ("accents", "Café naïve résumé Ångström façade Zürich São Paulo crème brûlée Œuvre ß Ł"),
    ("accents_nfd", "Cafe\u0301 nai\u0308ve"),
    ("cjk", "你好，世界！日本語のテキストです。한국어 문장입니다."),
    ("emoji", "I love 🦙 and 🐍! 👍🏽 family: 👨‍👩‍👧 flags 🇫🇷 ✨"),
    ("mixed_scripts", "Привет мир, γειά σου κόσμε, مرحبا بالعالم, שלום עולם, नमस्ते"),
    ("special_tokens", "<|im_start|>user\nHi there<|im_end|>\n"),
    ("special_endoftext", "text<|endoftext|>more text"),
    ("special_partial", "<|im_start is not special, <|im_end|> is"),
    ("chat_template", [{"role": "user", "content": "What is the capital of France?"}]),
    ("chat_template_system", ([
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "List three colors."},
        {"role": "assistant", "content": "Red, green, blue."},
        {"role": "user", "content": "Two more?"}])),
    ("empty", ""),
    ("single_space", " "),
    ("newline_only", "\n"),
]

GREEDY_PROMPTS = [
    ("story", "Once upon a time, in a small village by the sea,"),
    ("python", "Python is a programming language that"),
    ("chat", [{"role": "user", "content": "Explain in two sentences why the sky is blue."}]),
]


def tokenize(llm, text):
    """llama.cpp tokenization: add_special=True (BOS/EOS only if the GGUF asks for them),
    parse_special=True."""
    return llm.tokenize(text.encode("utf-8"), add_bos=True, special=True)


def detokenize(llm, ids):
    """llama_detokenize(remove_special=False, unparse_special=True) -> bytes."""
    vocab = llm._model.vocab
    arr = (llama_cpp.llama_token * max(1, len(ids)))(*ids)
    cap = 64 + 16 * len(ids)
    buf = ctypes.create_string_buffer(cap)
    n = llama_cpp.llama_detokenize(vocab, arr, len(ids), buf, cap, False, True)
    if n < 0:
        raise RuntimeError("detokenize buffer too small")
    return buf.raw[:n]


def piece(llm, tid):
    buf = ctypes.create_string_buffer(256)
    n = llama_cpp.llama_token_to_piece(llm._model.vocab, tid, buf, 256, 0, True)
    if n < 0:
        raise RuntimeError("piece too long")
    return buf.raw[:n]


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def build_text():
    paras = []
    for name, n in TEXT_SOURCES:
        with open(os.path.join(RST_DIR, name), encoding="utf-8") as f:
            p = text_extract.rst_to_paragraphs(f.read())
        paras.extend(p if n is None else p[:n])
    return "\n\n".join(paras) + "\n"


def make_llm(model, n_ctx, logits_all, swa_full=None):
    kw = {} if swa_full is None else {"swa_full": swa_full}
    return Llama(model_path=model, n_ctx=n_ctx, n_batch=512, n_ubatch=512,
                 n_threads=2, n_threads_batch=2, logits_all=logits_all,
                 flash_attn=False, seed=SEED, verbose=False, **kw)


def logsumexp(x):
    m = float(np.max(x))
    return m + math.log(float(np.sum(np.exp(x - m))))


def write_logits(llm, text_ids, path, n_ctx, n_eval_max):
    n_eval = min(len(text_ids), n_eval_max)
    llm.reset()
    llm.eval(text_ids[:n_eval])
    scores = np.asarray(llm.scores[:n_eval], dtype=np.float64)
    n_vocab = scores.shape[1]
    recs = []
    stats = {"min_log_rest": 0.0, "max_log_rest": -1e9}
    for i in range(n_eval):
        row = scores[i]
        lse = logsumexp(row)
        lp = row - lse
        # top-k: by descending log-prob, ties by ascending id (stable sort on -lp)
        order = np.argsort(-lp, kind="stable")[:TOP_K]
        top_lp = lp[order]
        rest = np.delete(lp, order)
        log_rest = logsumexp(rest)  # log of remaining probability mass, in float64
        stats["min_log_rest"] = min(stats["min_log_rest"], log_rest)
        stats["max_log_rest"] = max(stats["max_log_rest"], log_rest)
        recs.append(struct.pack("<I", text_ids[i]))
        recs.append(struct.pack("<%dI" % TOP_K, *[int(t) for t in order]))
        recs.append(struct.pack("<%df" % TOP_K, *[float(v) for v in top_lp]))
        recs.append(struct.pack("<f", float(log_rest)))
    flags = 0
    if llm._model.add_bos_token():
        flags |= 1
    hdr = LOGITS_MAGIC + struct.pack("<8I", LOGITS_VERSION, n_vocab, len(text_ids), n_eval,
                                     TOP_K, n_ctx, flags, 0)
    with open(path, "wb") as f:
        f.write(hdr)
        f.write(struct.pack("<%dI" % len(text_ids), *text_ids))
        for r in recs:
            f.write(r)
    # next-token NLL over the evaluated positions (position i predicts text_ids[i+1])
    nll = [-(scores[i][text_ids[i + 1]] - logsumexp(scores[i])) for i in range(n_eval - 1)]
    stats["ppl"] = math.exp(sum(nll) / len(nll))
    stats["n_eval"] = n_eval
    return stats


def greedy(llm, prompt):
    ids = tokenize(llm, prompt)
    llm.reset()
    llm.eval(ids)
    out, margins = [], []
    eos_hit = False
    for _ in range(GREEDY_N):
        logits = np.asarray(llm.scores[llm.n_tokens - 1], dtype=np.float32)
        t = int(np.argmax(logits))
        top2 = np.partition(logits, -2)[-2:]
        margins.append(round(float(abs(top2[1] - top2[0])), 4))
        out.append(t)
        if llama_cpp.llama_vocab_is_eog(llm._model.vocab, t):
            eos_hit = True
            break
        llm.eval([t])
    return ids, out, margins, eos_hit


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--name", default="smollm2", choices=sorted(MODELS))
    ap.add_argument("--model", default=None, help="GGUF path (default: $VQ_MODELS/<the model's file>)")
    ap.add_argument("--out", default=os.path.join(HERE, "..", "..", "tests", "golden"))
    ap.add_argument("--regen-text", action="store_true")
    args = ap.parse_args()
    cfg = MODELS[args.name]
    model = args.model or os.path.join(MODELS_DIR, cfg["file"])
    chat = cfg["chat"]
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)

    text_path = os.path.join(out, "text_en.txt")
    if args.regen_text or not os.path.exists(text_path):
        with open(text_path, "w", encoding="utf-8", newline="\n") as f:
            f.write(build_text())
    with open(text_path, encoding="utf-8", newline="") as f:
        text = f.read()

    llm = make_llm(model, cfg["n_ctx"], logits_all=True, swa_full=cfg["swa_full"])
    print("llama-cpp-python", llama_cpp.__version__)
    print("add_bos_token:", llm._model.add_bos_token(), "metadata:",
          llm.metadata.get("tokenizer.ggml.add_bos_token"))
    if chat in (chatml, qwen_chat):
        print("chat template:", check_chat_template(llm, chat))

    text_ids = tokenize(llm, text)
    print("text: %d bytes, %d tokens" % (len(text.encode("utf-8")), len(text_ids)))
    if len(text_ids) < 600:
        raise SystemExit("text too short")
    st = write_logits(llm, text_ids, os.path.join(out, cfg["logits"]), cfg["n_ctx"], cfg["n_eval"])
    print("logits: n_eval=%d ppl=%.4f log_rest in [%.4f, %.4f]" % (
        st["n_eval"], st["ppl"], st["min_log_rest"], st["max_log_rest"]))

    common = {
        "generator": "scripts/golden/gen_golden.py",
        "llama_cpp_python": llama_cpp.__version__,
        "model": os.path.basename(model),
        "model_sha256": sha256_file(model),
    }

    def render(p):
        return chat(p) if isinstance(p, list) else p

    toks = []
    for name, p in PROMPTS:
        p = render(p)
        ids = tokenize(llm, p)
        det = detokenize(llm, ids)
        toks.append({
            "name": name,
            "text": p,
            "ids": ids,
            "detokenized": det.decode("utf-8", errors="replace"),
            "detokenized_roundtrip": det == p.encode("utf-8"),
            "pieces_hex": [piece(llm, t).hex() for t in ids],
        })
    with open(os.path.join(out, cfg["tokenizer"]), "w", encoding="utf-8") as f:
        json.dump(dict(common, tokenize={"add_special": True, "parse_special": True,
                                         "add_bos_token": bool(llm._model.add_bos_token())},
                       detokenize={"remove_special": False, "unparse_special": True},
                       prompts=toks), f, ensure_ascii=False, indent=1)
        f.write("\n")

    gr = []
    for name, p in GREEDY_PROMPTS:
        p = render(p)
        ids, gen, margins, eos = greedy(llm, p)
        gr.append({"name": name, "prompt": p, "prompt_ids": ids, "generated_ids": gen,
                   "generated_text": detokenize(llm, gen).decode("utf-8", errors="replace"),
                   "stopped_at_eog": eos, "top2_logit_margin": margins})
        print("greedy %s: %d tokens, eog=%s, min margin %.4f" % (name, len(gen), eos, min(margins)))
    with open(os.path.join(out, cfg["greedy"]), "w", encoding="utf-8") as f:
        json.dump(dict(common, max_new_tokens=GREEDY_N, n_ctx=cfg["n_ctx"], kv_type="f16",
                       flash_attn=False, n_batch=512, prompts=gr), f, ensure_ascii=False, indent=1)
        f.write("\n")

    check_golden.write_manifest(out)
    for n in ["text_en.txt", cfg["logits"], cfg["tokenizer"], cfg["greedy"]]:
        print(n, os.path.getsize(os.path.join(out, n)), "bytes")


if __name__ == "__main__":
    main()
