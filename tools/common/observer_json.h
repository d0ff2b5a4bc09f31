/*
 * observer_json.h — the observation JSON of `veloxquant generate --observe` (schema
 * VQ_OBSERVE_SCHEMA, docs/EVALUATION.md "generate --observe") from an observer of
 * src/eval/observer.h. Part of the tools' static library (tools/common/, with cJSON); the
 * library's observer computes the numbers and needs no JSON package.
 */
#ifndef VQ_TOOLS_OBSERVER_JSON_H
#define VQ_TOOLS_OBSERVER_JSON_H

#include <cjson/cJSON.h>

#include "vq_tools.h"

/* Builds the observation JSON: schema, sampling, n_passes, n_tokens, observer_bytes, layers[]
 * (per-layer stats, per-head cosines, top channels), mean (means over layers of each per-layer
 * number) and worst_layers. Non-finite numbers are written as null. The caller adds
 * model/config fields and owns the result (cJSON_Delete). NULL on NO_MEMORY. o is only read;
 * do not call it while the observer's context evaluates. */
cJSON *vq_observer_to_json(const vq_observer *o);

#endif
