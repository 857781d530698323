/*
 * workload: where requests come from. A source is either a Mooncake JSONL trace (trace.c) or
 * the built-in synthetic chat workload (synth.c); the replay loop only sees this interface.
 */
#ifndef KVREG_REPLAY_WORKLOAD_H
#define KVREG_REPLAY_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>

/* One request in Mooncake form: each id names one prompt block of `block_tokens` tokens
 * (the last one may be partial), and ids are prefix-chained: two requests share id k at
 * position i only if their first (i+1) blocks are identical. */
typedef struct replay_request {
    double timestamp_ms;
    uint64_t input_length;  /* prompt tokens */
    uint64_t output_length; /* generated tokens (not registered: the traces do not name them) */
    uint64_t *ids;          /* owned by the source, valid until the next workload_next() */
    size_t n_ids;
} replay_request;

typedef struct workload workload;
struct workload {
    /* 1: *req filled; 0: end of input; -2: bad input (message already printed). */
    int (*next)(workload *w, replay_request *req);
    /* Fraction of the input consumed so far, 0..1 (for the progress bar). */
    double (*progress)(const workload *w);
    void (*close)(workload *w);
    uint64_t bad_lines; /* lines skipped by --skip-bad */
    int long_input;     /* worth a progress bar */
};

/* Real prompt tokens in block i: block_tokens, except for a partial last block. */
static inline uint64_t request_block_tokens(const replay_request *req, size_t i,
                                            uint32_t block_tokens)
{
    uint64_t start = (uint64_t)i * block_tokens;
    uint64_t rest = req->input_length > start ? req->input_length - start : 0;
    return rest < block_tokens ? rest : block_tokens;
}

static inline int workload_next(workload *w, replay_request *req) { return w->next(w, req); }

#endif
