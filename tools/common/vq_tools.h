/*
 * vq_tools.h — the one internal header of tools/ (the CLI) and bench/: the parts of the
 * library they use beyond the public API (veloxquant.h, vq_engine.h), in the way llama.cpp's
 * tools use llama.h plus common/. Not installed, not stable: it changes with the tools.
 *
 * Rules (tests/repo/layers.sh enforces them):
 *   - a file in tools/ or bench/ includes system headers, veloxquant.h, vq_engine.h, this
 *     header and headers of its own folder; nothing from src/ directly;
 *   - this header includes only the modules listed below, from src/core, src/engine,
 *     src/artifact and src/eval, and the headers of the tools' static library next to it
 *     (tools/common/ headers: the parts that need the tools' dependencies, such as cJSON, which
 *     the library does not link). Codecs, the cache and calibration numerics (src/codecs,
 *     src/cache, src/calib) are reached only through veloxquant.h: their vtables, kernels
 *     and policy helpers stay internal (method traits: vq_method_info_get / vq_method_flags).
 * Each module's header carries the contract of every function (inputs, return, ownership,
 * thread safety); the summary here says what the tools take from it.
 */
#ifndef VQ_TOOLS_H
#define VQ_TOOLS_H

#include "veloxquant.h"
#include "vq_engine.h"

/* Model identity: SHA-256 of a model file (vq_sha256_file; FIFOs and other non-regular files
 * are refused without blocking) and hex parsing, for results.json and artifact lookup. */
#include "core/sha256.h"

/* The gate for files: inputs opened without blocking, regular files only, under a cap per kind
 * (vq_file_open_input / vq_file_read_all); outputs checked before a run (vq_file_check_output:
 * never replace a device, FIFO, socket or folder); the reason of a refusal in vq_file_error(). */
#include "core/fileio.h"

/* GGUF metadata and tensor directory (`info`), the GGUF handle of a loaded model
 * (vq_model_gguf), the tokenizer with its streaming detokenizer, and chat templates. */
#include "engine/gguf.h"
#include "engine/tokenizer.h"
#include "engine/chat.h"

/* The weight kernels' tables, block layouts and 16-row repacking (bench/bench_kquant.c). */
#include "engine/ggml.h"

/* Calibration artifacts attached to a cache configuration (vq_calib_attach_diag / _sets) and
 * the precomputed codebook / rotation tables (`precompute`). */
#include "artifact/artifact.h"

/* Evaluation: chunked perplexity and probe prompts (ppl.h), saved top-k logits (logits.h),
 * the analytic KV-memory estimate and GGUF KV geometry (kvmem.h), results.json in memory
 * (results.h), the attention observer of `generate --observe` (observer.h), codec cosine on
 * synthetic vectors (vecq.h). */
#include "eval/kvmem.h"
#include "eval/logits.h"
#include "eval/observer.h"
#include "eval/ppl.h"
#include "eval/results.h"
#include "eval/vecq.h"

/* The tools' library (the .c files of tools/common/, built as the static library vq_tools
 * with cJSON): results.json text (reader, strict schema checks, writer) and the observer's
 * JSON export. */
#include "observer_json.h"
#include "results_json.h"

#endif
