/*
 * fuzz_gguf.c — libFuzzer target for the GGUF reader: opens the input with vq_gguf_open_mem
 * and, when it opens, checks the tensor values and reads every metadata value, array element and
 * tensor byte through the accessors (all must stay in bounds). Replayed over fuzz/corpus/gguf/ by
 * fuzz/replay_main.c.
 */
#include <stddef.h>
#include <stdint.h>

#include "engine/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    vq_status st;
    vq_gguf *g = vq_gguf_open_mem(data, size, &st);
    if (!g) return 0;
    volatile uint32_t sink = 0;
    sink += (uint32_t)vq_gguf_check_values(g); /* reads every scale / float value */
    for (int64_t i = 0; i < vq_gguf_n_kv(g); i++) {
        const struct vq_gguf_kv *kv = vq_gguf_kv_at(g, i);
        struct vq_gguf_str s;
        float f;
        int32_t x;
        uint32_t u;
        char key[128];
        size_t kl = kv->key.len < sizeof key - 1 ? (size_t)kv->key.len : sizeof key - 1;
        for (size_t j = 0; j < kl; j++) key[j] = kv->key.ptr[j];
        key[kl] = 0;
        if (vq_gguf_get_u32(g, key, &u) == VQ_STATUS_OK) sink += u;
        if (vq_gguf_get_f32(g, key, &f) == VQ_STATUS_OK) sink += (uint32_t)(f != f);
        if (vq_gguf_get_str(g, key, &s) == VQ_STATUS_OK && s.len) sink += (uint8_t)s.ptr[s.len - 1];
        for (uint64_t j = 0; j < kv->arr_count; j++) {
            if (vq_gguf_arr_str(g, kv, j, &s) == VQ_STATUS_OK && s.len)
                sink += (uint8_t)s.ptr[s.len - 1];
            if (vq_gguf_arr_f32(g, kv, j, &f) == VQ_STATUS_OK) sink += (uint32_t)(f != f);
            if (vq_gguf_arr_i32(g, kv, j, &x) == VQ_STATUS_OK) sink += (uint32_t)x;
        }
    }
    for (int64_t i = 0; i < vq_gguf_n_tensors(g); i++) {
        const struct vq_gguf_tensor *t = vq_gguf_tensor_at(g, i);
        const uint8_t *p = t->data;
        if (t->nbytes) sink += p[0] + p[t->nbytes - 1];
        sink += (uint32_t)vq_ggml_type_name(t->type)[0];
    }
    (void)sink;
    vq_gguf_close(g);
    return 0;
}
