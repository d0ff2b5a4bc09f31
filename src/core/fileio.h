/*
 * fileio.h — the one gate for files the library and the tools read or replace: inputs must be
 * regular files no larger than a cap stated per kind, and outputs never replace what is not a
 * regular file (a device node, a FIFO, a socket, a folder, or a symlink to one of them).
 * Not part of the public API; the tools reach it through vq_tools.h.
 *
 * Why: an atomic write renames a temp file over its target, so a character device given as an
 * output (run as root: /dev/null) would be replaced by a regular file; opening a FIFO for
 * reading waits for a writer forever; a stream such as /dev/zero read whole never ends.
 *
 * Messages: every failing call leaves a one-line reason naming the path in a thread-local
 * buffer, read with vq_file_error() (valid until the next call of this module on the thread).
 * Thread-safe otherwise (no shared state).
 */
#ifndef VQ_CORE_FILEIO_H
#define VQ_CORE_FILEIO_H

#include <stddef.h>
#include <stdint.h>
#include "veloxquant.h"

/* Size caps per kind of input, in bytes. Text corpora and prompts: 256 MiB (the longest
 * evaluation text is a few MB). results.json: 64 MiB (a thousand configs take well under
 * 1 MB). Calibration artifacts and precomputed tables: see VQ_CALIB_MAX_FILE (artifact.h).
 * Saved logits are streamed, never read whole, and have no cap. */
#define VQ_FILE_MAX_TEXT ((uint64_t)256 << 20)
#define VQ_FILE_MAX_RESULTS ((uint64_t)64 << 20)

/* The reason of the last failure of a function of this module on this thread ("" if none).
 * Library-owned, valid until the next call of this module on the same thread. */
const char *vq_file_error(void);
/* Empties vq_file_error() on this thread: for callers that fail before reaching this module
 * and must not leave an older reason to be read as theirs. */
void vq_file_error_clear(void);

/* Checks that path may be written as an output (a file created or atomically replaced):
 * its folder exists, is a folder and is writable, and path does not exist or is, after
 * following symlinks, a regular file. Returns OK, or IO with vq_file_error() naming the path
 * and the reason ("not a regular file (character device)", "is a folder", "folder ... does not
 * exist", "folder ... is not writable"); errno is set to the cause. Changes nothing on disk.
 * The atomic writers call it again just before their rename. */
vq_status vq_file_check_output(const char *path);

/* Opens path for reading without blocking (O_NONBLOCK, so a FIFO cannot stall the open; the
 * flag is then cleared), and refuses anything but a regular file no larger than max_bytes.
 * what names the kind in messages ("text", "results file"). On OK *fd is an open descriptor
 * (caller-owned: close it) and *size (may be NULL) the file's bytes. On failure returns IO
 * (cannot open, not a regular file) or RANGE (over the cap), with vq_file_error() naming the
 * path, *fd = -1 and errno set to the cause. */
vq_status vq_file_open_input(const char *path, uint64_t max_bytes, const char *what, int *fd,
                             uint64_t *size);

/* Reads a whole input (vq_file_open_input's checks) into a newly malloc'd buffer with a NUL
 * after its *len bytes (caller-owned: free it). Returns OK, IO, RANGE or NO_MEMORY, every
 * failure with vq_file_error() set and *data = NULL. */
vq_status vq_file_read_all(const char *path, uint64_t max_bytes, const char *what, char **data,
                           size_t *len);

#endif
