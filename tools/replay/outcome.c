#include "outcome.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cluster_record_begin(cluster_outcome *out, const cache_stats *st)
{
    if (!out)
        return 0;
    out->before_g1 = st->hit_tokens_g1;
    out->before_g2 = st->hit_tokens_g2;
    return 0;
}

int cluster_record_end(cluster_outcome *out, const cache_stats *st, const replay_request *req,
                       uint32_t worker)
{
    timing_request *q;
    uint64_t g1, g2;
    if (!out)
        return 0;
    if (out->n_reqs == out->cap) {
        size_t cap = out->cap ? 2 * out->cap : 4096;
        timing_request *p = realloc(out->reqs, cap * sizeof *p);
        if (!p) {
            fprintf(stderr, "kvreg-replay: out of memory\n");
            return -1;
        }
        out->reqs = p;
        out->cap = cap;
    }
    g1 = st->hit_tokens_g1 - out->before_g1;
    g2 = st->hit_tokens_g2 - out->before_g2;
    q = &out->reqs[out->n_reqs++];
    q->arrival_s = req->timestamp_ms / 1000.0;
    q->worker = worker;
    q->g2_tokens = g2;
    q->uncached_tokens = req->input_length > g1 + g2 ? req->input_length - g1 - g2 : 0;
    q->output_tokens = req->output_length;
    return 0;
}

void cluster_outcome_free(cluster_outcome *out)
{
    free(out->requests_per_worker);
    free(out->reqs);
    memset(out, 0, sizeof *out);
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double nearest_rank_us(const double *sorted_ns, uint64_t n, double q)
{
    uint64_t k = (uint64_t)(q * (double)n + 0.999999);
    if (!n)
        return 0.0;
    k = k < 1 ? 1 : k > n ? n : k;
    return sorted_ns[k - 1] / 1000.0;
}

int cluster_outcome_keep(cluster_outcome *out, const report *r, cluster_report *cr)
{
    out->st = r->st;
    out->workers = cr->workers;
    out->index_agrees = cr->index_agrees;
    out->requests_per_worker = malloc(cr->workers * sizeof *out->requests_per_worker);
    if (!out->requests_per_worker) {
        fprintf(stderr, "kvreg-replay: out of memory\n");
        return -1;
    }
    memcpy(out->requests_per_worker, cr->requests_per_worker,
           cr->workers * sizeof *out->requests_per_worker);
    qsort(cr->query_ns, cr->n_queries, sizeof *cr->query_ns, by_value);
    out->query_p50_us = nearest_rank_us(cr->query_ns, cr->n_queries, 0.50);
    out->query_p99_us = nearest_rank_us(cr->query_ns, cr->n_queries, 0.99);
    return 0;
}
