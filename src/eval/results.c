/*
 * results.c — results in memory (construction, hardware and time stamps) and atomic file writes
 * (see results.h). The JSON reader and writer are in the tools' library
 * (tools/common/results_json.c): the library does not depend on a JSON package.
 */
#include "eval/results.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"
#include "core/fileio.h"

/* write(2) behind a pointer so that tests can simulate a full disk. */
static ssize_t (*results_write_fn)(int, const void *, size_t) = write;

/* ---- construction ------------------------------------------------------------------------ */

void vq_results_init(struct vq_results *r) { memset(r, 0, sizeof *r); }

void vq_result_init(struct vq_result *e) {
    memset(e, 0, sizeof *e);
    /* every metric of struct vq_result (the list of results_json.c's METRICS) */
    e->prefill_tok_s = e->decode_tok_s = e->peak_rss_mb = e->kv_bytes = NAN;
    e->key_x = e->fullKV_x = e->bits_per_elem = e->tokens_generated = NAN;
    e->fp16_prefix_match = e->ppl = e->kld_mean = e->kld_median = e->kld_p99 = NAN;
    e->top1 = e->kld_full_mean = e->cosine_k = e->cosine_v = NAN;
}

void vq_result_clear(struct vq_result *e) {
    if (!e) return;
    free(e->output_preview);
    free(e->error);
    e->output_preview = e->error = NULL;
}

void vq_results_clear(struct vq_results *r) {
    if (!r) return;
    free(r->model.file);
    free(r->model.layer_window);
    for (int i = 0; i < r->protocol.n_prompts; i++) free(r->protocol.prompts[i]);
    free(r->protocol.prompts);
    free(r->protocol.corpus);
    for (int i = 0; i < r->n_results; i++) vq_result_clear(&r->results[i]);
    free(r->results);
    vq_results_init(r);
}

vq_status vq_results_add(struct vq_results *r, struct vq_result *e) {
    if (r->n_results == r->cap_results) {
        int cap = r->cap_results ? 2 * r->cap_results : 16;
        struct vq_result *n = realloc(r->results, (size_t)cap * sizeof *n);
        if (!n) return VQ_STATUS_NO_MEMORY;
        r->results = n;
        r->cap_results = cap;
    }
    r->results[r->n_results++] = *e;
    e->output_preview = e->error = NULL;
    return VQ_STATUS_OK;
}

int vq_results_find(const struct vq_results *r, const char *name) {
    for (int i = 0; i < r->n_results; i++)
        if (!strcmp(r->results[i].config.name, name)) return i;
    return -1;
}

vq_status vq_str_set(char **dst, const char *src) {
    char *s = NULL;
    if (src) {
        size_t n = strlen(src);
        s = malloc(n + 1);
        if (!s) return VQ_STATUS_NO_MEMORY;
        memcpy(s, src, n + 1);
    }
    free(*dst);
    *dst = s;
    return VQ_STATUS_OK;
}

static void copy_str(char *dst, size_t cap, const char *src) {
    size_t n = strlen(src);
    if (n >= cap) n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = 0;
}

void vq_results_stamp_time(struct vq_results *r) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(r->created_utc, sizeof r->created_utc, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void vq_results_fill_hardware(struct vq_results *r, int n_threads) {
    struct vq_results_hardware *h = &r->hardware;
    copy_str(h->cpu, sizeof h->cpu, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "model name", 10) != 0) continue;
            char *p = strchr(line, ':');
            if (!p) continue;
            p++;
            while (*p == ' ' || *p == '\t') p++;
            p[strcspn(p, "\n")] = 0;
            copy_str(h->cpu, sizeof h->cpu, p);
            break;
        }
        fclose(f);
    }
    h->cores = n_threads;
    copy_str(h->isa, sizeof h->isa, vq_isa_name(vq_isa_default()));
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    h->ram_mb = pages > 0 && psz > 0 ? (double)pages * (double)psz / (1024.0 * 1024.0) : 0;
}

/* ---- atomic write ------------------------------------------------------------------------ */

vq_status vq_write_file_atomic(const char *path, const void *data, size_t len) {
    if (!path || (!data && len)) return VQ_STATUS_INVALID_ARG;
    /* never rename over a device node, FIFO, socket or folder (nor a symlink to one) */
    VQ_RETURN_IF_ERR(vq_file_check_output(path));
    size_t pl = strlen(path);
    char *tmp = malloc(pl + 16), *dir = malloc(pl + 2);
    if (!tmp || !dir) {
        free(tmp);
        free(dir);
        return VQ_STATUS_NO_MEMORY;
    }
    memcpy(tmp, path, pl);
    memcpy(tmp + pl, ".tmp.XXXXXX", 12);
    const char *slash = strrchr(path, '/');
    if (slash == path) strcpy(dir, "/");
    else if (slash) {
        memcpy(dir, path, (size_t)(slash - path));
        dir[slash - path] = 0;
    } else strcpy(dir, ".");
    vq_status st = VQ_STATUS_IO;
    int fd = mkstemp(tmp);
    if (fd < 0) goto out;
    /* mkstemp creates 0600; give the file the usual 0666 & ~umask */
    const mode_t um = umask(0);
    umask(um);
    (void)fchmod(fd, 0666 & ~um);
    const char *p = data;
    size_t left = len;
    while (left > 0) {
        ssize_t w = results_write_fn(fd, p, left);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        p += w;
        left -= (size_t)w;
    }
    int ok = left == 0 && fsync(fd) == 0;
    if (close(fd) != 0) ok = 0;
    /* again just before the rename: the target may have changed during the write */
    if (ok && vq_file_check_output(path) != VQ_STATUS_OK) ok = 0;
    if (ok && rename(tmp, path) == 0) {
        int dfd = open(dir, O_RDONLY | O_DIRECTORY);
        if (dfd >= 0) {
            (void)fsync(dfd);
            close(dfd);
        }
        st = VQ_STATUS_OK;
    } else {
        unlink(tmp);
    }
out:
    free(tmp);
    free(dir);
    return st;
}
