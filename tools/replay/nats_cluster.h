/*
 * nats_cluster: kvreg-replay --workers N --transport nats --routers R. The workers' events go
 * through NATS JetStream as real engines' would (kvreg_nats.h), and R router replicas each
 * read the whole stream into their own kvreg_index:
 *  - each worker has one registry for both its tiers (KVREG_EVENTS_PER_TIER, so every event
 *    names its tier), delivering in POLL mode to its own kvreg_nats_publisher: worker id w,
 *    dp rank 0, vLLM format, one stream for all of them;
 *  - each replica is a kvreg_nats_consumer (durable "kvreg-replay-<k>") applying to its index;
 *  - requests are routed by the live replicas in turn (request i by the (i mod live)-th), so
 *    a replica whose index differed would route differently from the in-process run, which
 *    is run first (cluster_collect) to give the reference decisions.
 * Determinism: before each routing decision, nats_cluster_sync() waits until every publisher
 * has published (and the stream acknowledged) every event its registry emitted, then runs
 * each live replica until it has applied every batch published. Any LOSS, RESET, MALFORMED
 * or APPLY notice fails the run.
 * --kill-router: at a third of the requests the last replica is freed (consumer and index)
 * and replica 0 writes a snapshot (kvreg_nats_consumer_snapshot, into an object-store bucket
 * named as the run's stream); at two thirds the killed one starts again with a new index: its
 * start() restores that snapshot and it reads the stream after it; once caught up
 * its digest is compared with replica 0's. A restore that found no valid snapshot reads the
 * whole stream instead (the report says which).
 * Digest: kvreg_index_digest (the checksum the index's dump would end with): equal for equal
 * contents (every worker with the seq its next batch must carry, its entries and their
 * tiers), whatever order the events came in.
 */
#ifndef KVREG_REPLAY_NATS_CLUSTER_H
#define KVREG_REPLAY_NATS_CLUSTER_H

#include <stdint.h>

#include <kvreg.h>
#include <kvreg_index.h>

#include "cli.h"
#include "feed.h"
#include "outcome.h"

#define NATS_CLUSTER_MAX_ROUTERS 64

typedef struct nats_cluster nats_cluster;

typedef struct nats_cluster_stats {
    const char *url;           /* the server used */
    int own_server;            /* started by kvreg-replay */
    const char *stream;
    uint32_t routers, publishers;
    uint64_t batches_published, batches_acked, publish_retries, publish_duplicates;
    uint64_t messages, batches_applied; /* summed over the replicas (the restored one's
                                            second life included) */
    uint64_t syncs;
    uint64_t events0;          /* decoded events replica 0 applied ... */
    double run0_s;             /* ... in this long in kvreg_nats_consumer_run (fetch, decode,
                                  apply, ack) */
    uint64_t digest[NATS_CLUSTER_MAX_ROUTERS]; /* at the end */
    int digests_equal;
    uint64_t compared, routing_differs; /* requests routed, and those routed otherwise than
                                           by the in-process run */
    int killed;                /* the replica killed and restored, -1 for none */
    uint64_t kill_at, restore_at;       /* request numbers */
    double restore_s;          /* restore to caught up */
    uint64_t restore_batches;  /* batches it applied to catch up (after the snapshot) */
    uint64_t snapshot_seq;     /* stream sequence replica 0's snapshot covers */
    uint64_t restored;         /* 1: restored from that snapshot; 0: from the stream */
    int restore_digest_equal;  /* equal to replica 0's once caught up */
} nats_cluster_stats;

/* A new, empty index configured as the cluster's. */
typedef int (*nats_index_fn)(void *ctx, kvreg_index **out);

/* 1 when the loaded libkvreg has NATS (kvreg_nats_available). */
int nats_cluster_available(void);
/* The registries' delivery: POLL. */
int nats_cluster_configure(kvreg_config *cfg);

/* The in-process run of the same workload (opened again), whose per-request workers are the
 * reference. 0, or a process exit status after printing why. */
int nats_cluster_reference(const replay_options *o, cluster_outcome *ref);

/* Start (or use) the server, the n_workers publishers of regs[0 .. n_workers) and the
 * replicas. 0, or -1 after printing why (nothing is left running). */
int nats_cluster_open(nats_cluster **out, const replay_options *o, uint32_t n_workers,
                      kvreg_registry **regs, uint64_t total_requests,
                      nats_index_fn mk, void *mk_ctx);
/* Before request number i: kill or restore a replica when it is time. 0 or -1 (printed). */
int nats_cluster_before_request(nats_cluster *z, uint64_t i);
/* The index request i is routed by. */
const kvreg_index *nats_cluster_route_index(const nats_cluster *z, uint64_t i);
/* Count request i's decision against the in-process one. */
void nats_cluster_routed(nats_cluster *z, int same);
/* Wait until every live replica has applied every event emitted. 0, or -1 (printed). */
int nats_cluster_sync(nats_cluster *z);
/* Live replica k's index (NULL when k is dead or out of range). */
kvreg_index *nats_cluster_index(const nats_cluster *z, uint32_t k);
/* After the last sync: digests (stats), and the publishers' and consumers' counters; 0 when
 * every check passed, -1 after printing the first mismatch. */
int nats_cluster_finish(nats_cluster *z, nats_cluster_stats *out);
/* Stop and free everything, the server too. NULL-safe. */
void nats_cluster_close(nats_cluster *z);

#endif
