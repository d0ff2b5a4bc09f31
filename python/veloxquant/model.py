"""GGUF models whose KV cache is compressed: Model(path, kv="kv4")."""
import ctypes as C
import queue
import threading

import numpy as np

from . import _lib as L
from .errors import FileError, raise_for


def _last_error(st, what):
    msg = (L.engine_last_error() or b"").decode(errors="replace")
    return msg or f"{what}: {L.status_str(st).decode()}"


class Result(str):
    """Generated text (a str) with the run's counts: prompt_tokens (the whole prompt sequence),
    evaluated (prompt tokens this call evaluated), cached (reused from the cache), generated,
    finish_reason ("stop", "length", "context", "callback"), prefill_s, decode_s."""

    def __new__(cls, text, r):
        s = super().__new__(cls, text)
        s.prompt_tokens, s.evaluated, s.cached = r.n_prompt, r.n_evaluated, r.n_cached
        s.generated, s.prefill_s, s.decode_s = r.n_generated, r.prefill_s, r.decode_s
        s.finish_reason = L.finish_reason_name(r.finish).decode()
        return s


class Model:
    """A GGUF model on the veloxquant engine with a compressed KV cache.

    Model(path, kv="kv4", n_ctx=2048, threads=0): kv is any KV config name ("fp16", "kv8" ..
    "kv2", "turboquant_mse-3", ...; resolved by the library as the CLI does), n_ctx the context
    in tokens, threads the OpenMP threads (0 = the OpenMP default). The model's weights are
    mapped once; the context (activations and the compressed cache) is allocated here. One
    caller at a time."""

    def __init__(self, path, kv="kv4", n_ctx=2048, threads=0):
        st = C.c_int(0)
        self._m = L.model_load(str(path).encode(), C.byref(st))
        if not self._m:
            raise_for(st.value, _last_error(st.value, f"cannot load {path}"))
        self.path, self.kv, self.n_ctx = str(path), kv, int(n_ctx)
        p = L.ctx_params_default()
        p.n_ctx, p.n_threads = self.n_ctx, int(threads)
        self._params = p
        self._ctx = L.ctx_create_kv(self._m, C.byref(p), kv.encode(), C.byref(st))
        if not self._ctx:
            err = _last_error(st.value, f"KV config {kv}")
            L.model_free(self._m)
            self._m = None
            raise_for(st.value, err)
        self._conv = None

    def close(self):
        """Frees the context and the model (also done when the object is collected)."""
        for name, free in (("_conv", L.conversation_free), ("_ctx", L.ctx_free),
                           ("_m", L.model_free)):
            h = getattr(self, name, None)
            if h:
                free(h)
                setattr(self, name, None)

    def __del__(self):
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def info(self):
        """The model's hyper-parameters (dict of struct vq_model_info) and the context's
        threads and KV config."""
        i = L.model_info_get(self._m).contents
        d = {n: getattr(i, n) for n, _ in L.ModelInfo._fields_}
        d["arch"], d["name"] = i.arch.decode(), i.name.decode(errors="replace")
        d.update(threads=L.ctx_n_threads(self._ctx), kv=self.kv, n_ctx=self.n_ctx)
        return d

    # ---- text ----

    def tokenize(self, text, add_special=True, parse_special=False):
        """Token ids (a list of int) of text, as llama_tokenize gives them."""
        b = text.encode()
        n = L.tokenize(self._m, b, len(b), int(add_special), int(parse_special), None, 0)
        if n == L.TEXT_ERROR:
            raise_for(-5, _last_error(-5, "tokenize"))
        n = -n if n < 0 else n
        ids = (C.c_int32 * max(n, 1))()
        got = L.tokenize(self._m, b, len(b), int(add_special), int(parse_special), ids, n)
        if got < 0:
            raise_for(-10, "tokenize: size changed")
        return list(ids[:got])

    def detokenize(self, ids, remove_special=False, unparse_special=False):
        """The text of token ids (invalid UTF-8 at the ends replaced)."""
        a = (C.c_int32 * max(len(ids), 1))(*ids)
        n = L.detokenize(self._m, a, len(ids), None, 0, int(remove_special), int(unparse_special))
        if n == L.TEXT_ERROR:
            raise_for(-5, _last_error(-5, "detokenize"))
        buf = C.create_string_buffer(abs(n) + 1)
        n = L.detokenize(self._m, a, len(ids), buf, abs(n) + 1, int(remove_special),
                         int(unparse_special))
        return buf.raw[:n].decode(errors="replace")

    def apply_chat_template(self, messages, add_generation_prompt=True):
        """The model's chat-template prompt for [{"role": ..., "content": ...}, ...]."""
        keep = [(m["role"].encode(), m["content"].encode()) for m in messages]
        arr = (L.ChatMessage * max(len(keep), 1))(*[L.ChatMessage(r, c) for r, c in keep])
        n = L.chat_apply(self._m, arr, len(keep), int(add_generation_prompt), None, 0)
        if n == L.TEXT_ERROR:
            raise_for(-1, _last_error(-1, "chat template"))
        buf = C.create_string_buffer(abs(n) + 1)
        n = L.chat_apply(self._m, arr, len(keep), int(add_generation_prompt), buf, abs(n) + 1)
        return buf.raw[:n].decode(errors="replace")

    @staticmethod
    def _gen_params(max_tokens, temperature, top_k, top_p, min_p, repeat_penalty, seed, stop):
        p = L.gen_params_default()
        p.max_tokens = int(max_tokens)
        s = p.sampling
        s.temperature, s.top_k, s.top_p, s.min_p = float(temperature), int(top_k), \
            float(top_p), float(min_p)
        s.repeat_penalty, s.seed = float(repeat_penalty), int(seed)
        if isinstance(stop, str):
            stop = [stop]
        keep = [x.encode() for x in (stop or [])]
        arr = (C.c_char_p * max(len(keep), 1))(*keep)
        p.stop, p.n_stop = (C.cast(arr, C.POINTER(C.c_char_p)) if keep else None), len(keep)
        return p, arr

    def _run(self, call, p, on_piece):
        """Runs a generation call with an optional piece callback; returns a Result."""
        cb = None
        if on_piece is not None:
            def _cb(_user, ptr, n):
                try:
                    return 1 if on_piece(C.string_at(ptr, n).decode(errors="replace")) else 0
                except BaseException:  # stop the generation; the exception is re-raised
                    self._cb_exc = __import__("sys").exc_info()[1]
                    return 1
            cb = L.PIECE_FN(_cb)
            p.on_piece = cb
        self._cb_exc = None
        r = L.GenResult()
        st = call(C.byref(p), C.byref(r))
        try:
            if self._cb_exc is not None:
                raise self._cb_exc
            raise_for(st, _last_error(st, "generate"))
            text = C.string_at(r.text, r.text_len).decode(errors="replace") if r.text else ""
            return Result(text, r)
        finally:
            L.gen_result_free(C.byref(r))

    def generate(self, prompt, max_tokens=128, temperature=0.0, top_k=40, top_p=0.95, min_p=0.0,
                 repeat_penalty=1.0, seed=42, stop=None, stream=False):
        """Generates a continuation of prompt (str): returns a Result (the text, with counts),
        or with stream=True an iterator of text pieces (whole UTF-8 characters; stop strings
        never appear) whose .result is set when it ends. temperature 0 is greedy. The context
        keeps the prompt's tokens: a prompt that extends the previous one evaluates only its new
        tokens."""
        p, keep = self._gen_params(max_tokens, temperature, top_k, top_p, min_p,
                                   repeat_penalty, seed, stop)
        b = prompt.encode()
        call = lambda pp, rr: L.generate(self._ctx, b, pp, rr)  # noqa: E731
        if not stream:
            return self._run(call, p, None)
        return _Stream(self, call, p, keep)

    def chat(self, messages, max_tokens=256, temperature=0.0, top_k=40, top_p=0.95, min_p=0.0,
             repeat_penalty=1.0, seed=42, stop=None, stream=False):
        """The assistant's reply to messages ([{"role", "content"}, ...], the conversation so
        far ending with a user message). Multi-turn: the conversation's compressed cache is kept
        between calls, so a call whose messages extend the previous call's (previous messages,
        the reply, a new user message) evaluates only the new tokens (Result.cached says how
        many were reused). Returns a Result, or an iterator of pieces with stream=True."""
        prompt = self.apply_chat_template(messages, add_generation_prompt=True)
        ids = self.tokenize(prompt, add_special=True, parse_special=True)
        arr = (C.c_int32 * len(ids))(*ids)
        p, keep = self._gen_params(max_tokens, temperature, top_k, top_p, min_p,
                                   repeat_penalty, seed, stop)
        call = lambda pp, rr: L.generate_tokens(self._ctx, arr, len(ids), pp, rr)  # noqa: E731
        if not stream:
            return self._run(call, p, None)
        return _Stream(self, call, p, (keep, arr))

    def reset(self):
        """Empties the context's cache."""
        L.ctx_reset(self._ctx)

    @property
    def n_past(self):
        """Tokens in the context's cache."""
        return int(L.ctx_n_past(self._ctx))

    def kv_memory(self):
        """Exact bytes the context's cache holds now (dict: total_bytes, fp16_bytes, ...)."""
        m = L.CacheMemory()
        L.cache_memory(L.ctx_cache(self._ctx), C.byref(m))
        return {n: int(getattr(m, n)) for n, _ in L.CacheMemory._fields_}

    def read_kv(self, layer):
        """The keys and values the context's cache holds for a layer, decoded to float32: two
        (n_past, n_kv_heads, head_dim) arrays (post-RoPE keys; exact with kv="fp32"), e.g. to
        study codecs on a real model's keys."""
        i = L.model_info_get(self._m).contents
        if not 0 <= layer < i.n_layers:
            raise ValueError(f"layer {layer} (the model has {i.n_layers})")
        n, h, d = self.n_past, i.n_kv_heads, i.head_dim
        k = np.empty((h, n, d), dtype=np.float32)
        v = np.empty_like(k)
        for j in range(h):
            st = L.cache_read(L.ctx_cache(self._ctx), layer, j, k[j].ctypes.data_as(L.c_float_p),
                              v[j].ctypes.data_as(L.c_float_p))
            raise_for(st, f"read layer {layer}")
        return k.transpose(1, 0, 2).copy(), v.transpose(1, 0, 2).copy()

    def perplexity(self, text, ctx=512, chunks=0, batch=0, threads=None,
                   f32_activations=False, progress=None):
        """Perplexity of text (a str, or a sequence of token ids) with the model's KV config,
        computed by the library (vq_perplexity: llama.cpp's protocol, the code `veloxquant
        perplexity` runs, so the same text, ctx, kv and threads give the same number bit for
        bit). The text is tokenized as the CLI does (add_special, no special-token parsing); the
        ids are cut into chunks of ctx tokens (even, >= 4; a partial last chunk is dropped), each
        starting from an empty compressed cache (its first token replaced by BOS where the model
        adds one), and the second half of each chunk is scored against the next token. chunks:
        score only the first N (0: all); batch: tokens per forward pass (0: ctx); threads: OpenMP
        threads (None: the Model's); f32_activations: exact fp32 matmul inputs instead of
        llama.cpp's int8 ones; progress: called as progress(chunk, n_chunks, ppl_so_far) after
        each chunk. The run has a context of its own (ctx tokens), not the Model's: n_ctx does
        not limit ctx. The GIL is released during the call (except around progress).

        Returns a dict: ppl, ppl_stderr, nll (mean, nats), n (scored tokens), chunks, tokens
        (ids in the text), kv_bytes and fp16_bytes (the cache after one chunk), seconds and
        tok_s (forward passes)."""
        ids = self.tokenize(text, add_special=True) if isinstance(text, str) else \
            [int(t) for t in text]
        arr = (C.c_int32 * max(len(ids), 1))(*ids)
        p = L.ppl_params_default()
        p.ctx, p.n_chunks, p.n_batch = int(ctx), int(chunks), int(batch)
        p.n_threads = self._params.n_threads if threads is None else int(threads)
        p.f32_activations = int(bool(f32_activations))
        cb = L.PPL_PROGRESS_FN()  # NULL
        if progress is not None:
            cb = L.PPL_PROGRESS_FN(lambda _u, i, n, x: progress(i, n, x))
        r = L.PplResult()
        err = C.create_string_buffer(512)
        st = L.perplexity(self._m, arr, len(ids), C.byref(p), self.kv.encode(), cb, None,
                          C.byref(r), err, 512)
        raise_for(st, f"perplexity: {err.value.decode(errors='replace') or L.status_str(st)}")
        return {"ppl": r.ppl, "ppl_stderr": r.ppl_stderr, "nll": r.nll_mean, "n": int(r.n_scored),
                "chunks": r.n_chunks, "tokens": len(ids), "kv_bytes": int(r.mem.total_bytes),
                "fp16_bytes": int(r.mem.fp16_bytes), "seconds": r.seconds,
                "tok_s": r.prefill_tok_s}


class _Stream:
    """Iterator over the pieces of a generation running in a worker thread (the C call releases
    the GIL; each piece crosses back through a queue). Closing it early stops the generation."""

    _END = object()

    def __init__(self, model, call, p, keep):
        self._q = queue.Queue()
        self._stop = threading.Event()
        self.result = None
        self._keep = keep

        def piece(t):
            self._q.put(t)
            return self._stop.is_set()

        def work():
            try:
                self.result = model._run(call, p, piece)
                self._q.put(self._END)
            except BaseException as e:  # delivered to the consumer
                self._q.put(e)

        self._t = threading.Thread(target=work, daemon=True)
        self._t.start()

    def __iter__(self):
        return self

    def __next__(self):
        x = self._q.get()
        if x is self._END:
            self._t.join()
            raise StopIteration
        if isinstance(x, BaseException):
            self._t.join()
            raise x
        return x

    def close(self):
        """Stops the generation (finish "callback") and waits for it."""
        self._stop.set()
        while self._t.is_alive():
            try:
                self._q.get(timeout=0.05)
            except queue.Empty:
                pass
        self._t.join()

    def __del__(self):
        if getattr(self, "_t", None) is not None and self._t.is_alive():
            self.close()


__all__ = ["Model", "Result", "FileError"]
