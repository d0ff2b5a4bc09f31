/*
 * chat.c — a chat on a GGUF model with a compressed KV cache, through the public API alone:
 * the model, a context whose cache is the "kv4" preset (vq_ctx_create_kv), a conversation whose
 * turns evaluate only their new tokens, and the answer streamed piece by piece. One user turn
 * per line of stdin; with nothing on stdin, two built-in turns. Build: cc chat.c $(pkg-config
 * --cflags --libs veloxquant). Usage: chat MODEL.gguf [KV] (KV default kv4; VQ_MODEL works too).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vq_engine.h"

/* Streams each piece as the library finalizes it (never a part of a stop string). */
static int on_piece(void *user, const char *piece, size_t len) {
    (void)user;
    fwrite(piece, 1, len, stdout);
    fflush(stdout);
    return 0; /* nonzero would stop the answer */
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : getenv("VQ_MODEL");
    const char *kv = argc > 2 ? argv[2] : "kv4";
    if (!path) return fprintf(stderr, "usage: chat MODEL.gguf [KV]\n"), 2;
    vq_status st;
    vq_model *m = vq_model_load(path, &st);
    if (!m) return fprintf(stderr, "chat: %s\n", vq_engine_last_error()), 1;
    struct vq_ctx_params cp = vq_ctx_params_default();
    cp.n_ctx = 2048;
    vq_ctx *c = vq_ctx_create_kv(m, &cp, kv, &st);
    vq_conversation *conv = c ? vq_conversation_create(c, NULL, &st) : NULL;
    if (!conv) return fprintf(stderr, "chat: %s\n", vq_engine_last_error()), 1;

    struct vq_gen_params gp = vq_gen_params_default(); /* greedy */
    gp.max_tokens = 64;
    gp.on_piece = on_piece;
    static const char *const builtin[] = {"Hi! Name three colours.", "Which one is warmest?"};
    char line[4096];
    int turn = 0, rc = 0, lines = 0;
    for (;;) {
        const char *user = fgets(line, sizeof line, stdin) ? line : NULL;
        lines += user != NULL;
        if (!user && !lines && turn < 2) user = builtin[turn]; /* nothing on stdin */
        if (!user) break;
        line[strcspn(line, "\n")] = 0;
        if (!*user) continue;
        printf("> %s\n", user);
        struct vq_gen_result r;
        st = vq_conversation_turn(conv, user, &gp, &r);
        if (st != VQ_STATUS_OK) {
            fprintf(stderr, "\nchat: %s\n", vq_engine_last_error());
            rc = 1;
            break;
        }
        struct vq_cache_memory mem;
        vq_cache_memory(vq_ctx_cache(c), &mem);
        printf("\n[%lld new tokens, %lld reused, %lld generated (%s); KV %zu bytes, fp16 %zu]\n",
               (long long)r.n_evaluated, (long long)r.n_cached, (long long)r.n_generated,
               vq_finish_reason_name(r.finish), mem.total_bytes, mem.fp16_bytes);
        vq_gen_result_free(&r);
        turn++;
    }
    vq_conversation_free(conv);
    vq_ctx_free(c);
    vq_model_free(m);
    return rc;
}
