/*
 * tokenizer.h — text <-> token ids from GGUF tokenizer metadata, reproducing llama.cpp's
 * tokenizer id for id. Not part of the public API.
 *
 * Models
 *   "gpt2"  byte-level BPE (SmolLM2, Qwen2, Llama 3): the text is split by the pre-tokenizer
 *           named in tokenizer.ggml.pre (hand-written UTF-8 aware code, no regex library), each
 *           piece is mapped through the GPT-2 byte-to-unicode table and merged by merge rank
 *           (lowest rank first, leftmost first on ties).
 *           Pre-tokenizers: "smollm" family (starcoder, refact, command-r, codeshell, exaone,
 *           minerva-7b: every \p{N} alone, then the GPT-2 regex), GPT-2 family (gpt-2, gpt2,
 *           phi-2, mpt, olmo, jais, trillion), Llama-3 family (llama3, llama-v3, llama-bpe,
 *           falcon3, pixtral, dbrx, smaug-bpe), Qwen2 family (qwen2, deepseek-r1-qwen,
 *           stablelm2); any other value (or none) gets llama.cpp's default 4-regex chain.
 *   "llama" SentencePiece BPE (Llama 1/2, Mistral, Gemma): spaces become U+2581, UTF-8
 *           characters are merged by the score of the merged token (highest first), symbols
 *           that form no token fall back to <0xXX> byte tokens.
 *
 * Special tokens
 *   Tokens of type CONTROL and UNKNOWN are matched in the text only when parse_special is set;
 *   USER_DEFINED tokens are always matched (llama.cpp / HF added-tokens behaviour). Longer
 *   special tokens are matched first.
 *
 * Invalid UTF-8 (a documented difference from llama.cpp)
 *   llama.cpp turns every invalid byte into U+FFFD before byte-level BPE; we split exactly as
 *   llama.cpp does (an invalid byte is classified like U+FFFD, a symbol) but keep the original
 *   byte, so detokenize(encode(s)) == s for every byte string with byte-level BPE models.
 *   Ids differ from llama.cpp only for inputs that are not valid UTF-8.
 *
 * Streaming detokenization
 *   A byte-level BPE token may hold part of a multi-byte UTF-8 character. To print text as
 *   it is generated, feed ids to vq_tok_stream_push(): it emits only complete UTF-8
 *   sequences and holds back (at most 3) bytes of a started character until it completes;
 *   bytes that can never complete a character are emitted as they are. Call
 *   vq_tok_stream_flush() at the end.
 *
 * Ownership and threading
 *   vq_tok_create copies everything it needs: the vq_gguf may be closed afterwards. A
 *   tokenizer is immutable after creation; any number of threads may use it at once. Every
 *   call allocates its own scratch (O(text length)), freed before it returns.
 *
 * Limits
 *   at most 2^24 tokens, token text at most 64 KiB, text to encode at most 2^28 bytes.
 */
#ifndef VQ_TOKENIZER_H
#define VQ_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "veloxquant.h"
#include "engine/gguf.h"

typedef struct vq_tokenizer vq_tokenizer;

/* Token types as stored in tokenizer.ggml.token_type (llama.cpp's llama_token_type). */
enum vq_tok_type {
    VQ_TOK_TYPE_UNDEFINED = 0,
    VQ_TOK_TYPE_NORMAL = 1,
    VQ_TOK_TYPE_UNKNOWN = 2,
    VQ_TOK_TYPE_CONTROL = 3,
    VQ_TOK_TYPE_USER_DEFINED = 4,
    VQ_TOK_TYPE_UNUSED = 5,
    VQ_TOK_TYPE_BYTE = 6
};

enum vq_tok_model { VQ_TOK_MODEL_BPE = 1, VQ_TOK_MODEL_SPM = 2 };

/* Returned by vq_tok_encode when scratch memory could not be allocated. */
#define VQ_TOK_ERR_NO_MEMORY INT64_MIN

/* A vocabulary given directly (tests, fuzzing, models without GGUF). Strings are borrowed
 * for the duration of vq_tok_create_vocab only. A NULL length array means NUL-terminated
 * strings; NULL scores mean 0; NULL types mean NORMAL. Ids set to -1 are absent. add_bos,
 * add_eos and add_space_prefix: 0 or 1, or -1 for the model's default (BPE: no BOS, SPM: BOS
 * and a space prefix). */
struct vq_tok_vocab {
    const char *model; /* "gpt2" or "llama" */
    const char *pre;   /* tokenizer.ggml.pre, may be NULL */
    int32_t n_tokens;
    const char *const *tokens;  /* (n_tokens) token texts as stored in GGUF */
    const uint32_t *token_lens; /* (n_tokens) or NULL */
    const float *scores;        /* (n_tokens) or NULL */
    const int32_t *types;       /* (n_tokens) enum vq_tok_type, or NULL */
    int32_t n_merges;
    const char *const *merges;  /* (n_merges) "left right", rank = index */
    const uint32_t *merge_lens; /* (n_merges) or NULL */
    int32_t bos, eos, unk, pad, eot, eom;
    int add_bos, add_eos, add_space_prefix;
};

/* Sets every id to -1, flags to -1 and everything else to 0/NULL. */
void vq_tok_vocab_init(struct vq_tok_vocab *v);

/* Builds a tokenizer from the tokenizer.ggml.* metadata of an open GGUF file (model, pre,
 * tokens, scores, token_type, merges, bos/eos/unknown/padding/eot/eom ids, add_bos_token,
 * add_eos_token, add_space_prefix). Returns NULL and *st (optional) = NOT_FOUND when the file
 * has no tokenizer, UNSUPPORTED for another tokenizer model (bert, t5, empty, ...) or a
 * 'gpt2' pre-tokenizer (tokenizer.ggml.pre) this engine does not implement, BAD_FORMAT for
 * inconsistent metadata (wrong types, counts that differ from the token count, a piece over
 * the length limit, every token string empty, a 'gpt2' tokenizer without merges), NO_MEMORY.
 * Every failure leaves a message naming the key, what was expected and what was found in
 * vq_engine_last_error(). Free with vq_tok_free. The gguf handle is not referenced after
 * return. */
