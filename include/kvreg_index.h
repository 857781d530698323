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
 * What a query running beside writers may answer, exactly:
 *   - It reads the prompt's blocks one after another, each block's holders as one consistent
 *     state of that block (some moment during the call), not the whole index at one instant.
 *     A worker answered with depth d held each of blocks 0 .. d-1 at the moment that block was
 *     read, and did not hold block d when it was read (or d is the prompt's length). So d may
 *     match no single instant: a worker that stores block 5 and then drops block 2 while the
 *     query runs may be answered with depth 6.
 *   - Only workers holding block 0 when it was read are candidates: a worker that stores it
 *     later in the call is not in the answer.
 *   - Each worker at most once, only workers that hold or held the blocks counted; a ranked
 *     match's blocks per tier add up to its depth, each tier's count and prefix as read from
 *     the same entries.
 *   - A worker cleared or removed during the call may be left out, or answered with what it
 *     held before; a worker id added again (a new slot) is never answered with the entries of
 *     the worker that had the id before.
 *   - Once every apply, clear and remove call has returned before the query starts, the
 *     answer is exact.
 *
 * Everything returns a KVREG_* status (kvreg.h). Outputs are written only on success unless
 * a function says otherwise.
 */
#ifndef KVREG_INDEX_H
#define KVREG_INDEX_H

/* Experimental tier (README, "API stability"): these calls may still change between 0.x
 * releases, while kvreg.h and kvreg_wire.h only grow. Opt in by defining KVREG_EXPERIMENTAL
 * before the first include (or -DKVREG_EXPERIMENTAL on the command line). */
#ifndef KVREG_EXPERIMENTAL
#error "kvreg_index.h is libkvreg's experimental API (it may change between 0.x releases): #define KVREG_EXPERIMENTAL before including it, or compile with -DKVREG_EXPERIMENTAL"
#endif

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
 * leaves the expected number as it was (after the highest seq, KVREG_INDEX_SEQ_NONE - 1, the
 * next cannot be named: any is accepted as the start again). Stored events add (hash, tier) for each block, Removed
 * events remove them, Cleared drops every entry of the worker. A medium of
 * KVREG_MEDIUM_UNKNOWN, a stored event whose parent the worker does not hold (ENGINE mode) or
 * whose token count is wrong, and events of other types are skipped and counted, never fatal.
 * info may be NULL. events may be NULL when n == 0 (a batch of nothing still advances seq).
 * KVREG_EINVAL: idx NULL, events NULL with n > 0, or an event with a NULL array whose count is
 * not 0 (nothing applied). KVREG_ENOMEM: the events before the failing one are applied (info
 * says how many), and of the failing one the blocks before the failing block (counted in
 * blocks_stored; in ENGINE mode an engine hash that named other content may have lost its
 * old entry); the expected seq is not advanced: resynchronise the worker (clear it).
 * KVREG_EOVERFLOW: the worker is new and the index already knows 2^20 workers (a removed
 * worker's slot is reused once more than 64 are free, oldest first). */
KVREG_API int kvreg_index_apply(kvreg_index *idx, uint64_t worker_id, uint32_t dp_rank,
                                uint64_t seq, const kvreg_wire_event *events, size_t n,
                                kvreg_index_apply_info *info) KVREG_NOEXCEPT;

/* Drop every entry of the worker (as a Cleared event does) and set the seq its next batch
 * must carry (KVREG_INDEX_SEQ_NONE: accept any number as the new start). The worker stays
 * known (it is added if it was not). For resynchronising after a gap. KVREG_EINVAL: idx NULL.
 * KVREG_EOVERFLOW: a new worker and no slot left (as kvreg_index_apply). */
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
 * writers running, that number is of that instant: a worker that stores the first block
 * before the next call needs one more (give room to spare, or call again on KVREG_ERANGE),
 * and one removed meanwhile is left out.
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
#define KVREG_INDEX_STAT_BLOCKS 9u          /* distinct (partition, router hash) keys held by
                                               any worker: one hash held in two partitions
                                               counts twice (LIBKVREG_0.6; counted by a pass
                                               over the table, which waits for writers one
                                               shard at a time) */
/* KVREG_EINVAL for NULL arguments or an unknown stat. */
KVREG_API int kvreg_index_stat(const kvreg_index *idx, uint32_t stat,
                               uint64_t *value) KVREG_NOEXCEPT;

/* One worker as kvreg_index_workers lists it (LIBKVREG_0.6). Size-versioned: the caller says
 * which size it was compiled with, and later versions only add members at the end. */
typedef struct kvreg_index_worker_info {
    uint64_t worker_id;
    uint32_t dp_rank;
    uint32_t reserved32;                      /* zero */
    uint64_t next_seq;                        /* the seq its next batch must carry
                                                 (KVREG_INDEX_SEQ_NONE: any, as the start) */
    uint64_t entries;                         /* (router hash) entries it holds */
    uint64_t tier_entries[KVREG_MEDIUM_COUNT]; /* of those, held in each tier (an entry in two
                                                 tiers counts in both) */
    uint64_t mapped_hashes;                   /* ENGINE mode: engine hashes mapped (0 in OWN) */
    uint64_t partition;                       /* its partition (kvreg_index_set_worker_partition) */
    uint64_t reserved[3];                     /* zero */
} kvreg_index_worker_info;

/* Every known worker, in ascending (worker_id, dp_rank): out is an array of cap elements of
 * struct_size bytes each (sizeof(kvreg_index_worker_info) as the caller compiled it, at least
 * up to mapped_hashes); each gets the members that fit. When cap is too small nothing is
 * written, *n gets the number of workers and KVREG_ERANGE is returned (out NULL and cap 0 to
 * size it). One pass over the table, shard by shard: exact when the index is quiet, each
 * worker's counts otherwise taken while its batches go on. KVREG_EINVAL: idx or n NULL, out
 * NULL with cap > 0, struct_size too small. KVREG_ENOMEM. */
KVREG_API int kvreg_index_workers(const kvreg_index *idx, void *out, size_t cap,
                                  size_t struct_size, size_t *n) KVREG_NOEXCEPT;

/* ------------------------------------------------------------------------------------------ */
/* Partitions: several models and LoRA adapters in one index (LIBKVREG_0.6)                     */
/* ------------------------------------------------------------------------------------------ */
/* A partition is a uint64_t id; 0 is the default (no partition: the behaviour and cost of the
 * index without partitions). Entries of different partitions never match each other: the
 * table key of a block is its router hash mixed with the partition id (a bijection that leaves
 * partition 0's keys as the hashes), at apply and at query. A worker is assigned to its
 * model's partition with kvreg_index_set_worker_partition; in ENGINE mode each stored event
 * with a lora_name (kvreg_wire_event.lora_name) puts its blocks in that adapter's partition of
 * the worker's model, and Removes find them by engine hash whatever their partition. In OWN
 * mode the worker's partition is used for all its events (an engine on libkvreg keys an
 * adapter's blocks apart in its own hashes). The data-parallel rank is part of the worker. */

/* The partition of a model and LoRA adapter (either NULL or "" for none). The rule, fixed:
 * model id = XXH3-64 of the model name's bytes, seed 0x6c646d676572766b ("kvregmdl" read as a
 * little-endian u64), 0 without a model; with an adapter, XXH3-64 of the adapter name's bytes,
 * seed the model id; a name's id that comes out 0 is taken as 1. KVREG_EINVAL: out NULL. */
KVREG_API int kvreg_index_partition_id(const char *model_name, const char *lora_name,
                                       uint64_t *out) KVREG_NOEXCEPT;

/* Assign the worker to a partition (kvreg_index_partition_id(model, NULL): its model). The
 * worker is added if unknown; a change of partition drops its entries (they were keyed under
 * the old one), the next seq stays. KVREG_EINVAL: idx NULL. KVREG_EOVERFLOW: a new worker and
 * no slot left (as kvreg_index_apply). */
KVREG_API int kvreg_index_set_worker_partition(kvreg_index *idx, uint64_t worker_id,
                                               uint32_t dp_rank,
                                               uint64_t partition) KVREG_NOEXCEPT;

/* The queries above within one partition (they query partition 0): the same arguments,
 * answers and errors. */
KVREG_API int kvreg_index_query_hashes_in(const kvreg_index *idx, uint64_t partition,
                                          const uint64_t *hashes, size_t n, size_t top_k,
                                          kvreg_index_match *out, size_t cap,
                                          size_t *n_matches) KVREG_NOEXCEPT;
KVREG_API int kvreg_index_query_tokens_in(const kvreg_index *idx, uint64_t partition,
                                          const uint32_t *tokens, size_t n_tokens, size_t top_k,
                                          kvreg_index_match *out, size_t cap,
                                          size_t *n_matches) KVREG_NOEXCEPT;
KVREG_API int kvreg_index_query_depths_in(const kvreg_index *idx, uint64_t partition,
                                          const uint64_t *hashes, size_t n,
                                          kvreg_index_depth *out, size_t cap,
                                          size_t *n_matches) KVREG_NOEXCEPT;
KVREG_API int kvreg_index_query_depths_tokens_in(const kvreg_index *idx, uint64_t partition,
                                                 const uint32_t *tokens, size_t n_tokens,
                                                 kvreg_index_depth *out, size_t cap,
                                                 size_t *n_matches) KVREG_NOEXCEPT;

/* ------------------------------------------------------------------------------------------ */
/* Dump, load and digest of the whole index (LIBKVREG_0.6)                                      */
/* ------------------------------------------------------------------------------------------ */
/* A dump is the index's content in a versioned, checksummed binary format (little-endian,
 * fixed-width fields; the layout is documented in docs/design/index.md): the configuration that
 * gives entries their meaning (hashes mode, profile, block size, salt; not the shards, the
 * expected entries or the tier weights), then every worker with the seq its next batch must
 * carry, its entries (router hash and tiers) and, in ENGINE mode, its engine -> router hash
 * mapping (the entries follow from it), and an XXH3-64 checksum of all that. Workers come in
 * ascending (worker_id, dp_rank), entries in an order fixed by their hashes (the one a load
 * fills its tables fastest in): equal indexes give equal dumps, whatever the order their
 * events came in and whatever their shard counts.
 *
 * Consistency: a dump (and a digest) is the state of one instant: the one at which it holds
 * the locks of every worker slot handed out when it started (taken in slot order). It holds
 * them while it copies their entries (one copy of the content, 32 bytes an entry, then sorted
 * and written in 64 KiB pieces), so writers wait for that copy (not for the write callback)
 * and queries go on. A worker added after the dump started is in it if it took a freed slot
 * (with its state at that instant) and not if it took a new one. Not in it either: a worker
 * that a load (kvreg_index_load, or a NATS replica's restore) has added but whose entries are
 * not all in yet: a dump or digest taken during a load has each worker whole or not at all. */

/* The format version kvreg_index_dump writes; kvreg_index_load reads it and version 1 (the
 * same layout with entries in ascending hash order, as libkvreg 0.6.0 wrote it). Digests are
 * of version 2 dumps: an index's digest differs from what 0.6.0 gave for the same content. */
#define KVREG_INDEX_DUMP_VERSION 2u

/* Receives the dump in pieces, in order (each at most 64 KiB, none empty). Return 0 to go on;
 * any other value stops the dump, which returns it. */
typedef int (*kvreg_index_write_fn)(const void *data, size_t len, void *ctx);

/* Write the dump through write (called from this thread only). KVREG_EINVAL: idx or write
 * NULL. KVREG_ENOMEM (nothing written). Otherwise KVREG_OK or write's non-zero return. */
KVREG_API int kvreg_index_dump(const kvreg_index *idx, kvreg_index_write_fn write,
                               void *ctx) KVREG_NOEXCEPT;

/* The dump in one buffer from malloc (*data; free it with free()) of *len bytes.
 * KVREG_EINVAL: an argument NULL. KVREG_ENOMEM. */
KVREG_API int kvreg_index_dump_alloc(const kvreg_index *idx, void **data,
                                     size_t *len) KVREG_NOEXCEPT;

/* Load a dump into an index that knows no worker (new, or every worker removed), all or
 * nothing: on any error the index is left as it was (empty) and usable. The dump's tier weights
 * are not in it: the index's own apply. Nothing else may change the index meanwhile (queries
 * may run; they see workers appear one by one, and their entries later, many workers' at a
 * time). Statuses:
 *   KVREG_EINVAL   idx NULL, data NULL with len > 0, or the dump's hashes mode, profile, block
 *                  size or salt differ from the index's;
 *   KVREG_ESTATE   the index knows a worker;
 *   KVREG_ENOTSUP  a format version this library does not read (0, or a newer one);
 *   KVREG_EPROTO   not a dump: too short, wrong magic, checksum mismatch (truncated or
 *                  corrupt), or content that is not consistent (counts beyond the end, workers
 *                  or entries out of order or repeated, unknown tiers or flags, trailing bytes);
 *   KVREG_EOVERFLOW more workers than an index holds; KVREG_ENOMEM. */
KVREG_API int kvreg_index_load(kvreg_index *idx, const void *data, size_t len) KVREG_NOEXCEPT;

/* A digest of the index's content: the checksum its dump would end with (it is computed the
 * same way, without writing anything). Equal for equal contents (configuration, workers with
 * their next seq, entries and tiers, ENGINE mapping) whatever the insertion order, shard count
 * or memory layout, and different (but for a 2^-64 chance) when any of them differs. The next
 * seqs are included because two indexes that expect different seqs treat the next batch
 * differently (one applies it, the other flags a gap): they are not replicas of each other.
 * Consistent as a dump is. KVREG_EINVAL: an argument NULL. KVREG_ENOMEM. */
KVREG_API int kvreg_index_digest(const kvreg_index *idx, uint64_t *out) KVREG_NOEXCEPT;

/* ------------------------------------------------------------------------------------------ */
/* Router: a worker's cost for a request, and the choice (LIBKVREG_0.5)                         */
/* ------------------------------------------------------------------------------------------ */
/* A kvreg_router turns an index answer (kvreg_index_match: each worker's matched blocks per
 * tier) and the load of each worker into one number per worker, a logit (lower is better), and
 * picks a worker. It knows its workers (kvreg_router_add_worker) and keeps its own record of
 * the requests in flight on each (kvreg_router_request_add / _update / _finish), as Dynamo's KV
 * router does; a caller that knows the load better sets it (kvreg_router_set_active).
 *
 * Blocks are the index's blocks (KVREG_INDEX_OPT_BLOCK_SIZE tokens). For a prompt of P blocks
 * (tokens / block size: a partial last block counts as its fraction) and worker w:
 *   overlap(w)  = sum over tiers t of tier_weight[t] x blocks[t] of w's match: a block matched
 *                 only in a slower tier counts as partly cached (0 for a worker not matched);
 *   prefill(w)  = P - overlap(w), the blocks w would have to compute;
 *   active(w)   = the blocks of w's requests in flight + the value set for w + P: its
 *                 potential active blocks if the request went there.
 * Policies:
 *   KVREG_ROUTER_POLICY_COST (Dynamo's KV router cost):
 *                 logit = overlap_weight x prefill(w) + active(w).
 *   KVREG_ROUTER_POLICY_WEIGHTED (llm-d's weighted scorers, summed; higher score is better):
 *                 prefix(w) = overlap(w) / P (0 when P is 0), in 0..1;
 *                 load(w)   = (max active - active(w)) / (max active - min active) over the
 *                             workers, 1 for all when they are equal;
 *                 logit     = -(prefix_weight x prefix(w) + load_weight x load(w)).
 * Choice:
 *   temperature 0: the lowest logit; ties go to the lowest active(w), then the lowest
 *                 (worker_id, dp_rank).
 *   temperature T > 0: softmax over the logits normalised to 0..1 (as Dynamo does): worker w
 *                 is drawn with probability proportional to
 *                 exp(-(logit(w) - min logit) / ((max logit - min logit) x T)), uniformly when
 *                 every logit is equal. The draw uses the router's own generator, seeded by
 *                 the config (same seed, same calls: same choices); no global state.
 *
 * Configuration: a struct the caller fills with kvreg_router_config_init (defaults) and then
 * changes. Its first member is its size as the caller compiled it, so later versions can add
 * members at the end: the library reads only what the caller's size covers and takes defaults
 * for the rest.
 *
 * Thread-safety: every call may come from any thread; the calls on one router serialize on
 * its lock (they are short: no call waits on I/O or on the index). */
#define KVREG_ROUTER_POLICY_COST 0u
#define KVREG_ROUTER_POLICY_WEIGHTED 1u

typedef struct kvreg_router_config {
    uint32_t size;                         /* sizeof(kvreg_router_config): set by _init */
    uint32_t policy;                       /* KVREG_ROUTER_POLICY_* (default COST) */
    double overlap_weight;                 /* COST: weight of the prefill blocks, >= 0
                                              (default 1.0, Dynamo's default; 0: load only) */
    double temperature;                    /* >= 0 (default 0: the lowest logit) */
    double tier_weight[KVREG_MEDIUM_COUNT]; /* share of a block matched in that tier that counts
                                              as cached, 0 .. 1 (defaults GPU 1.0, CPU 0.8,
                                              STORAGE 0.5, EXTERNAL 0.3, as the index's) */
    double prefix_weight;                  /* WEIGHTED: weight of the prefix score, >= 0
                                              (default 1.0) */
    double load_weight;                    /* WEIGHTED: weight of the load score, >= 0
                                              (default 1.0) */
    uint64_t seed;                         /* the generator's seed for temperature > 0
                                              (default 0; any value) */
    uint64_t reserved[4];                  /* zero */
} kvreg_router_config;

/* One worker's terms for a request (see above). */
typedef struct kvreg_router_cost {
    uint64_t worker_id;
    uint32_t dp_rank;
    uint32_t reserved32;     /* zero */
    double overlap_blocks;   /* tier-weighted matched blocks */
    double prefill_blocks;   /* prompt blocks - overlap_blocks */
    double active_blocks;    /* potential active blocks, this request's included */
    double logit;            /* lower is better */
    uint64_t reserved[2];    /* zero */
} kvreg_router_cost;

typedef struct kvreg_router kvreg_router;

/* Fill cfg with the defaults (size included). KVREG_EINVAL if cfg is NULL. */
KVREG_API int kvreg_router_config_init(kvreg_router_config *cfg) KVREG_NOEXCEPT;

/* cfg NULL: the defaults. KVREG_EINVAL: out NULL, cfg->size smaller than the members up to
 * seed, an unknown policy, a weight or temperature negative or not finite, a tier weight
 * above 1. KVREG_ENOMEM. */
KVREG_API int kvreg_router_new(kvreg_router **out, const kvreg_router_config *cfg) KVREG_NOEXCEPT;
KVREG_API void kvreg_router_free(kvreg_router *r) KVREG_NOEXCEPT; /* NULL-safe */

/* A worker the router may choose. KVREG_EEXIST if it is already known. */
KVREG_API int kvreg_router_add_worker(kvreg_router *r, uint64_t worker_id,
                                      uint32_t dp_rank) KVREG_NOEXCEPT;
/* Forget the worker and its requests in flight. KVREG_ENOENT if it is not known. */
KVREG_API int kvreg_router_remove_worker(kvreg_router *r, uint64_t worker_id,
                                         uint32_t dp_rank) KVREG_NOEXCEPT;
/* The caller's own figure for the worker's active blocks, added to the blocks of the requests
 * the router records for it (0 until set; set it and record no requests to pass the load in
 * from outside). KVREG_ENOENT if the worker is not known. */
KVREG_API int kvreg_router_set_active(kvreg_router *r, uint64_t worker_id, uint32_t dp_rank,
                                      uint64_t active_blocks) KVREG_NOEXCEPT;

/* Record a request in flight on a worker with its blocks (prompt, and decode so far).
 * KVREG_EEXIST: request_id is in flight already; KVREG_ENOENT: the worker is not known;
 * KVREG_EOVERFLOW: the worker's requests in flight would add up past UINT64_MAX blocks
 * (nothing recorded). */
KVREG_API int kvreg_router_request_add(kvreg_router *r, uint64_t request_id, uint64_t worker_id,
                                       uint32_t dp_rank, uint64_t blocks) KVREG_NOEXCEPT;
/* The request's blocks now (it grows while it generates). KVREG_ENOENT if not in flight;
 * KVREG_EOVERFLOW (the request keeps its blocks) as kvreg_router_request_add. */
KVREG_API int kvreg_router_request_update(kvreg_router *r, uint64_t request_id,
                                          uint64_t blocks) KVREG_NOEXCEPT;
/* The request finished: its blocks leave its worker. KVREG_ENOENT if not in flight. */
KVREG_API int kvreg_router_request_finish(kvreg_router *r, uint64_t request_id) KVREG_NOEXCEPT;

/* Every known worker's terms for a prompt of prompt_blocks blocks given the index's answer
 * matches[0..n_matches) (kvreg_index_query_hashes; workers the router does not know are
 * ignored, and a worker named twice counts once, by its first entry), in ascending
 * (worker_id, dp_rank). out[0..*n_out) gets them; when cap is too small nothing is written,
 * *n_out gets the number of workers and KVREG_ERANGE is returned (call with out NULL and cap
 * 0 to size it). KVREG_EINVAL: r or n_out NULL, out NULL with cap > 0, matches NULL with
 * n_matches > 0, prompt_blocks negative or not finite. */
KVREG_API int kvreg_router_costs(kvreg_router *r, const kvreg_index_match *matches,
                                 size_t n_matches, double prompt_blocks, kvreg_router_cost *out,
                                 size_t cap, size_t *n_out) KVREG_NOEXCEPT;

/* Choose a worker as described above; *chosen gets its terms. Choosing records nothing: add
 * the request with kvreg_router_request_add when it is sent. KVREG_ENOENT: no worker is
 * known. Other errors as kvreg_router_costs. */
KVREG_API int kvreg_router_select(kvreg_router *r, const kvreg_index_match *matches,
                                  size_t n_matches, double prompt_blocks,
                                  kvreg_router_cost *chosen) KVREG_NOEXCEPT;

/* ------------------------------------------------------------------------------------------ */
/* One configuration pattern (0.6; kvreg.h and docs/config.md)                                 */
/* ------------------------------------------------------------------------------------------ */
/* The value of a KVREG_INDEX_OPT_* option in cfg (set or default). */
KVREG_API int kvreg_index_config_get(const kvreg_index_config *cfg, uint32_t option,
                                     uint64_t *value) KVREG_NOEXCEPT;

/* The router's config as options, over the struct (kvreg_router_config_init first: the calls
 * read cfg->size, KVREG_EINVAL when it is smaller than this version's members). Each option
 * is one member and is checked as kvreg_router_new checks it (KVREG_EINVAL, cfg unchanged). */
#define KVREG_ROUTER_OPT_POLICY 1u         /* uint64: policy (KVREG_ROUTER_POLICY_*) */
#define KVREG_ROUTER_OPT_SEED 2u           /* uint64: seed */
#define KVREG_ROUTER_OPT_OVERLAP_WEIGHT 3u /* double: overlap_weight, >= 0 */
#define KVREG_ROUTER_OPT_TEMPERATURE 4u    /* double: temperature, >= 0 */
#define KVREG_ROUTER_OPT_PREFIX_WEIGHT 5u  /* double: prefix_weight, >= 0 */
#define KVREG_ROUTER_OPT_LOAD_WEIGHT 6u    /* double: load_weight, >= 0 */
#define KVREG_ROUTER_OPT_TIER_WEIGHT 16u   /* double: tier_weight[option - 16], 0 .. 1 */
KVREG_API int kvreg_router_config_set(kvreg_router_config *cfg, uint32_t option,
                                      uint64_t value) KVREG_NOEXCEPT;
KVREG_API int kvreg_router_config_get(const kvreg_router_config *cfg, uint32_t option,
                                      uint64_t *value) KVREG_NOEXCEPT;
KVREG_API int kvreg_router_config_set_double(kvreg_router_config *cfg, uint32_t option,
                                             double value) KVREG_NOEXCEPT;
KVREG_API int kvreg_router_config_get_double(const kvreg_router_config *cfg, uint32_t option,
                                             double *value) KVREG_NOEXCEPT;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KVREG_INDEX_H */
