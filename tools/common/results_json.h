/*
 * results_json.h — results.json as text (schema VQ_RESULTS_SCHEMA, docs/results.schema.json):
 * the writer, the strict reader and file helpers for the in-memory form of src/eval/results.h.
 * Part of the tools' static library (tools/common/, linked by the CLI, bench and tests, with
 * cJSON); the library itself has no JSON dependency. Ownership of struct vq_results as in
 * results.h. No function here keeps global state; distinct objects may be used from distinct
 * threads.
 */
#ifndef VQ_TOOLS_RESULTS_JSON_H
#define VQ_TOOLS_RESULTS_JSON_H

#include <stddef.h>

#include "vq_tools.h"

/* Serialises to a newly malloc'd, NUL-terminated JSON text (pretty-printed); NULL on OOM.
 * NaN metrics are left out. The caller frees the text. */
char *vq_results_to_json(const struct vq_results *r);
/* Parses JSON text into *r (which is first initialised). Strict: the schema tag must be
 * VQ_RESULTS_SCHEMA, required fields must be present with the right types, numbers finite
 * (1e999 is named as beyond the double range), strings with the schema's minLength non-empty,
 * hardware.isa one of its enum, config names unique, and nothing but white space may follow
 * the object (docs/results.schema.json in full). On failure returns BAD_FORMAT (or
 * NO_MEMORY), writes a reason into err (errlen bytes, may be NULL) and leaves *r empty. */
vq_status vq_results_from_json(const char *text, size_t len, struct vq_results *r, char *err,
                               size_t errlen);
/* Reads a file with vq_results_from_json. The file must be a regular file of at most
 * VQ_FILE_MAX_RESULTS bytes, opened without blocking (vq_file_read_all): IO when it cannot be
 * opened or is not a regular file (errno the cause: ENOENT when missing), RANGE when over the
 * cap, NO_MEMORY. err (may be NULL) always receives a message on failure. */
vq_status vq_results_read(const char *path, struct vq_results *r, char *err, size_t errlen);
/* Writes the JSON (ending in a newline) atomically (vq_write_file_atomic). */
vq_status vq_results_write(const struct vq_results *r, const char *path);

#endif