vq_tokenizer *vq_tok_create(const vq_gguf *g, vq_status *st);

/* Same from a vocabulary description (see struct vq_tok_vocab). BAD_FORMAT also when every
 * token string is empty (message in vq_engine_last_error()). */
vq_tokenizer *vq_tok_create_vocab(const struct vq_tok_vocab *v, vq_status *st);

/* Frees a tokenizer; NULL is a no-op. */
void vq_tok_free(vq_tokenizer *t);

/* Tokenizes len bytes of text (any bytes; NUL is an ordinary byte).
 * add_special: add BOS (and EOS) where the model's metadata asks for it (add_bos_token /
 *   add_eos_token), as llama_tokenize's add_special; SmolLM2 asks for neither.
 * parse_special: match CONTROL tokens such as <|im_start|> in the text.
 * Writes at most max ids to out (out may be NULL when max is 0). Returns the number of ids,
 * or -(number needed) when max is too small (out then holds the first max ids), or
 * VQ_TOK_ERR_NO_MEMORY when scratch memory (O(len)) cannot be allocated, t is NULL, text is
 * NULL with len > 0 or len exceeds 2^28. Thread-safe. */
int64_t vq_tok_encode(const vq_tokenizer *t, const char *text, size_t len, bool add_special,
                      bool parse_special, int32_t *out, int64_t max);

/* Writes the bytes of one token into buf (not NUL-terminated). CONTROL and UNKNOWN tokens
 * give their text only when special is set, otherwise nothing; ids out of range, UNUSED and
 * UNDEFINED tokens give nothing. Returns the byte count, or -(bytes needed) when cap is too
 * small (nothing written). Thread-safe. */
int64_t vq_tok_token_to_piece(const vq_tokenizer *t, int32_t id, char *buf, size_t cap,
                              bool special);

/* Borrowed view of a token's piece bytes (as token_to_piece with special = true); *len gets
 * the length. NULL for ids out of range. Valid until vq_tok_free. */
const char *vq_tok_piece(const vq_tokenizer *t, int32_t id, size_t *len);

/* Borrowed view of a token's text as stored in the vocabulary (GPT-2 mapped characters for
 * byte-level BPE). NULL for ids out of range. Valid until vq_tok_free. */
const char *vq_tok_text(const vq_tokenizer *t, int32_t id, size_t *len);

/* Detokenizes n ids into buf (not NUL-terminated), as llama_detokenize: remove_special drops
 * a leading BOS / trailing EOS the model adds itself; unparse_special renders CONTROL tokens
 * as text; SPM models drop the space the tokenizer prefixed; models whose HF tokenizer cleans
 * up spaces (GPT-2, Llama 3) get llama.cpp's clean-up passes. Returns the byte count, or
 * -(bytes needed) when cap is too small (buf content then unspecified). Thread-safe. */
int64_t vq_tok_detokenize(const vq_tokenizer *t, const int32_t *ids, int64_t n, char *buf,
                          size_t cap, bool remove_special, bool unparse_special);

/* Exact lookup of a token by its stored text; -1 if none. */
int32_t vq_tok_find(const vq_tokenizer *t, const char *text, size_t len);

int32_t vq_tok_n_vocab(const vq_tokenizer *t);
enum vq_tok_model vq_tok_model(const vq_tokenizer *t); /* BPE for NULL */
int32_t vq_tok_bos(const vq_tokenizer *t);             /* -1 if none */
int32_t vq_tok_eos(const vq_tokenizer *t);             /* -1 if none */
int32_t vq_tok_eot(const vq_tokenizer *t);             /* end-of-turn, -1 if none */
int32_t vq_tok_unk(const vq_tokenizer *t);
int32_t vq_tok_pad(const vq_tokenizer *t);
bool vq_tok_add_bos(const vq_tokenizer *t); /* encode(add_special) prepends BOS */
enum vq_tok_type vq_tok_type(const vq_tokenizer *t, int32_t id); /* UNDEFINED if out of range */
/* True for tokens that end generation: EOS, EOT, EOM and the tokens llama.cpp recognises by
 * text (<|im_end|>, <|endoftext|>, <|eot_id|>, <end_of_turn>, ...). */
bool vq_tok_is_eog(const vq_tokenizer *t, int32_t id);
/* True for CONTROL tokens. */
bool vq_tok_is_control(const vq_tokenizer *t, int32_t id);

/* ---- streaming detokenization ---- */
struct vq_tok_stream {
    uint8_t pend[4]; /* bytes of an incomplete UTF-8 character */
    int n_pend;
};

void vq_tok_stream_init(struct vq_tok_stream *s);

/* Appends the piece of id (special as in token_to_piece) and writes to buf every byte that
 * is now part of a complete UTF-8 character (or can never become one). Returns bytes
 * written, or -(bytes needed) when cap is too small, in which case the stream is unchanged
 * and the call can be repeated with a larger buffer (cap >= piece length + 4 always
 * suffices). */
int64_t vq_tok_stream_push(const vq_tokenizer *t, struct vq_tok_stream *s, int32_t id, bool special,
                           char *buf, size_t cap);

/* Writes the held-back bytes (an unfinished character at the end of the text) and resets
 * the stream. Returns bytes written (<= 4), or -(bytes needed). */
int64_t vq_tok_stream_flush(struct vq_tok_stream *s, char *buf, size_t cap);

#endif
