/*
 * replay_main.c — runs every regular file under the given directories (recursively) through
 * LLVMFuzzerTestOneInput, so fuzz corpora and crash reproducers are ordinary tests
 * (zstd regression_driver style). Exit status: 0 when every file ran, 1 on an I/O error or when
 * a directory holds no file at all (a corpus that vanished must not pass silently).
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        return -1;
    }
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap);
    for (;;) {
        if (!buf) {
            fclose(f);
            fprintf(stderr, "replay: out of memory\n");
            return -1;
        }
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        cap *= 2;
        uint8_t *nb = realloc(buf, cap);
        if (!nb) free(buf);
        buf = nb;
    }
    int err = ferror(f);
    fclose(f);
    if (err) {
        free(buf);
        fprintf(stderr, "replay: read error %s\n", path);
        return -1;
    }
    /* exact-size copy so that ASan catches reads past the end of the input */
    uint8_t *exact = malloc(n ? n : 1);
    if (!exact) {
        free(buf);
        return -1;
    }
    memcpy(exact, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 1;
}

/* Returns the number of files run under path, or -1 on error. */
static long run_path(const char *path, int depth) {
    struct stat sb;
    if (stat(path, &sb) != 0) {
        fprintf(stderr, "replay: cannot stat %s\n", path);
        return -1;
    }
    if (S_ISREG(sb.st_mode)) return run_file(path);
    if (!S_ISDIR(sb.st_mode) || depth > 32) return 0;
    DIR *d = opendir(path);
    if (!d) {
        fprintf(stderr, "replay: cannot open dir %s\n", path);
        return -1;
    }
    long total = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        size_t len = strlen(path) + strlen(e->d_name) + 2;
        char *sub = malloc(len);
        if (!sub) {
            closedir(d);
            return -1;
        }
        snprintf(sub, len, "%s/%s", path, e->d_name);
        long r = run_path(sub, depth + 1);
        free(sub);
        if (r < 0) {
            closedir(d);
            return -1;
        }
        total += r;
    }
    closedir(d);
    return total;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR|FILE...\n", argv[0]);
        return 2;
    }
    long total = 0;
    for (int i = 1; i < argc; i++) {
        long r = run_path(argv[i], 0);
        if (r < 0) return 1;
        if (r == 0) {
            fprintf(stderr, "replay: no files under %s\n", argv[i]);
            return 1;
        }
        total += r;
    }
    printf("replay: %ld inputs ran\n", total);
    return 0;
}
