/*
 * zmq_feed: kvreg-replay --workers N --transport zmq. The workers' events reach the router's
 * index over ZeroMQ on loopback, as they would from real engines (kvreg_net.h):
 *  - each worker's registries (one per tier, see cluster.h) deliver in POLL mode to a
 *    kvreg_publisher of their own: vLLM format, bound to tcp://127.0.0.1:* (an ephemeral port)
 *    with a replay endpoint there too. Two streams per worker, one per tier (vLLM has one per
 *    engine with both media in it: our engines keep each tier in its own registry);
 *  - one kvreg_subscriber, connected to every publisher, run on the replay's thread; its batch
 *    callback applies each decoded batch to the index as worker (w, dp rank 0). The index's
 *    sequence number is the worker's count of batches applied (its two streams merged): each
 *    stream's own order and gaps are the subscriber's job (gaps are replayed; a LOSS, RESET or
 *    MALFORMED notice fails the run).
 * Determinism: routing reads the index, so zmq_feed_sync() runs the subscriber until every
 * event the registries have emitted is in the index (each Register / Remove is one block hash
 * on the wire), bounded by a timeout that fails the run. --transport inproc and zmq then route
 * identically. Before the workload, zmq_feed_open() waits until each subscription is live (a
 * PUB socket drops what it sends before its subscriber is connected): it sends Cleared probes
 * (kvreg_registry_clear on the still empty registries) until one of each publisher arrives.
 */
#ifndef KVREG_REPLAY_ZMQ_FEED_H
#define KVREG_REPLAY_ZMQ_FEED_H

#include <stdint.h>

#include <kvreg.h>
#include <kvreg_index.h>

#include "feed.h"

typedef struct zmq_feed zmq_feed;

typedef struct zmq_feed_stats {
    uint32_t publishers;
    uint64_t batches;          /* batches the subscriber delivered (probes included) */
    uint64_t replayed;         /* of those, from replays (late joins, gaps) */
    uint64_t probes;           /* Cleared probes sent before the run */
    uint64_t gaps;             /* GAP notices */
    uint64_t syncs;            /* waits for the index to catch up (one per request, and one at
                                  the end) */
} zmq_feed_stats;

/* 1 when the loaded libkvreg has the ZeroMQ publisher and subscriber (KVREG_FEATURE_ZMQ). */
int zmq_feed_available(void);

/* Make the registries' config deliver in POLL mode (for the publishers). */
int zmq_feed_configure(kvreg_config *cfg);

/* Publish regs[0 .. 2 n_workers) (worker w's tiers are regs[2w], regs[2w + 1]) and subscribe
 * to them all; events go into idx and are counted in st (registers, removes, events,
 * payloads, wire_events, flagged, apply_s). Returns once every subscription is live. 0, or
 * -1 after printing why (*out is then NULL). */
int zmq_feed_open(zmq_feed **out, kvreg_index *idx, uint32_t n_workers, kvreg_registry **regs,
                  uint32_t block_tokens, feed_stats *st);

/* Wait until the index holds every event the registries emitted. 0, or -1 after printing why
 * (timeout, a lost or malformed batch, an index error). */
int zmq_feed_sync(zmq_feed *z);

void zmq_feed_get_stats(const zmq_feed *z, zmq_feed_stats *out);

/* Stop the publishers and free everything. NULL-safe. */
void zmq_feed_close(zmq_feed *z);

#endif
