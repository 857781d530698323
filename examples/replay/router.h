/*
 * router: the cluster replay's routing policies. Each request goes to one of n workers:
 *   kv            the best tier-weighted prefix match in the index (kvreg_index_query_hashes)
 *                 less a load term, ties to the least loaded worker, then the lowest number;
 *   random        uniformly at random (splitmix64, fixed seed: runs are reproducible);
 *   round_robin   0, 1, ..., n-1, 0, ...;
 *   least_loaded  the fewest requests in flight, ties to the lowest number.
 * Load term of kv: each request a worker has in flight beyond the least loaded worker costs
 * (mean prompt blocks so far / requests in flight per worker) blocks of match, so a worker
 * with a long match but a full queue loses to one nearly as good and idle.
 */
#ifndef KVREG_REPLAY_ROUTER_H
#define KVREG_REPLAY_ROUTER_H

#include <stddef.h>
#include <stdint.h>

#include <kvreg_index.h>

#define ROUTER_KV 0
#define ROUTER_RANDOM 1
#define ROUTER_ROUND_ROBIN 2
#define ROUTER_LEAST_LOADED 3

/* 0 and *policy set, or -1 for an unknown name. */
int router_policy_parse(const char *name, int *policy);
const char *router_policy_name(int policy);

typedef struct router {
    int policy;
    uint32_t n_workers;
    uint64_t rng;
    uint32_t next_rr;
    kvreg_index_match *matches; /* room for n_workers */
    double *score;              /* per worker, scratch */
} router;

/* 0, or -1 when memory runs out. */
int router_init(router *r, int policy, uint32_t n_workers, uint64_t seed);
void router_free(router *r);

/* The worker for a request whose router hashes are hashes[0..n). inflight[w]: requests worker
 * w has in flight; load_cost: blocks of match one extra request in flight costs (kv only).
 * idx is queried for every policy (the query latency is part of the report), but only kv
 * uses the answer; *query_ns gets the query's time. -1 on a library error (printed). */
int router_pick(router *r, const kvreg_index *idx, const uint64_t *hashes, size_t n,
                const uint32_t *inflight, double load_cost, uint32_t *worker, double *query_ns);

#endif
