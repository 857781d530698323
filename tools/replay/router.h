/*
 * router: the cluster replay's routing policies. Each request goes to one of n workers:
 *   kv            the best tier-weighted prefix match in the index (kvreg_index_query_hashes)
 *                 less a load term, ties to the least loaded worker, then the lowest number;
 *   random        uniformly at random (splitmix64, fixed seed: runs are reproducible);
 *   round_robin   0, 1, ..., n-1, 0, ...;
 *   least_loaded  the fewest requests in flight, ties to the lowest number;
 *   kv-load       libkvreg's router (kvreg_router_select, KVREG_ROUTER_POLICY_COST): Dynamo's
 *                 cost, overlap weight x prefill blocks + active blocks, the active blocks from
 *                 the router's own record of the requests in flight (prompt and output blocks);
 *   llm-d         libkvreg's router with KVREG_ROUTER_POLICY_WEIGHTED: llm-d's prefix and load
 *                 scorers, weighted and summed.
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
#define ROUTER_KV_LOAD 4
#define ROUTER_LLMD 5
#define ROUTER_COUNT 6

/* The knobs of kv-load and llm-d (kvreg_router_config's); router_params_defaults gives the
 * library's defaults. */
typedef struct router_params {
    double overlap_weight, temperature, prefix_weight, load_weight;
    double cpu_weight; /* the share of a block matched only in G2 (CPU) that counts as cached */
} router_params;

void router_params_defaults(router_params *p);

/* 0 and *policy set, or -1 for an unknown name. */
int router_policy_parse(const char *name, int *policy);
const char *router_policy_name(int policy);
/* A comma-separated list of policy names, each at most once, into policies[0..*n) (room for
 * ROUTER_COUNT); 0, or -1 after printing what is wrong. */
int router_policy_list(const char *list, int *policies, size_t *n);

typedef struct router {
    int policy;
    uint32_t n_workers;
    uint64_t rng;
    uint32_t next_rr;
    kvreg_index_match *matches; /* room for n_workers */
    double *score;              /* per worker, scratch */
    kvreg_router *lib;          /* kv-load and llm-d; NULL for the others */
    uint64_t *pending;          /* kv-load / llm-d: ids of the requests in flight, oldest first */
    size_t pending_cap, pending_head, pending_len;
    uint64_t next_id;
} router;

/* 0, or -1 when memory runs out or the library refuses the parameters (printed). params NULL:
 * the defaults. */
int router_init(router *r, int policy, uint32_t n_workers, uint64_t seed,
                const router_params *params);
void router_free(router *r);

/* The worker for a request whose router hashes are hashes[0..n). inflight[w]: requests worker
 * w has in flight; load_cost: blocks of match one extra request in flight costs (kv only).
 * idx is queried for every policy (the query latency is part of the report), but only kv
 * uses the answer; *query_ns gets the query's time. -1 on a library error (printed). */
int router_pick(router *r, const kvreg_index *idx, const uint64_t *hashes, size_t n,
                const uint32_t *inflight, double load_cost, uint32_t *worker, double *query_ns);

/* The request just routed went to worker w and holds `blocks` blocks while it runs; the
 * oldest request still in flight finished (the cluster retires requests in dispatch order).
 * Only kv-load and llm-d keep this record (in the library); 0 or -1 (printed). */
int router_dispatched(router *r, uint32_t w, uint64_t blocks);
int router_retired(router *r);

#endif
