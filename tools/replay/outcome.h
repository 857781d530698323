/*
 * outcome: one cluster run's results kept for kvreg-replay --router LIST (compare.c) instead of
 * printed: the totals, the requests each worker got, and per request what the engine timing
 * model (timing.h) needs: arrival, worker, uncached and G2-hit prompt tokens, output tokens.
 */
#ifndef KVREG_REPLAY_OUTCOME_H
#define KVREG_REPLAY_OUTCOME_H

#include <stddef.h>
#include <stdint.h>

#include "cache.h"
#include "cluster_report.h"
#include "report.h"
#include "timing.h"
#include "workload.h"

typedef struct cluster_outcome {
    cache_stats st;                /* the cluster's totals */
    uint32_t workers;
    uint64_t *requests_per_worker; /* workers of them */
    double query_p50_us, query_p99_us;
    int index_agrees;
    timing_request *reqs;
    size_t n_reqs, cap;
    uint64_t before_g1, before_g2; /* the engine's hit tokens before the request (record_begin) */
} cluster_outcome;

/* Around one request's replay on an engine whose stats are *st; both NULL-safe on out (then
 * they do nothing). 0, or -1 when memory runs out (printed). */
int cluster_record_begin(cluster_outcome *out, const cache_stats *st);
int cluster_record_end(cluster_outcome *out, const cache_stats *st, const replay_request *req,
                       uint32_t worker);
/* At the end of the run: the totals and per-worker counts (copied), the query latency
 * percentiles. 0, or -1 when memory runs out (printed). */
int cluster_outcome_keep(cluster_outcome *out, const report *r, cluster_report *cr);
void cluster_outcome_free(cluster_outcome *out);

#endif
