/*
 * libkvreg router side: an index of which worker holds which KV blocks, in which tier, fed by
 * the workers' decoded events (kvreg_wire.h), answering "who holds the longest prefix of this
 * prompt" for a KV-aware router.
 *
 * SPDX-License-Identifier: Apache-2.0
 *
 * A worker is (worker_id, dp_rank): each data-parallel rank of an engine publishes its own
 * event stream and holds its own cache. The index keeps one entry per (router hash, worker)
 * with the tiers (KVREG_MEDIUM_*) holding it. It consumes either event mode of kvreg.h
 * (KVREG_OPT_EVENT_MODE): global events make one tier entry per hash, per-tier events one per
 * (hash, tier) held, and both are removed by the Remove that names them.
 *
 * Engine hashes and router hashes. vLLM and SGLang name blocks with their own hashes. In the
 * default mode (KVREG_INDEX_HASHES_ENGINE) the index computes libkvreg's sequence hashes from
 * each stored event's token_ids, chaining from the router hash of the event's parent, and
 * keeps each worker's engine -> router mapping, so that later Removes (engine hashes only) and
 * children (whose parent is an engine hash) find their entries; several engine hashes of one
 * worker may name the same content (a tier holds it while any of them is stored there, however
 * many: the count is exact). Queries then use router hashes,
 * the ones kvreg_hash_blocks() (profile DYNAMO) gives for the prompt's tokens. Engines built on
 * libkvreg already publish router hashes: KVREG_INDEX_HASHES_OWN uses the events' hashes as
 * they are (no tokens needed, no mapping kept).
 *
 * Order and gaps. Every batch of one worker carries the caller's sequence number for it (the
 * ZeroMQ frame's seq, or Dynamo's event_id): the index checks that it is the next one and says
 * what it found in kvreg_index_apply_info.flags, so the caller can resynchronise (clear the
 * worker, apply a snapshot or a replay, and set the next expected number with
 * kvreg_index_clear_worker).
 *
 * Thread-safety: everything may be called from any number of threads at once. Batches of
 * different workers apply in parallel; batches of one worker are serialized. Queries take no
 * lock: they never wait for a writer beyond one entry's change and never slow writers down.
 * A query sees each block's holders in a consistent state, not the whole index at one instant,
 * and names each worker at most once (a worker removed while the query runs may be left out).
 *
 * Everything returns a KVREG_* status (kvreg.h). Outputs are written only on success unless
 * a function says otherwise.
 */
#ifndef KVREG_INDEX_H
#define KVREG_INDEX_H

#include "kvreg.h"
#include "kvreg_wire.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------ */
/* Configuration (options are keys with uint64_t values, as kvreg_config)                      */
/* ------------------------------------------------------------------------------------------ */
typedef struct kvreg_index_config kvreg_index_config;

/* Tokens per block (default 16, 1 .. 2^20). In ENGINE mode a stored event must carry exactly
 * n_block_hashes * block_size token_ids, and its block_size (when present) must equal this;
 * other stored events are skipped and counted (Dynamo drops them the same way). */
#define KVREG_INDEX_OPT_BLOCK_SIZE 1u
/* Where router hashes come from: KVREG_INDEX_HASHES_ENGINE (default) or _OWN (see above). */
#define KVREG_INDEX_OPT_HASHES 2u
#define KVREG_INDEX_HASHES_ENGINE 0u
#define KVREG_INDEX_HASHES_OWN 1u
/* Which chain ENGINE mode and token queries compute:
 *   KVREG_INDEX_PROFILE_DYNAMO (default): kvreg_hash_blocks() with the salt (Dynamo 1.0.x);
 *   KVREG_INDEX_PROFILE_KV_ROUTER: Dynamo's KV router, whose block hashes use the salt and
 *     whose chain step is seeded with 1337 whatever the salt: the same as DYNAMO when the salt
 *     is KVREG_ROUTER_SALT. */
