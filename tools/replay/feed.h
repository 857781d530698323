/*
 * feed: one worker's event stream from its registries to the router's index, the way a real
 * deployment carries it. The worker's G1 and G2 pools live in two registries (one per tier),
 * so Register / Remove events are per tier, as vLLM's BlockStored / BlockRemoved are per
 * medium (the pools are GPU and CPU pools, so events carry their medium); the callback queues
 * them. feed_flush() then encodes the
 * queue as vLLM KVEventBatch payloads (kvreg_wire_encode), decodes each payload again
 * (kvreg_wire_decode, what a router receiving the bytes does) and applies the decoded batch to
 * the index with the worker's next sequence number. The workers are libkvreg engines, so the
 * index runs in KVREG_INDEX_HASHES_OWN mode: the hashes on the wire are already router hashes.
 * Transport inproc: the payload goes from encoder to decoder in memory (--transport zmq sends
 * the events over loopback instead: zmq_feed.h).
 */
#ifndef KVREG_REPLAY_FEED_H
#define KVREG_REPLAY_FEED_H

#include <stddef.h>
#include <stdint.h>

#include <kvreg.h>
#include <kvreg_index.h>
#include <kvreg_wire.h>

typedef struct feed_stats {
    uint64_t events;        /* registry events carried */
    uint64_t registers, removes;
    uint64_t payloads;      /* vLLM payloads encoded and decoded */
    uint64_t payload_bytes;
    uint64_t wire_events;   /* decoded events applied to the index */
    uint64_t flagged;       /* batches the index flagged (gap, stale, reset, skipped) */
    double encode_s, decode_s, apply_s;
} feed_stats;

/* The tokens of the block named sequence_hash (block_tokens of them) into out; 0, or -1 when
 * the block is unknown. The replay's engines register by hash only, but vLLM's BlockStored
 * carries every block's token_ids, so the feed puts them back before encoding. */
typedef int (*feed_tokens_fn)(void *ctx, uint64_t sequence_hash, uint32_t *out);

typedef struct feed {
    uint64_t worker_id;
    uint32_t block_tokens;
    feed_tokens_fn tokens_of;
    void *tokens_ctx;
    uint32_t *tokens;       /* the pending Registers' tokens, block_tokens each */
    size_t tokens_cap;      /* in blocks */
    uint64_t seq;           /* sequence number of the next payload */
    kvreg_event *pending;   /* events captured since the last flush (tokens not kept) */
    size_t n, cap;
    int oom;                /* a capture failed for lack of memory */
    kvreg_wire_encoder *enc;
    kvreg_wire_decoder *dec;
    kvreg_index *idx;
    feed_stats *st;         /* shared by every worker's feed */
} feed;

/* 0, or a negative KVREG_E* code (KVREG_ENOTSUP: this libkvreg has no wire formats). */
int feed_init(feed *f, uint64_t worker_id, kvreg_index *idx, feed_stats *st, uint32_t block_tokens,
              feed_tokens_fn tokens_of, void *tokens_ctx);
void feed_free(feed *f);

/* kvreg_event_fn for both of the worker's registries (user_data: the feed). */
void feed_capture(const kvreg_event *events, size_t n_events, void *user_data);

/* Carry the pending events into the index. 0, or -1 after printing what went wrong. */
int feed_flush(feed *f);

#endif
