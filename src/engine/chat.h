/*
 * chat.h — chat prompt formatting for the supported instruct models. Not part of the public
 * API.
 *
 * Formats (chosen from tokenizer.chat_template by vq_chat_from_gguf, as llama.cpp's template
 * detection does, or set by the caller):
 *   CHATML  <|im_start|>ROLE\nCONTENT<|im_end|>\n ... [<|im_start|>assistant\n]
 *           (SmolLM2, Qwen2). When the model's Jinja template writes a default system turn
 *           for conversations that do not start with one (SmolLM2: "You are a helpful AI
 *           assistant named SmolLM, trained by Hugging Face"), that text is extracted from
 *           the template and inserted exactly where the template would put it.
 *   LLAMA2  [INST] <<SYS>>\nSYS\n<</SYS>>\n\nUSER [/INST]ASSISTANT</s>[INST] ...
 *   LLAMA3  <|start_header_id|>ROLE<|end_header_id|>\n\nCONTENT<|eot_id|> ...
 *   GEMMA   <start_of_turn>user\n...<end_of_turn>\n<start_of_turn>model\n (system text is
 *           merged into the first user turn)
 * The output is text: tokenize it with parse_special = true. BOS is not written; the
 * tokenizer adds it where the model asks for it (vq_tok_encode add_special).
 *
 * Thread-safety: all functions are pure (no shared state).
 */
#ifndef VQ_CHAT_H
#define VQ_CHAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "veloxquant.h"
#include "engine/gguf.h"

enum vq_chat_format {
    VQ_CHAT_CHATML = 0,
    VQ_CHAT_LLAMA2 = 1,
    VQ_CHAT_LLAMA3 = 2,
    VQ_CHAT_GEMMA = 3
};

#define VQ_CHAT_SYSTEM_MAX 1024

struct vq_chat_msg {
    const char *role;    /* "system", "user", "assistant" (other roles pass through) */
    const char *content; /* NUL-terminated */
};

struct vq_chat_template {
    enum vq_chat_format format;
    bool has_default_system;                 /* insert default_system when no system turn */
    char default_system[VQ_CHAT_SYSTEM_MAX]; /* NUL-terminated */
};

/* Template of the given format without a default system prompt. */
struct vq_chat_template vq_chat_template_default(enum vq_chat_format f);

/* Detects the format from a Jinja chat template text (len bytes) and extracts a ChatML
 * default system prompt if the template contains one. Returns NOT_FOUND (and CHATML in *out)
 * when no known format is recognised. */
vq_status vq_chat_template_parse(const char *tmpl, size_t len, struct vq_chat_template *out);

/* Same from the tokenizer.chat_template metadata of a GGUF file; a file without a template
 * whose general.architecture starts with "gemma" gets GEMMA (Gemma's only format); NOT_FOUND
 * (and CHATML in *out) when the file has no template otherwise or an unknown one. */
vq_status vq_chat_from_gguf(const vq_gguf *g, struct vq_chat_template *out);

/* Parses a format name ("chatml", "llama2", "llama3", "gemma"); NOT_FOUND otherwise. */
vq_status vq_chat_format_from_name(const char *name, enum vq_chat_format *out);

/* Writes the prompt for n messages into buf (NUL-terminated when it fits), followed by the
 * assistant turn header when add_generation_prompt. Returns the prompt length in bytes
 * (without the NUL), or -(length + 1) when cap is too small (llama_chat_apply_template-like;
 * call again with a buffer of the returned size). Returns 0 for n == 0 without
 * add_generation_prompt. */
int64_t vq_chat_apply(const struct vq_chat_template *tmpl, const struct vq_chat_msg *msgs, size_t n,
                      bool add_generation_prompt, char *buf, size_t cap);

#endif