#define KVREG_INDEX_OPT_PROFILE 3u
#define KVREG_INDEX_PROFILE_DYNAMO 0u
#define KVREG_INDEX_PROFILE_KV_ROUTER 1u
/* Hash salt (default KVREG_ROUTER_SALT, any value). */
#define KVREG_INDEX_OPT_SALT 4u
/* Lock shards of the shared table, a power of two (default 256, 1 .. 4096). */
#define KVREG_INDEX_OPT_SHARDS 5u
/* Expected (hash, worker) entries (default 0: start small and grow). The table is sized for
 * this many up front (16 bytes an entry at 3/4 load at most), so filling it never rehashes;
 * a router knows it roughly: workers x blocks each worker caches. At most 2^32. */
#define KVREG_INDEX_OPT_EXPECTED_ENTRIES 6u
/* Tier weights for the score, in thousandths: option KVREG_INDEX_OPT_WEIGHT + medium
 * (KVREG_MEDIUM_*), value 0 .. 1000000. Defaults: GPU 1000, CPU 800, STORAGE 500, EXTERNAL 300
 * (llm-d scores GPU 1.0 and CPU 0.8). */
#define KVREG_INDEX_OPT_WEIGHT 16u

KVREG_API int kvreg_index_config_new(kvreg_index_config **out) KVREG_NOEXCEPT;
KVREG_API void kvreg_index_config_free(kvreg_index_config *cfg) KVREG_NOEXCEPT; /* NULL-safe */
/* KVREG_EINVAL for an unknown option or a value out of range (cfg unchanged). */
KVREG_API int kvreg_index_config_set(kvreg_index_config *cfg, uint32_t option,
                                     uint64_t value) KVREG_NOEXCEPT;

/* ------------------------------------------------------------------------------------------ */
/* Index                                                                                      */
/* ------------------------------------------------------------------------------------------ */
typedef struct kvreg_index kvreg_index;

/* cfg may be NULL (defaults); it can be freed or reused afterwards. KVREG_EINVAL if out is
 * NULL, KVREG_ENOMEM. */
KVREG_API int kvreg_index_new(kvreg_index **out, const kvreg_index_config *cfg) KVREG_NOEXCEPT;
/* NULL-safe. Must not run while other threads use the index. */
KVREG_API void kvreg_index_free(kvreg_index *idx) KVREG_NOEXCEPT;

/* Sequence number meaning "do not check" (a snapshot, or a feed without numbers). */
#define KVREG_INDEX_SEQ_NONE UINT64_MAX

/* flags of kvreg_index_apply_info */
#define KVREG_INDEX_F_NEW_WORKER 0x01u /* the worker was not known: it was added */
#define KVREG_INDEX_F_GAP 0x02u        /* seq > expected: batches were lost before this one (it
                                          was applied; the worker's entries may be stale) */
#define KVREG_INDEX_F_STALE 0x04u      /* seq < expected (a duplicate or a late batch): NOT
                                          applied */
#define KVREG_INDEX_F_RESET 0x08u      /* seq 0 after a higher one: the publisher restarted;
                                          the worker's entries were dropped, then the batch
                                          applied */
#define KVREG_INDEX_F_SKIPPED 0x10u    /* some events or blocks were skipped (see the counts) */
#define KVREG_INDEX_F_CLEARED 0x20u    /* the batch held a Cleared event */

typedef struct kvreg_index_apply_info {
    uint32_t flags;           /* KVREG_INDEX_F_* */
    uint32_t reserved32;      /* zero */
    uint64_t expected_seq;    /* the seq this batch should have had (KVREG_INDEX_SEQ_NONE when
                                 any was accepted) */
    uint64_t events_applied;  /* events that changed or confirmed the index */
    uint64_t events_skipped;  /* unknown type or medium, wrong block size or token count,
                                 parent unknown (ENGINE mode), or not applied (STALE) */
    uint64_t blocks_stored;   /* (hash, tier) pairs added */
    uint64_t blocks_removed;  /* (hash, tier) pairs removed */
    uint64_t removes_unknown; /* removed hashes the worker did not hold (not an error: vLLM
                                 removes blocks the router may never have seen stored) */
    uint64_t reserved[3];     /* zero */
} kvreg_index_apply_info;

