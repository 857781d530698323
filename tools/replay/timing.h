/*
 * timing: a small engine timing model that turns a routed trace (each request's worker, arrival
 * time and cache hits) into time to first token and throughput. It is a model, not a
 * measurement: its defaults are assumptions, chosen so that the Mooncake traces keep 8 workers
 * busy but not saturated; every one can be changed on the command line.
 *
 * Each worker runs at most `batch` requests at once (continuous batching); a request waits,
 * first come first served in trace order, until one of its worker's slots is free. Once
 * admitted, its prefill runs on the worker's one prefill unit, after the prefills admitted
 * before it:
 *   prefill time = uncached prompt tokens / prefill_tps + G2-hit tokens / onboard_tps
 * (G1 hits cost nothing; G2 hits are copied back to the GPU). The first token comes when its
 * prefill ends: TTFT = prefill end - arrival. It then decodes its output at decode_tps tokens
 * per second (each request's own rate, independent of the batch below the limit) and frees
 * its slot at the end. Throughput = output tokens / (last end - first arrival).
 * speedup > 1 replays the trace faster (arrival times divided by it), to load the workers more.
 */
#ifndef KVREG_REPLAY_TIMING_H
#define KVREG_REPLAY_TIMING_H

#include <stddef.h>
#include <stdint.h>

typedef struct timing_model {
    double prefill_tps; /* uncached prompt tokens per second, per worker */
    double onboard_tps; /* G2-hit tokens per second copied back to the GPU, per worker */
    double decode_tps;  /* output tokens per second, per request */
    uint32_t batch;     /* requests a worker runs at once */
    double speedup;     /* arrival times are divided by it (1: the trace's own times) */
} timing_model;

/* Assumed defaults (see above; not measured on any engine). */
#define TIMING_DEFAULT_PREFILL_TPS 8000.0
#define TIMING_DEFAULT_ONBOARD_TPS 100000.0
#define TIMING_DEFAULT_DECODE_TPS 30.0
#define TIMING_DEFAULT_BATCH 64u

void timing_defaults(timing_model *m);

typedef struct timing_request {
    double arrival_s;
    uint32_t worker;
    uint64_t uncached_tokens, g2_tokens, output_tokens;
} timing_request;

typedef struct timing_result {
    double ttft_p50_s, ttft_p99_s, ttft_mean_s; /* nearest-rank percentiles */
    double span_s;                              /* last end - first arrival */
    double output_tps, requests_per_s;          /* over span_s (0 when it is 0) */
} timing_result;

/* reqs[0..n) in trace order, workers < n_workers. 0, or -1 when memory runs out. */
int timing_run(const timing_model *m, uint32_t n_workers, const timing_request *reqs, size_t n,
               timing_result *out);

#endif
