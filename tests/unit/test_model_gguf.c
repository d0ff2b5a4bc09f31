/* test_model_gguf.c — the GGUF reader on the real default model, and truncated copies of it. */
#include "test.h"

#include <stdint.h>
#include <unistd.h>

#include "engine/gguf.h"

#define MODEL VQ_MODELS_DIR "/SmolLM2-135M-Instruct.Q4_1.gguf"

static int model_present(void) {
    if (access(MODEL, R_OK) == 0) return 1;
    fprintf(stderr, "model %s missing (run scripts/fetch_models.sh)\n", MODEL);
    return 0;
}

TEST(default_model) {
    if (!model_present()) {
        ASSERT(0);
        return;
    }
    vq_status st;
    vq_gguf *g = vq_gguf_open(MODEL, &st);
    ASSERT(g != NULL);
    if (!g) {
        fprintf(stderr, "%s\n", vq_gguf_last_error());
        return;
    }
    ASSERT_EQ_INT(vq_gguf_version(g), 3);
    struct vq_gguf_str s;
    ASSERT_STATUS(vq_gguf_get_str(g, "general.architecture", &s), VQ_STATUS_OK);
    ASSERT(s.len == 5 && !memcmp(s.ptr, "llama", 5));
    uint32_t u;
    ASSERT_STATUS(vq_gguf_get_u32(g, "llama.block_count", &u), VQ_STATUS_OK);
    ASSERT_EQ_INT(u, 30);
    ASSERT_STATUS(vq_gguf_get_u32(g, "llama.embedding_length", &u), VQ_STATUS_OK);
    ASSERT_EQ_INT(u, 576);
    ASSERT_STATUS(vq_gguf_get_u32(g, "llama.attention.head_count", &u), VQ_STATUS_OK);
    ASSERT_EQ_INT(u, 9);
    ASSERT_STATUS(vq_gguf_get_u32(g, "llama.attention.head_count_kv", &u), VQ_STATUS_OK);
    ASSERT_EQ_INT(u, 3);
    float f;
    ASSERT_STATUS(vq_gguf_get_f32(g, "llama.rope.freq_base", &f), VQ_STATUS_OK);
    ASSERT(f > 0);
    const struct vq_gguf_kv *tok = vq_gguf_find(g, "tokenizer.ggml.tokens");
    ASSERT(tok && tok->arr_type == VQ_GGUF_STRING && tok->arr_count == 49152);
    if (tok) {
        ASSERT_STATUS(vq_gguf_arr_str(g, tok, tok->arr_count - 1, &s), VQ_STATUS_OK);
        ASSERT(s.len > 0);
    }
    /* 30 layers x 9 tensors + token_embd + output_norm (output tied) */
    ASSERT_EQ_INT(vq_gguf_n_tensors(g), 272);
    const struct vq_gguf_tensor *t = vq_gguf_tensor_find(g, "token_embd.weight");
    ASSERT(t && t->ne[0] == 576 && t->ne[1] == 49152);
    t = vq_gguf_tensor_find(g, "blk.0.attn_k.weight");
    ASSERT(t && t->ne[0] == 576 && t->ne[1] == 192);
    ASSERT(vq_gguf_tensor_find(g, "output.weight") == NULL);
    vq_gguf_close(g);
}

/* Truncated copies of the real file (header, middle of the tokenizer, last byte) fail cleanly. */
TEST(truncated_model_files) {
    if (!model_present()) {
        ASSERT(0);
        return;
    }
    FILE *f = fopen(MODEL, "rb");
    ASSERT(f != NULL);
    if (!f) return;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char tmpl[] = "/tmp/vq_trunc_XXXXXX";
    int fd = mkstemp(tmpl);
    ASSERT(fd >= 0);
    if (fd < 0) {
        fclose(f);
        return;
    }
    close(fd);
    const long cuts[] = {0, 3, 23, 24, 1000, 200000, 1500000, size / 2, size - 1};
    static char buf[1 << 16];
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        FILE *o = fopen(tmpl, "wb");
        fseek(f, 0, SEEK_SET);
        long left = cuts[i];
        while (left > 0) {
            size_t n = fread(buf, 1, left < (long)sizeof buf ? (size_t)left : sizeof buf, f);
            if (!n) break;
            fwrite(buf, 1, n, o);
            left -= (long)n;
        }
        fclose(o);
        vq_status st;
        vq_gguf *g = vq_gguf_open(tmpl, &st);
        ASSERT(g == NULL);
        ASSERT_STATUS(st, VQ_STATUS_BAD_FORMAT);
        vq_gguf_close(g);
    }
    fclose(f);
    remove(tmpl);
}

int main(void) {
    RUN(default_model);
    RUN(truncated_model_files);
    return TEST_REPORT();
}
