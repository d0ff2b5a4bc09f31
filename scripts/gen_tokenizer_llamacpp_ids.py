#!/usr/bin/env python3
"""Generates tests/unit/test_tokenizer_llamacpp_ids.h: llama.cpp's token ids and detokenized
text for tokenizer variants built from the SmolLM2 vocabulary, so that the pre-tokenizers the
default model does not use (gpt-2, llama-bpe, qwen2, default, starcoder) and SentencePiece
(with and without the space prefix) are checked against llama.cpp too.

Variants (rebuilt identically in C by tests/unit/test_model_tokenizer.c):
  bpe:<pre>   the GGUF's tokens/types/merges with tokenizer.ggml.pre = <pre>, add_bos_token false
  spm:<0|1>   model "llama": <unk> <s> </s>, <0x00>..<0xFF> (BYTE), then every NORMAL token whose
              GPT-2-decoded bytes are printable ASCII (space -> U+2581), in id order, score = -index;
              add_bos_token true, add_space_prefix 0/1, bos 1, eos 2, unk 0

Needs: pip install gguf llama-cpp-python==0.3.36 (built from source). Not run by CI; the
output is committed.
Usage: python3 scripts/gen_tokenizer_llamacpp_ids.py MODEL.gguf > tests/unit/test_tokenizer_llamacpp_ids.h
"""
import ctypes, os, random, sys, tempfile
import gguf
import llama_cpp

model = sys.argv[1]
r = gguf.GGUFReader(model)
def field(name):
    f = r.fields[name]
    return [bytes(f.parts[i]).decode('utf-8') if f.types[-1] == gguf.GGUFValueType.STRING else int(f.parts[i][0])
            for i in f.data]
toks = field('tokenizer.ggml.tokens')
types = field('tokenizer.ggml.token_type')
merges = field('tokenizer.ggml.merges')

bs = list(range(ord('!'), ord('~') + 1)) + list(range(0xa1, 0xad)) + list(range(0xae, 0x100))
cs = bs[:]
n = 0
for b in range(256):
    if b not in bs:
        bs.append(b); cs.append(256 + n); n += 1
inv = {chr(c): b for b, c in zip(bs, cs)}

def write(path, mdl, pre, tokens, ttypes, scores=None, mg=None, add_bos=False, asp=None):
    w = gguf.GGUFWriter(path, 'llama')
    w.add_context_length(512); w.add_embedding_length(64); w.add_block_count(1)
    w.add_feed_forward_length(128); w.add_head_count(4); w.add_head_count_kv(4)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_tokenizer_model(mdl)
    if pre: w.add_tokenizer_pre(pre)
    w.add_token_list(tokens); w.add_token_types(ttypes)
    if scores is not None: w.add_token_scores(scores)
    if mg is not None: w.add_token_merges(mg)
    w.add_add_bos_token(add_bos)
    if asp is not None: w.add_add_space_prefix(asp)
    w.add_bos_token_id(1); w.add_eos_token_id(2)
    if mdl == 'llama': w.add_unk_token_id(0)
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()

tmp = tempfile.mkdtemp()
variants = []
for pre in ['gpt-2', 'llama-bpe', 'qwen2', 'default', 'starcoder']:
    p = os.path.join(tmp, 'bpe_%s.gguf' % pre)
    write(p, 'gpt2', pre, toks, types, mg=merges)
    variants.append(('bpe:' + pre, p))
stoks = ['<unk>', '<s>', '</s>'] + ['<0x%02X>' % b for b in range(256)]
stypes = [2, 3, 3] + [6] * 256
for t, ty in zip(toks, types):
    if ty != 1:
        continue
    b = bytes(inv.get(c, 0) for c in t)
    if not b or any(x < 0x20 or x > 0x7e for x in b):
        continue
    stoks.append(b.decode('ascii').replace(' ', '\u2581')); stypes.append(1)
stoks.append('<|im_start|>'); stypes.append(3)
stoks.append('<tool>'); stypes.append(4)
sscores = [0.0] * 259 + [-float(i) for i in range(len(stoks) - 259)]
for asp in (1, 0):
    p = os.path.join(tmp, 'spm_%d.gguf' % asp)
    write(p, 'llama', None, stoks, stypes, scores=sscores, add_bos=True, asp=bool(asp))
    variants.append(('spm:%d' % asp, p))