/* Apply one batch of a worker's decoded events, in order (as kvreg_wire_decode returns them).
 * dp_rank is the caller's (the events' own dp_rank is not read). seq is the batch's sequence
 * number for this worker, checked as the flags describe: the first batch of a worker is
 * expected to be 0, then each one the previous + 1; KVREG_INDEX_SEQ_NONE skips the check and
 * leaves the expected number as it was. Stored events add (hash, tier) for each block, Removed
 * events remove them, Cleared drops every entry of the worker. A medium of
 * KVREG_MEDIUM_UNKNOWN, a stored event whose parent the worker does not hold (ENGINE mode) or
 * whose token count is wrong, and events of other types are skipped and counted, never fatal.
 * info may be NULL. events may be NULL when n == 0 (a batch of nothing still advances seq).
 * KVREG_EINVAL: idx NULL, events NULL with n > 0, or an event with a NULL array whose count is
 * not 0 (nothing applied). KVREG_ENOMEM: the events before the failing one are applied (info
 * says how many), the expected seq is not advanced: resynchronise the worker. */
KVREG_API int kvreg_index_apply(kvreg_index *idx, uint64_t worker_id, uint32_t dp_rank,
                                uint64_t seq, const kvreg_wire_event *events, size_t n,
                                kvreg_index_apply_info *info) KVREG_NOEXCEPT;

/* Drop every entry of the worker (as a Cleared event does) and set the seq its next batch
 * must carry (KVREG_INDEX_SEQ_NONE: accept any number as the new start). The worker stays
 * known (it is added if it was not). For resynchronising after a gap. */
KVREG_API int kvreg_index_clear_worker(kvreg_index *idx, uint64_t worker_id, uint32_t dp_rank,
                                       uint64_t next_seq) KVREG_NOEXCEPT;

/* Forget the worker and its entries (it left the cluster). KVREG_ENOENT if it is not known. */
KVREG_API int kvreg_index_remove_worker(kvreg_index *idx, uint64_t worker_id,
                                        uint32_t dp_rank) KVREG_NOEXCEPT;

/* ------------------------------------------------------------------------------------------ */
/* Queries                                                                                    */
/* ------------------------------------------------------------------------------------------ */
/* One worker's match for a prompt. Blocks are counted from the prompt's first block. */
typedef struct kvreg_index_match {
    uint64_t worker_id;
    uint32_t dp_rank;
    uint32_t depth;                           /* longest prefix the worker holds in any tier */
    uint32_t blocks[KVREG_MEDIUM_COUNT];      /* of those depth blocks, how many have their
                                                 fastest copy (lowest KVREG_MEDIUM_*) in each
                                                 tier; they sum to depth */
    uint32_t tier_depth[KVREG_MEDIUM_COUNT];  /* longest prefix held in that tier alone */
    double score;                             /* sum over tiers of weight * blocks, weights as
                                                 set by KVREG_INDEX_OPT_WEIGHT (1.0 = 1000) */
    uint64_t reserved[2];                     /* zero */
} kvreg_index_match;

/* Every worker holding at least the first block of hashes[0..n) (router hashes), best first:
 * by score, then depth, then worker_id and dp_rank ascending. top_k > 0 keeps the first top_k.
 * out[0..*n_matches) gets them; when cap is too small nothing is written, *n_matches gets the
 * number needed and KVREG_ERANGE is returned (call with out NULL and cap 0 to size it). With
 * writers running, that number is an upper bound: a worker removed meanwhile is left out.
 * KVREG_EINVAL: idx or n_matches NULL, hashes NULL with n > 0. KVREG_ENOMEM. */
