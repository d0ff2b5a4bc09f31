/* serve.h — `veloxquant serve` internals (tools/ only): the scheduler that runs requests on a
 * fixed set of slots (one context each) with continuous batching and admission by KV memory
 * (serve_sched.c), shared with the HTTP front end (cmd_serve.c).
 *
 * Threads: the HTTP library runs one thread per connection; each request is handed to the
 * scheduler thread (srv_submit), which alone touches the model's contexts. A request is shared
 * by the two sides through a reference count; its fields below the mutex are read and written
 * under it, and its condition variable wakes the connection thread when text or the end
 * arrives. */
#ifndef VQ_SERVE_H
#define VQ_SERVE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "vq_engine.h"

#define SRV_MAX_STOPS 4

/* One completion request (chat or text), from parse to response. */
struct srv_req {
    /* set by the HTTP side before srv_submit, read-only afterwards */
    int32_t *ids; /* (n_ids) prompt tokens */
    int64_t n_ids;
    struct vq_gen_params gp; /* sampling, max_tokens, stops (pointing into stop_buf) */
    char *stops[SRV_MAX_STOPS];
    size_t charge;   /* KV bytes charged against the budget while it runs */
    double deadline; /* monotonic seconds after which it is cancelled */
    /* shared, under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;
    int cancelled; /* the client left or the deadline passed: the scheduler drops it */
    int done;      /* the scheduler finished it (result below) */
    char *pend;    /* streamed text not yet sent (malloc), pend_len bytes */
    size_t pend_len, pend_cap;
    /* result (done) */
    int status;    /* vq_status of the generation */
    char err[256]; /* message when status != OK */
    char *text;    /* whole text (malloc) */
    size_t text_len;
    int64_t n_prompt, n_generated;
    enum vq_finish_reason finish;
    double t_first; /* monotonic time of the first text (time to first token), 0 if none */
};

/* Server-wide settings the scheduler needs. */
struct srv_config {
    const vq_model *m;
    vq_ctx **slots; /* (n_slots) contexts, created by the caller, same KV config */
    int n_slots;
    size_t budget;     /* KV bytes at most charged (active charges + idle slots' caches) */
    int queue_max;     /* requests waiting at most */
    int prefill_chunk; /* prompt tokens per prefill step (a multiple of n_batch) */
};

/* Counters for /metrics (a snapshot, srv_metrics). */
struct srv_metrics {
    uint64_t requests, prompt_tokens, completion_tokens, prefill_tokens, decode_tokens;
    double prefill_s, decode_s;
    int active, queued;
    size_t kv_in_use, kv_budget;
    int max_active;                     /* the most sequences that ran at once */
    uint64_t decode_steps, decode_rows; /* batched steps and the rows they carried */
};

struct srv;
/* Starts the scheduler thread on cfg (copied; slots borrowed until srv_free). NULL on failure. */
struct srv *srv_create(const struct srv_config *cfg);
/* Stops the scheduler (requests still queued or running are finished with status CANCELLED
 * semantics: done with finish CALLBACK) and frees it. */
void srv_free(struct srv *s);
/* New request with one reference (the caller's). NULL when out of memory. */
struct srv_req *srv_req_new(void);
/* Drops a reference; the last frees the request. */
void srv_req_unref(struct srv_req *r);
/* Queues r (the scheduler takes its own reference). Returns 0, -1 when the queue is full
 * (503), -2 when the charge exceeds the whole budget (it can never run), -3 when draining. */
int srv_submit(struct srv *s, struct srv_req *r);
/* KV bytes of a sequence of n tokens in a slot's cache (exact, vq_kv_estimate; configs with
 * outlier tokens as if every token were one); SIZE_MAX when it cannot be estimated. */
size_t srv_kv_bytes(const struct srv *s, int64_t n);
/* Snapshot of the counters. */
void srv_metrics(struct srv *s, struct srv_metrics *m);
/* Stops admitting (srv_submit returns -3) and returns the requests queued or running. */
int srv_drain(struct srv *s);
/* Requests queued or running now. */
int srv_busy(struct srv *s);
/* Monotonic clock. */
double srv_now(void);

#endif
