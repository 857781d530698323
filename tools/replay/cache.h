/*
 * cache: the tiered KV-cache model an engine would run on top of libkvreg.
 *
 *   G1 (device) and optionally G2 (host) are libkvreg pools of one registry. The model keeps
 *   one reference on every block a tier caches, and each running request holds one more
 *   reference on each of its G1 blocks. At most `inflight` requests run at once; a new one
 *   makes the oldest finish (its references are dropped, its blocks stay cached).
 *   A request walks its blocks in order: the longest prefix held by G1 is acquired
 *   (kvreg_acquire_prefix); a block found in G2 instead is onboarded (registered in G1, the
 *   G2 copy stays) and the walk goes on; at the first block in neither, the prefix match ends
 *   and the rest are computed (registered in G1, or acquired if G1 happens to hold them).
 *   When G1 is full, its least recently used unused block is evicted: with G2 it is first
 *   registered in G2 (so the registry keeps the hash and no Remove is emitted), then released
 *   from G1. G2 evicts its own LRU block by releasing it. If every G1 block is in use, the
 *   oldest running request finishes early; if none is running, G1 goes over capacity
 *   (counted) until that request finishes, when G1 is trimmed back to capacity.
 * Only the public libkvreg API is used; the eviction policy lives here, not in the library.
 */
#ifndef KVREG_REPLAY_CACHE_H
#define KVREG_REPLAY_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include <kvreg.h>

#include "lru.h"
#include "naming.h"
#include "workload.h"

#define CACHE_UNLIMITED UINT64_MAX

typedef struct cache_config {
    uint64_t g1_blocks;    /* CACHE_UNLIMITED or >= 1 */
    uint64_t g2_blocks;    /* CACHE_UNLIMITED, >= 1, or 0 for no G2 */
    uint32_t inflight;     /* >= 1 */
    uint32_t block_tokens; /* tokens per block id */
    int with_tokens;       /* register computed blocks with their tokens (--publish: vLLM's
                              events carry them), not by hash only */
    /* With with_tokens: also give offloaded (G2) and onboarded (G1) blocks their tokens, for
     * tiers in registries of their own, where those Registers are events too (the cluster's
     * --transport zmq). out gets block_tokens tokens; 0, or -1 when the block is unknown. */
    int (*tokens_of)(void *ctx, uint64_t sequence_hash, uint32_t *out);
    void *tokens_ctx;
} cache_config;

typedef struct cache_stats {
    uint64_t requests, blocks, prompt_tokens, output_tokens;
    uint64_t hit_blocks_g1, hit_blocks_g2;
    uint64_t hit_tokens_g1, hit_tokens_g2;
    uint64_t g1_evictions;   /* blocks released from G1 to make room */
    uint64_t g2_stores;      /* of those, registered in G2 (the rest were already there) */
    uint64_t g2_evictions;
    uint64_t onboards;       /* G2 hits copied back to G1 */
    uint64_t early_finishes; /* requests finished early because all G1 blocks were in use */
    uint64_t over_capacity;  /* G1 blocks registered beyond capacity (one request too big) */
    uint64_t api_calls;      /* libkvreg calls the model made */
} cache_stats;

typedef struct running_request {
    uint64_t *hashes; /* G1 blocks it holds a reference on */
    size_t n, cap;
} running_request;

typedef struct cache {
    cache_config cfg;
    kvreg_pool *g1, *g2; /* g2 NULL when there is no G2 */
    lru t1, t2;
    running_request *ring; /* inflight slots */
    size_t ring_head, ring_count;
    running_request cur;   /* the request being admitted */
    uint64_t *block_hashes, *sequence_hashes;
    kvreg_block *handles;
    size_t scratch_cap;
    uint32_t *tokens; /* one block's tokens (with_tokens) */
    cache_stats st;
} cache;

/* Create the pools ("G1", "G2") in reg. 0, or a negative KVREG_E* code. */
int cache_init(cache *c, kvreg_registry *reg, const cache_config *cfg);
/* The same with G1 and G2 in registries of their own (the cluster replay: each registry's
 * events are then one tier's, as an engine publishes them per medium). */
int cache_init_tiers(cache *c, kvreg_registry *g1_reg, kvreg_registry *g2_reg,
                     const cache_config *cfg);
/* Admit one request. 0, or -1 after printing what went wrong (library error or a model
 * inconsistency). */
int cache_request(cache *c, namer *nm, const replay_request *req);
/* Finish every running request (all references but the cache's own are dropped). */
int cache_drain(cache *c);
/* Compare the model's tiers with the pools' sizes; 0 if equal, else -1 with a message. */
int cache_check(const cache *c);
/* Free the model's memory. The pools stay with the registry (kvreg_registry_free frees them
 * without events), so a final report is not followed by a burst of Remove events. */
void cache_free(cache *c);

#endif