texts = ["Hello world", "The quick brown fox jumps over the lazy dog.", " leading space and trailing space ",
         "I'm sure you'll see they've done what we'd've done. DON'T SHOUT, it's OK.",
         "Wait... what?! (Really) -- yes; no: maybe, \"quoted\" 'single' a , b ' c 's d 're",
         "In 2024, pi=3.14159 and 1234567890 plus 42nd, 007, 1e-5, 100%",
         "a  b   c    d     e          end   ", "line one\n\tindented\n\n\nthree newlines\r\nwindows\t\ttabs\n \n  x\n",
         "def square(x):\n    return x ** 2  # comment\n\nprint(square(12))",
         "Café naïve résumé Zürich — crème brûlée", "你好，世界！日本語のテキスト。한국어", "I love 🦙 and 🐍! 👍🏽 👨\u200d👩\u200d👧 🇫🇷",
         "Привет мир, γειά σου κόσμε, مرحبا, नमस्ते", "<|im_start|>user\nHi there<|im_end|>\n", "text<|endoftext|>more <tool> x",
         "<|im_start is not special, <|im_end|> is", "", " ", "\n", "  \u00a0\u3000 x\u2003y",
         "ǅungla ¼ ² ٣ $+<=>^~|` _", "IT'S 99 LUFTBALLONS", "x" * 70]
rng = random.Random(2026)
pool = [" ", "  ", "\n", "\t", "a", "The", "hello", "'s", "'RE", "123", "4", "é", "日本", "😀", "\u00a0", ".", ",", "!?",
        "$", "<|im_start|>", "<tool>", "¼", "\u0301", "\u200b", "x", "…", "€", "\r\n"]
for _ in range(18):
    texts.append("".join(rng.choice(pool) for _ in range(rng.randint(1, 16))))

def cstr(s):
    b = s.encode('utf-8') if isinstance(s, str) else s
    out = '"'
    for c in b:
        if c == 0x22: out += '\\"'
        elif c == 0x5c: out += '\\\\'
        elif c == 10: out += '\\n'
        elif c == 13: out += '\\r'
        elif c == 9: out += '\\t'
        elif 32 <= c < 127: out += chr(c)
        else: out += '\\x%02x""' % c
    return out + '"'

ids_all, cases = [], []
for vi, (name, path) in enumerate(variants):
    llm = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
    vocab = llama_cpp.llama_model_get_vocab(llm._model.model)
    for special in (0, 1):
        for ti, t in enumerate(texts):
            ids = llm.tokenize(t.encode('utf-8'), add_bos=True, special=bool(special))
            arr = (llama_cpp.llama_token * max(1, len(ids)))(*ids)
            buf = ctypes.create_string_buffer(1 << 16)
            nd = llama_cpp.llama_detokenize(vocab, arr, len(ids), buf, 1 << 16, False, bool(special))
            cases.append((vi, special, ti, len(ids_all), len(ids), buf.raw[:nd]))
            ids_all.extend(ids)

print("/* Generated by scripts/gen_tokenizer_llamacpp_ids.py with llama-cpp-python %s; do not edit. */" % llama_cpp.__version__)
print("#ifndef VQ_TEST_TOKENIZER_LLAMACPP_IDS_H\n#define VQ_TEST_TOKENIZER_LLAMACPP_IDS_H")
print("static const char *const LLC_VARIANTS[] = { %s };" % ", ".join(cstr(v[0]) for v in variants))
print("static const char *const LLC_TEXTS[] = {")
for t in texts: print("    %s," % cstr(t))
print("};")
print("static const int32_t LLC_IDS[] = {")
for i in range(0, len(ids_all), 16): print("    " + ", ".join(map(str, ids_all[i:i + 16])) + ",")
print("};")
print("struct llc_case { int variant, special, text, off, n; const char *detok; };")
print("static const struct llc_case LLC_CASES[] = {")
for vi, sp, ti, off, n, det in cases:
    print("    { %d, %d, %d, %d, %d, %s }," % (vi, sp, ti, off, n, cstr(det)))
print("};")
print("#endif")
