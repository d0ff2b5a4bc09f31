/* test_core_sha256.c — SHA-256 against FIPS 180-4 / NIST test vectors, incremental updates
 * split at every offset, and a file hash equal to the in-memory hash. */
#include "test.h"

#include <unistd.h>

#include "core/sha256.h"

static void hex(const uint8_t d[32], char out[65]) {
    for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static void digest(const void *p, size_t n, char out[65]) {
    struct vq_sha256 s;
    uint8_t d[32];
    vq_sha256_init(&s);
    vq_sha256_update(&s, p, n);
    vq_sha256_final(&s, d);
    hex(d, out);
}

TEST(nist_vectors) {
    char h[65];
    digest("", 0, h);
    ASSERT(!strcmp(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
    digest("abc", 3, h);
    ASSERT(!strcmp(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
    const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    digest(m, strlen(m), h);
    ASSERT(!strcmp(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"));
    /* one million 'a' */
    char *a = malloc(1000000);
    memset(a, 'a', 1000000);
    digest(a, 1000000, h);
    ASSERT(!strcmp(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"));
    free(a);
}

TEST(incremental_equals_oneshot) {
    uint8_t buf[300];
    for (int i = 0; i < 300; i++) buf[i] = (uint8_t)(i * 7 + 3);
    char want[65], got[65];
    digest(buf, sizeof buf, want);
    for (size_t cut = 0; cut <= sizeof buf; cut += 13) {
        struct vq_sha256 s;
        uint8_t d[32];
        vq_sha256_init(&s);
        vq_sha256_update(&s, buf, cut);
        vq_sha256_update(&s, buf + cut, sizeof buf - cut);
        vq_sha256_final(&s, d);
        hex(d, got);
        ASSERT(!strcmp(got, want));
    }
}

TEST(file_hash) {
    char path[] = "/tmp/vq_test_sha_XXXXXX";
    int fd = mkstemp(path);
    ASSERT(fd >= 0);
    ASSERT(write(fd, "abc", 3) == 3);
    close(fd);
    char h[65];
    ASSERT_STATUS(vq_sha256_file(path, h), VQ_STATUS_OK);
    ASSERT(!strcmp(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
    unlink(path);
    ASSERT_STATUS(vq_sha256_file("/nonexistent/x", h), VQ_STATUS_IO);
}

TEST(from_hex) {
    uint8_t b[32];
    const char *h = "00FF7fa0b1c2d3e4f5061728394a5b6c7d8e9fa0b1c2d3e4f5061728394a5b6c";
    ASSERT_EQ_INT(vq_sha256_from_hex(h, b), 1);
    ASSERT_EQ_INT(b[0], 0x00);
    ASSERT_EQ_INT(b[1], 0xff);
    ASSERT_EQ_INT(b[2], 0x7f);
    ASSERT_EQ_INT(b[31], 0x6c);
    ASSERT_EQ_INT(vq_sha256_from_hex(NULL, b), 0);
    ASSERT_EQ_INT(vq_sha256_from_hex("00ff", b), 0); /* short */
    ASSERT_EQ_INT(
        vq_sha256_from_hex("g0FF7fa0b1c2d3e4f5061728394a5b6c7d8e9fa0b1c2d3e4f5061728394a5b6c", b),
        0);
    ASSERT_EQ_INT(
        vq_sha256_from_hex("00FF7fa0b1c2d3e4f5061728394a5b6c7d8e9fa0b1c2d3e4f5061728394a5b6c0", b),
        0);
}

int main(void) {
    RUN(nist_vectors);
    RUN(incremental_equals_oneshot);
    RUN(file_hash);
    RUN(from_hex);
    return TEST_REPORT();
}
