/*
 * cluster_report: what --workers adds to kvreg-replay's report. The single-engine report
 * (report.c) is printed first with the cluster's totals, so --json keeps every field it has
 * (hit_rate_blocks.total is the cluster's total hit rate); a "cluster" object (JSON) or section
 * (text) follows.
 */
#ifndef KVREG_REPLAY_CLUSTER_REPORT_H
#define KVREG_REPLAY_CLUSTER_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include "feed.h"
#include "report.h"
#include "zmq_feed.h"

typedef struct cluster_report {
    uint32_t workers;
    const char *router, *transport;
    uint64_t *requests_per_worker;
    cache_stats shared;            /* the shared cache of the same total size */
    uint64_t shared_g1, shared_g2; /* its capacities (CACHE_UNLIMITED, or 0 for no G2) */
    uint64_t index_entries, index_memory, index_bytes_per_entry, index_workers;
    double *query_ns;              /* one per request, sorted by cluster_report_print */
    uint64_t n_queries;
    feed_stats feed;
    const zmq_feed_stats *zmq;     /* --transport zmq; NULL for inproc */
    const struct nats_cluster_stats *nats; /* --transport nats (nats_cluster.h); NULL otherwise */
    int index_agrees; /* the index holds exactly the workers' blocks, tier by tier */
} cluster_report;

void cluster_report_print(FILE *out, int json, const report *r, cluster_report *c);

#endif
