/* fileio.c — the gate for inputs (regular files under a cap, opened without blocking) and
 * outputs (never replacing what is not a regular file). Contracts in fileio.h. */
#include "core/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"

static _Thread_local char err_[1024];

const char *vq_file_error(void) { return err_; }

void vq_file_error_clear(void) { err_[0] = 0; }

static void set_err(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_, sizeof err_, fmt, ap);
    va_end(ap);
}

/* What a non-regular file is, for messages. */
static const char *kind_of(mode_t m) {
    return S_ISDIR(m)  ? "a folder"
         : S_ISFIFO(m) ? "a FIFO"
         : S_ISCHR(m)  ? "a character device"
         : S_ISBLK(m)  ? "a block device"
         : S_ISSOCK(m) ? "a socket"
                       : "not a plain file";
}

vq_status vq_file_check_output(const char *path) {
    err_[0] = 0;
    if (!path || !*path) {
        set_err("empty output path");
        errno = EINVAL;
        return VQ_STATUS_INVALID_ARG;
    }
    struct stat sb;
    if (stat(path, &sb) == 0) {
        if (S_ISDIR(sb.st_mode)) {
            set_err("cannot write '%s': it is a folder, not a regular file", path);
            errno = EISDIR;
            return VQ_STATUS_IO;
        }
        if (!S_ISREG(sb.st_mode)) {
            set_err("refusing to replace '%s': not a regular file (%s)", path, kind_of(sb.st_mode));
            errno = EINVAL;
            return VQ_STATUS_IO;
        }
    } else if (errno != ENOENT) {
        const int e = errno;
        set_err("cannot write '%s': %s", path, strerror(e));
        errno = e;
        return VQ_STATUS_IO;
    } else {
        struct stat lb; /* a dangling symlink: the rename would replace the link, refuse it too */
        if (lstat(path, &lb) == 0 && S_ISLNK(lb.st_mode)) {
            set_err("refusing to write '%s': a symlink to a missing file", path);
            errno = ENOENT;
            return VQ_STATUS_IO;
        }
    }
    /* the folder: exists, is a folder, writable (the temp file is created there) */
    const size_t n = strlen(path);
    char *dir = malloc(n + 2);
    if (!dir) {
        set_err("out of memory");
        errno = ENOMEM;
        return VQ_STATUS_NO_MEMORY;
    }
    memcpy(dir, path, n + 1);
    char *sl = strrchr(dir, '/');
    if (sl == dir) sl[1] = 0;
    else if (sl) *sl = 0;
    else strcpy(dir, ".");
    vq_status st = VQ_STATUS_OK;
    int e = 0;
    if (stat(dir, &sb) != 0) {
        e = errno;
        set_err("cannot write '%s': folder '%s' %s", path, dir,
                e == ENOENT ? "does not exist" : strerror(e));
        st = VQ_STATUS_IO;
    } else if (!S_ISDIR(sb.st_mode)) {
        e = ENOTDIR;
        set_err("cannot write '%s': '%s' is not a folder", path, dir);
        st = VQ_STATUS_IO;
    } else if (access(dir, W_OK | X_OK) != 0) {
        e = errno;
        set_err("cannot write '%s': folder '%s' is not writable (%s)", path, dir, strerror(e));
        st = VQ_STATUS_IO;
    }
    free(dir);
    if (st != VQ_STATUS_OK) errno = e;
    return st;
}

vq_status vq_file_open_input(const char *path, uint64_t max_bytes, const char *what, int *fd,
                             uint64_t *size) {
    err_[0] = 0;
    if (fd) *fd = -1;
    if (size) *size = 0;
    if (!what) what = "file";
    if (!path || !*path || !fd) {
        set_err("empty %s path", what);
        errno = EINVAL;
        return VQ_STATUS_INVALID_ARG;
    }
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever */
    const int f = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (f < 0) {
        const int e = errno;
        set_err("cannot open %s '%s': %s", what, path, strerror(e));
        errno = e;
        return VQ_STATUS_IO;
    }
    struct stat sb;
    if (fstat(f, &sb) != 0) {
        const int e = errno;
        close(f);
        set_err("cannot stat %s '%s': %s", what, path, strerror(e));
        errno = e;
        return VQ_STATUS_IO;
    }
    if (!S_ISREG(sb.st_mode)) {
        close(f);
        set_err("cannot read %s '%s': not a regular file (%s)", what, path, kind_of(sb.st_mode));
        errno = S_ISDIR(sb.st_mode) ? EISDIR : EINVAL;
        return VQ_STATUS_IO;
    }
    if ((uint64_t)sb.st_size > max_bytes) {
        close(f);
        set_err("%s '%s' is %llu bytes, over the limit of %llu bytes for a %s", what, path,
                (unsigned long long)sb.st_size, (unsigned long long)max_bytes, what);
        errno = EFBIG;
        return VQ_STATUS_RANGE;
    }
    const int fl = fcntl(f, F_GETFL);
    if (fl >= 0) (void)fcntl(f, F_SETFL, fl & ~O_NONBLOCK);
    *fd = f;
    if (size) *size = (uint64_t)sb.st_size;
    return VQ_STATUS_OK;
}

vq_status vq_file_read_all(const char *path, uint64_t max_bytes, const char *what, char **data,
                           size_t *len) {
    if (data) *data = NULL;
    if (len) *len = 0;
    if (!data || !len) {
        err_[0] = 0;
        set_err("invalid argument");
        return VQ_STATUS_INVALID_ARG;
    }
    int fd;
    uint64_t sz;
    VQ_RETURN_IF_ERR(vq_file_open_input(path, max_bytes, what, &fd, &sz));
    if (!what) what = "file";
    char *buf = malloc((size_t)sz + 1);
    if (!buf) {
        close(fd);
        set_err("out of memory reading %s '%s' (%llu bytes)", what, path, (unsigned long long)sz);
        errno = ENOMEM;
        return VQ_STATUS_NO_MEMORY;
    }
    size_t off = 0;
    /* the size may change under us: read to the cap + 1 at most, stop at EOF */
    while (off < (size_t)sz) {
        const ssize_t r = read(fd, buf + off, (size_t)sz - off);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            const int e = errno;
            close(fd);
            free(buf);
            set_err("cannot read %s '%s': %s", what, path, strerror(e));
            errno = e;
            return VQ_STATUS_IO;
        }
        if (r == 0) break;
        off += (size_t)r;
    }
    close(fd);
    buf[off] = 0;
    *data = buf;
    *len = off;
    return VQ_STATUS_OK;
}