KVREG_API int kvreg_index_query_hashes(const kvreg_index *idx, const uint64_t *hashes, size_t n,
                                       size_t top_k, kvreg_index_match *out, size_t cap,
                                       size_t *n_matches) KVREG_NOEXCEPT;

/* The same for a prompt's tokens: its full blocks are hashed with the index's block size,
 * salt and profile first (the trailing partial block is not looked up). Errors as above, and
 * KVREG_EOVERFLOW for n_tokens > SIZE_MAX / 4. */
KVREG_API int kvreg_index_query_tokens(const kvreg_index *idx, const uint32_t *tokens,
                                       size_t n_tokens, size_t top_k, kvreg_index_match *out,
                                       size_t cap, size_t *n_matches) KVREG_NOEXCEPT;

/* One worker's matched depth: the answer of Dynamo's router indexer (its OverlapScores), for
 * routers that weigh tiers and load themselves. */
typedef struct kvreg_index_depth {
    uint64_t worker_id;
    uint32_t dp_rank;
    uint32_t depth; /* longest prefix of the prompt the worker holds, in any tier (>= 1) */
} kvreg_index_depth;

/* Every worker holding at least the first block of hashes[0..n) (router hashes) and how deep
 * it matches, in no particular order (equal answers come in the same order): no tiers, no
 * score, no ranking, at 16 bytes a worker. For answers of thousands of workers this costs a
 * fraction of kvreg_index_query_hashes (kvreg-bench --workload index_k1 measures both).
 * The number of workers is known once the first block is looked up: when cap is too small
 * nothing else is done, *n_matches gets the number needed and KVREG_ERANGE is returned (call
 * with out NULL and cap 0 to size it; a worker storing the block in between can make the next
 * call need one more). Errors as kvreg_index_query_hashes. */
KVREG_API int kvreg_index_query_depths(const kvreg_index *idx, const uint64_t *hashes, size_t n,
                                       kvreg_index_depth *out, size_t cap,
                                       size_t *n_matches) KVREG_NOEXCEPT;

/* The same for a prompt's tokens, hashed as kvreg_index_query_tokens does. */
KVREG_API int kvreg_index_query_depths_tokens(const kvreg_index *idx, const uint32_t *tokens,
                                              size_t n_tokens, kvreg_index_depth *out,
                                              size_t cap, size_t *n_matches) KVREG_NOEXCEPT;

/* ------------------------------------------------------------------------------------------ */
/* Statistics (each value read without stopping writers: exact when the index is quiet)       */
/* ------------------------------------------------------------------------------------------ */
#define KVREG_INDEX_STAT_ENTRIES 1u         /* (router hash, worker) entries */
#define KVREG_INDEX_STAT_WORKERS 2u         /* known workers */
#define KVREG_INDEX_STAT_MEMORY_BYTES 3u    /* memory the index holds (tables, mappings,
                                               workers), including tables kept for readers */
#define KVREG_INDEX_STAT_BYTES_PER_ENTRY 4u /* MEMORY_BYTES / ENTRIES, rounded (0 when empty) */
#define KVREG_INDEX_STAT_MAPPED_HASHES 5u   /* engine hashes mapped (ENGINE mode) */
#define KVREG_INDEX_STAT_EVENTS_APPLIED 6u  /* events applied since creation */
#define KVREG_INDEX_STAT_EVENTS_SKIPPED 7u  /* events skipped since creation */
#define KVREG_INDEX_STAT_GAPS 8u            /* batches flagged GAP, STALE or RESET */
/* KVREG_EINVAL for NULL arguments or an unknown stat. */
KVREG_API int kvreg_index_stat(const kvreg_index *idx, uint32_t stat,
                               uint64_t *value) KVREG_NOEXCEPT;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KVREG_INDEX_H */
