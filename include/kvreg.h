/*
 * libkvreg: name, register and track KV-cache blocks for LLM inference engines.
 *
 * SPDX-License-Identifier: Apache-2.0
 *
 * One header, C99, no C++ types. Every symbol starts with kvreg_ / KVREG_.
 *
 * Objects and their thread-safety
 *   kvreg_config    options for a registry. Single thread; copy-in at kvreg_registry_new().
 *   kvreg_sequence  a token sequence split into blocks. Single owner, NOT thread-safe.
 *   kvreg_registry  the global registry shared by pools; owns its pools. Thread-safe.
 *   kvreg_pool      one pool (tier: GPU, host, disk...). Thread-safe: any number of threads
 *                   may register/acquire/release/query the same or different pools at once.
 *   kvreg_block     a 64-bit handle to one reference on a block held by one pool. Plain value.
 *                   A released or double-released handle is never taken for a later block in
 *                   the same slot (a slot is retired before its generation could repeat); a
 *                   handle with any single bit flipped is always rejected; another pool's or
 *                   registry's handle, or a random value, is accepted with odds below 2^-24.
 *                   Rejected handles return KVREG_ESTALE.
 *   The hashing functions are pure and thread-safe.
 *
 * Status codes: functions that can fail return int, 0 (KVREG_OK) or a negative KVREG_E*
 * code; kvreg_strerror() names it. Yes/no answers come back through an int *present output,
 * never mixed with the status.
 * Outputs are written only on success unless a function says otherwise.
 *
 * Memory: caller input (tokens, hashes, descriptors) is read during the call and never retained.
 * Pointers the library hands out (event tokens, names) are borrowed; their lifetime is stated
 * where they are returned. Nothing is allocated by the library for the caller to free except
 * through the matching kvreg_*_free().
 */
#ifndef KVREG_H
#define KVREG_H

#include <stddef.h>
#include <stdint.h>

#include "kvreg_version.h"

#if defined(KVREG_BUILDING_LIBRARY) && defined(__GNUC__)
#define KVREG_API __attribute__((visibility("default")))
#else
#define KVREG_API
#endif

/* Marks a name kept for the 0.x series as an alias of its regular name (docs/config.md lists
 * them). GCC and clang warn at each use; other compilers see nothing. */
#if defined(__GNUC__) || defined(__clang__)
#define KVREG_DEPRECATED(msg) __attribute__((deprecated(msg)))
#else
#define KVREG_DEPRECATED(msg)
#endif

#ifdef __cplusplus
#define KVREG_NOEXCEPT noexcept
extern "C" {
#else
#define KVREG_NOEXCEPT
#endif

/* ------------------------------------------------------------------------------------------ */
/* Status codes. Values are stable; new codes are only ever added.                             */
/* ------------------------------------------------------------------------------------------ */
#define KVREG_OK 0
#define KVREG_EINVAL (-1)    /* bad argument: NULL, zero size, unknown option, bad value */
#define KVREG_ENOMEM (-2)    /* allocation failed; the call changed nothing */
#define KVREG_ERANGE (-3)    /* output too small, index or count out of range */
#define KVREG_ESTATE (-4)    /* object in the wrong state: block not complete, sequence empty */
#define KVREG_EEXIST (-5)    /* the hash is already registered in this pool */
#define KVREG_ENOENT (-6)    /* no such hash in this pool / nothing stored */
#define KVREG_ESTALE (-7)    /* released, double-released, foreign handle or freed pool */
#define KVREG_EBUSY (-8)     /* not allowed now: from inside an event callback of this registry,
                                or its events are taken by a publisher */
#define KVREG_EOVERFLOW (-9) /* a limit would be passed: a count (references, pools, blocks per
                             * shard) or a size no buffer can have (tokens, blocks) */
#define KVREG_ENOTSUP (-10)  /* the feature was not built into this library (kvreg_features()) */
#define KVREG_EPROTO (-11)   /* malformed input from outside: a wire payload or frame that does
                             * not decode (kvreg_wire.h says where); from the NATS calls, also
                             * a server that cannot be reached or refused a request
                             * (kvreg_nats.h says which call means what) */

/* Static, never NULL; "unknown error" for codes it does not know. */
KVREG_API const char *kvreg_strerror(int status) KVREG_NOEXCEPT;

/* Runtime version: equal to KVREG_VERSION_NUMBER / _STRING of the header the library was
 * built with. Bindings that dlopen the library check these. */
KVREG_API unsigned kvreg_version_number(void) KVREG_NOEXCEPT;
KVREG_API const char *kvreg_version_string(void) KVREG_NOEXCEPT;

/* Optional parts, chosen when the library is built. The exported symbols are the same either
 * way: without a feature its functions return KVREG_ENOTSUP. */
#define KVREG_FEATURE_WIRE 1u /* kvreg_wire.h: vLLM / Dynamo encoders and decoders (msgpack-c) */
#define KVREG_FEATURE_ZMQ 2u  /* kvreg_net.h: ZeroMQ publisher and subscriber (libzmq) */
/* Bitwise OR of the KVREG_FEATURE_* built into the loaded library. */
KVREG_API unsigned kvreg_features(void) KVREG_NOEXCEPT;

/* ------------------------------------------------------------------------------------------ */
/* Hashing (bit-exact with NVIDIA Dynamo 1.0.x, lib/llm/src/tokens.rs)                         */
/*                                                                                            */
/*   block_hash[i]    = XXH3_64(seed = salt, bytes = tokens of block i as u32 little-endian)  */
/*   sequence_hash[0] = block_hash[0]                                                         */
/*   sequence_hash[i] = XXH3_64(seed = salt, u64le(sequence_hash[i-1]) || u64le(block_hash[i]))*/
/*   Only full blocks are hashed; the trailing n % block_size tokens are the partial block.   */
/*   Dynamo's KV router uses salt 1337 (KVREG_ROUTER_SALT).                                   */
/* ------------------------------------------------------------------------------------------ */
#define KVREG_ROUTER_SALT UINT64_C(1337)

typedef struct kvreg_block_info {
    uint64_t block_hash;
    uint64_t sequence_hash;
    uint64_t parent_sequence_hash; /* 0 when has_parent == 0 */
    uint32_t has_parent;           /* 0 for the first block of a sequence */
    uint32_t position;             /* block index in its sequence; KVREG_POSITION_UNKNOWN from
                                      registry queries (the registry does not store it) */
} kvreg_block_info;

#define KVREG_POSITION_UNKNOWN UINT32_MAX

/* Hash of one block's tokens. tokens may be NULL only when n_tokens == 0.
 * n_tokens > SIZE_MAX / 4 is invalid (no buffer holds that many: the byte count would wrap
 * around size_t): the result is then 0 and tokens is not read. */
KVREG_API uint64_t kvreg_block_hash(const uint32_t *tokens, size_t n_tokens,
                                    uint64_t salt) KVREG_NOEXCEPT;

/* The chain step: sequence hash of a block given its parent's sequence hash. */
KVREG_API uint64_t kvreg_sequence_hash(uint64_t parent_sequence_hash, uint64_t block_hash,
                                       uint64_t salt) KVREG_NOEXCEPT;

/* Hash every full block of tokens[0..n_tokens). Writes one kvreg_block_info per full block.
 * On KVREG_OK and KVREG_ERANGE *n_blocks is set to n_tokens / block_size. If out_cap < *n_blocks
 * nothing else is written and KVREG_ERANGE is returned (call with out = NULL, out_cap = 0 to
 * size the array).
 * KVREG_EINVAL: block_size == 0, n_blocks NULL, tokens NULL with n_tokens > 0.
 * KVREG_EOVERFLOW: n_tokens > SIZE_MAX / 4 (no buffer holds that many); nothing is read or
 * written, not even *n_blocks. */
KVREG_API int kvreg_hash_blocks(const uint32_t *tokens, size_t n_tokens, uint32_t block_size,
                                uint64_t salt, kvreg_block_info *out, size_t out_cap,
                                size_t *n_blocks) KVREG_NOEXCEPT;

/* ------------------------------------------------------------------------------------------ */
/* Token block sequences (Dynamo's TokenBlockSequence). Single owner, not thread-safe.         */
/* A block is committed (hashed) as soon as it is full.                                       */
/*                                                                                            */
/*   Size limit: a sequence holds at most PTRDIFF_MAX / 4 tokens and PTRDIFF_MAX /            */
/*   sizeof(kvreg_block_info) complete blocks (each array must fit in PTRDIFF_MAX bytes).     */
/*   An extend or append that would pass either limit returns KVREG_EOVERFLOW before reading  */
/*   a token or allocating; KVREG_ENOMEM means an allocation within the limits failed. Both   */
/*   leave the sequence unchanged. Appends are amortised O(1) per token.                      */
/* ------------------------------------------------------------------------------------------ */
typedef struct kvreg_sequence kvreg_sequence;

/* KVREG_EINVAL if out is NULL or block_size is 0. */
KVREG_API int kvreg_sequence_new(kvreg_sequence **out, uint32_t block_size,
                                 uint64_t salt) KVREG_NOEXCEPT;
KVREG_API void kvreg_sequence_free(kvreg_sequence *seq) KVREG_NOEXCEPT; /* NULL-safe */

/* Append tokens; *n_completed (may be NULL) receives how many blocks this call completed.
 * The new blocks are the last *n_completed of kvreg_sequence_num_blocks().
 * tokens may come from this sequence's own kvreg_sequence_block_tokens() or
 * kvreg_sequence_partial_tokens() (n_tokens within that view): the tokens appended are the ones
 * the view showed before the call, and the view is invalid afterwards like any other.
 * KVREG_EINVAL: seq NULL, or tokens NULL with n_tokens > 0. KVREG_EOVERFLOW: the total would
 * pass the size limit above. KVREG_ENOMEM: allocation failed. On any error the sequence is
 * unchanged and *n_completed is not written. */
KVREG_API int kvreg_sequence_extend(kvreg_sequence *seq, const uint32_t *tokens, size_t n_tokens,
                                    size_t *n_completed) KVREG_NOEXCEPT;
/* Append one token; *completed (may be NULL) is 1 if it completed a block, else 0.
 * Errors as kvreg_sequence_extend(). */
KVREG_API int kvreg_sequence_append(kvreg_sequence *seq, uint32_t token,
                                    int *completed) KVREG_NOEXCEPT;
/* Keep the first n_tokens tokens (no-op if n_tokens >= total). Surviving hashes are kept. */
KVREG_API int kvreg_sequence_truncate(kvreg_sequence *seq, size_t n_tokens) KVREG_NOEXCEPT;
/* Remove the last n tokens. KVREG_ERANGE (unchanged) if n > total tokens. */
KVREG_API int kvreg_sequence_unwind(kvreg_sequence *seq, size_t n) KVREG_NOEXCEPT;
/* Remove and return the last token. KVREG_ENOENT if the sequence is empty. */
KVREG_API int kvreg_sequence_pop(kvreg_sequence *seq, uint32_t *token) KVREG_NOEXCEPT;
/* Drop every token; block size and salt are kept. */
KVREG_API int kvreg_sequence_reset(kvreg_sequence *seq) KVREG_NOEXCEPT;

/* Getters return 0 for a NULL sequence. */
KVREG_API size_t kvreg_sequence_num_blocks(const kvreg_sequence *seq) KVREG_NOEXCEPT;
KVREG_API size_t kvreg_sequence_total_tokens(const kvreg_sequence *seq) KVREG_NOEXCEPT;
KVREG_API uint32_t kvreg_sequence_block_size(const kvreg_sequence *seq) KVREG_NOEXCEPT;
KVREG_API uint64_t kvreg_sequence_salt(const kvreg_sequence *seq) KVREG_NOEXCEPT;

/* Info of complete block `index`; KVREG_ERANGE if index >= num_blocks. */
KVREG_API int kvreg_sequence_block(const kvreg_sequence *seq, size_t index,
                                   kvreg_block_info *out) KVREG_NOEXCEPT;
/* Borrowed view of a complete block's tokens (block_size of them), valid until the sequence
 * is next modified or freed. KVREG_ERANGE if index >= num_blocks. */
KVREG_API int kvreg_sequence_block_tokens(const kvreg_sequence *seq, size_t index,
                                          const uint32_t **tokens, size_t *n_tokens) KVREG_NOEXCEPT;
/* Borrowed view of the partial (uncommitted) block's tokens; *n_tokens may be 0. */
KVREG_API int kvreg_sequence_partial_tokens(const kvreg_sequence *seq, const uint32_t **tokens,
                                            size_t *n_tokens) KVREG_NOEXCEPT;

/* ------------------------------------------------------------------------------------------ */
/* Events                                                                                     */
/* ------------------------------------------------------------------------------------------ */
#define KVREG_EVENT_REGISTER 1u /* the hash entered its first pool (per medium: KVREG_OPT_EVENT_MODE) */
#define KVREG_EVENT_REMOVE 2u   /* the hash left its last pool (per medium: KVREG_OPT_EVENT_MODE) */
#define KVREG_EVENT_CLEARED 3u  /* kvreg_registry_clear(): every hash left every pool at once;
                                   no Remove is sent for them (vLLM's AllBlocksCleared) */

/* The storage medium (tier) of a pool, set when it is created and carried in its events.
 * Names on the wire: vLLM "GPU" / "CPU" / "STORAGE"; Dynamo device / host_pinned / disk /
 * external. 0 is GPU, so pools made with kvreg_pool_new() are GPU pools. */
#define KVREG_MEDIUM_GPU 0u
#define KVREG_MEDIUM_CPU 1u
#define KVREG_MEDIUM_STORAGE 2u
#define KVREG_MEDIUM_EXTERNAL 3u
#define KVREG_MEDIUM_COUNT 4u

/* Fixed size (88 bytes on LP64); new fields will take the reserved words, so arrays of
 * events keep their stride across versions. */
typedef struct kvreg_event {
    uint32_t kind;            /* KVREG_EVENT_* */
    uint32_t pool_id;         /* kvreg_pool_id() of the pool whose call caused it */
    uint64_t event_id;        /* 0, 1, 2, ... per registry, +1 per event emitted */
    uint64_t sequence_hash;
    uint64_t block_hash;
    uint64_t parent_sequence_hash; /* 0 when has_parent == 0 */
    uint32_t has_parent;
    uint32_t n_tokens;        /* 0 when the tokens are not known (see below) */
    const uint32_t *tokens;   /* borrowed: valid during the callback / until the next poll */
    uint32_t medium;          /* KVREG_MEDIUM_* of the entry (0 for Cleared): KVREG_OPT_EVENT_MODE */
    uint32_t reserved32;      /* zero */
    uint64_t reserved[3];     /* zero */
} kvreg_event;

/* event_id of the events a snapshot carries (they were not emitted; see kvreg_snapshot). */
#define KVREG_EVENT_ID_SNAPSHOT UINT64_MAX

/* The most events one callback call carries; more are delivered in consecutive calls. */
#define KVREG_EVENTS_PER_CALL 1024u

/* Called with events in event_id order, ids without gaps. Never called while the library holds
 * a lock, and never concurrently with itself for one registry. It must not unwind (no C++
 * exceptions, Rust panics or longjmp) through library frames. See "Delivery" at
 * KVREG_OPT_DELIVERY and "Re-entrancy" at kvreg_registry_set_event_fn. */
typedef void (*kvreg_event_fn)(const kvreg_event *events, size_t n_events, void *user_data);
typedef void (*kvreg_destroy_fn)(void *user_data);

/* ------------------------------------------------------------------------------------------ */
/* Configuration (ABI-stable: options are keys, values are uint64_t).                         */
/* ------------------------------------------------------------------------------------------ */
typedef struct kvreg_config kvreg_config;

/* Event delivery.
 * INLINE (default): the callback runs on a thread that is making a registry call, never on a
 * thread of the library's own (it has none). Whichever thread finds events ready and nobody
 * delivering becomes the deliverer: it hands every ready event, its own and other threads', to
 * the callback, one call at a time, until none is left, then returns from its API call. Other
 * threads cannot keep it there: once it has delivered the events emitted before it started plus
 * KVREG_EVENTS_PER_CALL more, the next thread that emits events takes the delivery over (after
 * the callback call in progress returns) and the first one returns. So:
 *  - single-threaded, a call's events are delivered before it returns, in one callback call
 *    when they are at most KVREG_EVENTS_PER_CALL;
 *  - with several threads, a call may return before its events are delivered (another thread
 *    is delivering and will deliver them before its own call returns), and one callback call
 *    may carry several calls' events. kvreg_registry_flush() waits for delivery.
 * A call that emits no event (EEXIST, a second pool taking a hash, acquire, queries, a release
 * that is not the last) never waits for a callback. A call that emits events waits only when
 * the library's event ring (4096 events in flight) is full because the callback is slower than
 * the threads producing events, or when it takes the delivery over as above (then for at most
 * the one callback call in progress, before it delivers).
 * POLL: events wait in a bounded queue for kvreg_registry_poll() / kvreg_registry_poll_wait();
 * when it is full (or cannot grow for lack of memory), new events are dropped and counted
 * (KVREG_STAT_EVENTS_DROPPED) and their event_ids are skipped, so the consumer sees a gap; the
 * registry's state is never rolled back for a lost event. The queue's memory follows its
 * length (it is given back as the consumer drains it; what the last poll returned is kept until
 * the next poll, because its events' tokens point into it). */
#define KVREG_OPT_DELIVERY 1u
#define KVREG_DELIVERY_INLINE 0u
#define KVREG_DELIVERY_POLL 1u
/* 1: the registry keeps a copy of each block's tokens (once per hash, shared by pools), so
 * kvreg_block_tokens() works and Remove events carry tokens. Default 0: tokens are not
 * stored; Register events still carry the tokens given at registration. A released copy's
 * memory is kept for the next one of its size class (exact below 512 tokens, then classes an
 * eighth apart) until kvreg_registry_clear or kvreg_registry_free. */
#define KVREG_OPT_KEEP_TOKENS 2u
/* Poll queue capacity in events (default 65536, 1 .. 2^32, and at most SIZE_MAX). */
#define KVREG_OPT_POLL_CAPACITY 3u
/* Number of lock shards of the hash table, a power of two (default 64, 1 .. 4096). */
#define KVREG_OPT_SHARDS 4u
/* Blocks to set memory aside for at kvreg_registry_new (default 0: memory grows on demand). A
 * block here is one pool's hold on a hash: a hash two pools hold counts twice. While the
 * registry holds at most this many, registering never allocates memory for its records or
 * grows its hash index, and never touches a page for the first time (on a virtual machine a
 * first touch can cost microseconds a page); releasing never gives that memory back, nor does
 * kvreg_registry_clear. Engines know this number: the blocks their KV cache tiers hold. About
 * 60 bytes a block, plus a margin per shard for hashes falling unevenly on shards, allocated
 * and touched by kvreg_registry_new, held until kvreg_registry_free. Past it, memory grows on
 * demand as without it. Not reserved: stored tokens (KVREG_OPT_KEEP_TOKENS), the POLL queue,
 * and events of more than 64 tokens a block. kvreg_config_set: KVREG_EINVAL above
 * 4096 * 16,776,960 (every shard full); kvreg_registry_new: KVREG_EINVAL if one shard's share would be more than
 * a shard holds (see kvreg_register), KVREG_ENOMEM if the memory cannot be had. */
#define KVREG_OPT_RESERVE_BLOCKS 5u
/* What a Register and a Remove stand for when pools on different media (tiers) hold a hash.
 * Both modes keep this promise to a consumer that keys its entries by (sequence hash, medium):
 * every Remove names an entry an earlier Register (or the snapshot) made, and whenever no call
 * is in progress its entries are exactly what the registry holds.
 * KVREG_EVENTS_GLOBAL (default): one Register when a hash first enters any pool, one Remove
 *   when it leaves the last one, whatever pools hold it in between. The Remove carries the
 *   medium its Register carried (the medium of the pool that first registered the hash), not
 *   that of the pool that let go last: the pair names one entry, so a consumer keyed by
 *   (hash, medium) removes what it stored. The medium then says where the hash was first
 *   stored, not where it is now; consumers that need the tiers use the per-tier mode.
 * KVREG_EVENTS_PER_TIER: a Register for medium M when a hash enters the first pool of medium M,
 *   a Remove for M when the last pool of medium M lets go, while copies on other media stay
 *   (as vLLM's offloading connector and Dynamo's block manager emit: a block offloaded from a
 *   GPU pool to a CPU pool gives a Register for CPU; evicted from the GPU pool, a Remove for
 *   GPU while the CPU copy stays). A hash on n media emits n Registers and n Removes; its
 *   events carry the hash's block and parent hashes, and the Register for a further medium
 *   carries the tokens given to that registration (or, with none, the stored ones).
 * In both modes kvreg_registry_clear emits one Cleared event (every entry on every medium
 * goes), and a snapshot holds one Register per entry the mode's stream would have made: per
 * hash in the global mode (with its Register's medium), per (hash, medium) held in the
 * per-tier mode. kvreg_config_set: KVREG_EINVAL for another value. */
#define KVREG_OPT_EVENT_MODE 6u
#define KVREG_EVENTS_GLOBAL 0u
#define KVREG_EVENTS_PER_TIER 1u

KVREG_API int kvreg_config_new(kvreg_config **out) KVREG_NOEXCEPT;
KVREG_API void kvreg_config_free(kvreg_config *cfg) KVREG_NOEXCEPT; /* NULL-safe */
/* KVREG_EINVAL for an unknown option or a value out of range (cfg unchanged). */
KVREG_API int kvreg_config_set(kvreg_config *cfg, uint32_t option, uint64_t value) KVREG_NOEXCEPT;
/* The callback the registry starts with (INLINE mode only: kvreg_registry_new() returns
 * KVREG_EINVAL for a config with both a callback and POLL delivery). fn NULL clears it.
 * Ownership of user_data: on success the config owns it, and every registry built from the
 * config shares it; destroy (may be NULL) runs exactly once, when the last of them lets go
 * (the config freed or given another callback, each such registry freed or given another
 * callback; with fn NULL, at once). On failure (KVREG_ENOMEM) the caller keeps it. */
KVREG_API int kvreg_config_set_event_fn(kvreg_config *cfg, kvreg_event_fn fn, void *user_data,
                                        kvreg_destroy_fn destroy) KVREG_NOEXCEPT;

/* ------------------------------------------------------------------------------------------ */
/* Registry                                                                                   */
/* ------------------------------------------------------------------------------------------ */
typedef struct kvreg_registry kvreg_registry;

/* cfg may be NULL (defaults). The config can be freed or reused afterwards. */
KVREG_API int kvreg_registry_new(kvreg_registry **out, const kvreg_config *cfg) KVREG_NOEXCEPT;

/* Frees the registry, every pool it still owns and every stored block, emitting no events.
 * Events still queued are discarded; the callback's reference to user_data is dropped (see
 * kvreg_config_set_event_fn). NULL-safe. Must not be called while other threads use it or its
 * pools. Called from inside the registry's own callback it prints a message and aborts the
 * process (it would otherwise return into freed memory). */
KVREG_API void kvreg_registry_free(kvreg_registry *reg) KVREG_NOEXCEPT;

/* Replace the event callback (fn NULL: no callback; events are then counted and dropped in
 * INLINE mode). When this returns, the old callback is not running and will not be called
 * again, and its reference to its user_data is dropped (destroy runs if it was the last).
 * It waits for at most the callback call in progress, however busy other threads keep the
 * delivery: the thread delivering installs the new callback between two calls.
 * The new user_data is the registry's (with fn NULL, destroyed at once).
 * Events not yet delivered go to the new callback. KVREG_EBUSY when called from inside a
 * callback, KVREG_EINVAL in POLL mode, KVREG_ENOMEM: in each case the caller keeps user_data.
 *
 * Re-entrancy: from inside a callback, a thread may call any registry, pool and block
 * function of the same registry (register, acquire, release, queries, kvreg_pool_free ...).
 * Events those calls cause are delivered after the current callback returns, by the same
 * thread, in order. Not allowed from a callback: kvreg_registry_set_event_fn (KVREG_EBUSY),
 * kvreg_registry_flush (KVREG_EBUSY) and kvreg_registry_free (aborts). A callback should not
 * wait for another thread's kvreg call on the same registry: if the event ring is full, or if
 * that call is taking the delivery over, it waits for the callback to return. */
KVREG_API int kvreg_registry_set_event_fn(kvreg_registry *reg, kvreg_event_fn fn, void *user_data,
                                          kvreg_destroy_fn destroy) KVREG_NOEXCEPT;

/* POLL mode: move up to cap queued events into out, oldest first; *n_events gets the count
 * (0 when the queue is empty). Event tokens point into the registry and stay valid until the
 * next kvreg_registry_poll() on this registry (by any thread) or its free: with several
 * pollers, each event goes to one of them, and a poller that reads tokens must copy them before
 * another poll can run (serialize the pollers). KVREG_EINVAL in INLINE mode. KVREG_EBUSY while a
 * publisher (kvreg_net.h, kvreg_nats.h) takes the registry's events: it is their only poller. */
KVREG_API int kvreg_registry_poll(kvreg_registry *reg, kvreg_event *out, size_t cap,
                                  size_t *n_events) KVREG_NOEXCEPT;

/* POLL mode: as kvreg_registry_poll, but when the queue is empty, sleep until an event is
 * queued, kvreg_registry_wakeup() is called, or timeout_ms milliseconds pass (-1: no limit,
 * 0: do not wait). Returns KVREG_OK in all three cases (*n_events is 0 when nothing came).
 * The waiting thread first spins for a few microseconds (512 pause instructions, yielding its
 * CPU after every 64, so that on a machine with more threads than CPUs the threads producing
 * events run meanwhile), then sleeps in the kernel (no timer ticks): a producer that delivers
 * every few microseconds then pays no wake-up per batch, and an idle consumer costs nothing.
 * KVREG_EINVAL in INLINE mode or for timeout_ms < -1; KVREG_EBUSY as kvreg_registry_poll (a
 * wait in progress when a publisher takes the events returns KVREG_EBUSY at once). */
KVREG_API int kvreg_registry_poll_wait(kvreg_registry *reg, kvreg_event *out, size_t cap,
                                       size_t *n_events, int timeout_ms) KVREG_NOEXCEPT;

/* Make every kvreg_registry_poll_wait() sleeping on reg now return (with what is queued, maybe
 * nothing), and the next one too if none is sleeping (the wake-up is not lost). Wake-ups merge:
 * any number of calls made before the wait they end returns end that one wait, and the wait
 * after it sleeps as usual. To stop several consumer threads with one call, have each
 * consumer that stops call kvreg_registry_wakeup() again, for the next. For shutting down a
 * consumer thread. Safe from any thread and from a callback. KVREG_EINVAL if reg NULL. */
KVREG_API int kvreg_registry_wakeup(kvreg_registry *reg) KVREG_NOEXCEPT;

/* Wait until every event emitted before this call began has been delivered: handed to the
 * callback (and the callback returned) in INLINE mode, queued or dropped in POLL mode. Use it
 * before reading counters kept by the callback, or at shutdown. KVREG_EBUSY from inside a
 * callback (it would wait for itself). */
KVREG_API int kvreg_registry_flush(kvreg_registry *reg) KVREG_NOEXCEPT;

/* Empty every pool at once (vLLM's reset_prefix_cache): every reference every pool holds is
 * dropped, every live handle becomes stale (KVREG_ESTALE), and ONE Cleared event is emitted
 * instead of a Remove per hash. Pools stay usable. The Cleared event's id is a clean cut:
 * events with lower ids happened before the clear, higher ids after it (registrations racing
 * with the clear either come before it and are cleared, or come after it and stay).
 * The Cleared event has pool_id 0, medium 0, all hashes 0 and no tokens; every call emits
 * one, also on an empty registry (a consumer can count resets). Stored tokens (KEEP_TOKENS)
 * are freed; KVREG_STAT_HASHES and every kvreg_pool_size() read 0 afterwards. A handle from
 * before the clear stays KVREG_ESTALE for good, also once its hash is registered again.
 * It takes every shard lock at once: registry calls wait for it (O(blocks ever held)).
 * (ThreadSanitizer follows at most 64 locks held by one thread: with KVREG_OPT_SHARDS above
 * 64, run it with TSAN_OPTIONS=detect_deadlocks=0.)
 * Allowed from a callback (its event is then delivered after the current callback returns,
 * like any nested call's). KVREG_EINVAL if reg is NULL; KVREG_ENOMEM only inside a callback
 * when the event ring is full and spilling it needs memory that cannot be had (nothing
 * changed). */
KVREG_API int kvreg_registry_clear(kvreg_registry *reg) KVREG_NOEXCEPT;

/* Snapshot: the registered set at one position of the event stream, for a consumer that
 * joined late or lost events (Dynamo's dump_events). It holds one Register event per hash
 * registered in any pool (per medium it is held on in KVREG_EVENTS_PER_TIER mode), parents
 * before children (when the parent is in the snapshot too), with event_id
 * KVREG_EVENT_ID_SNAPSHOT, the pool_id of a pool holding it, the medium as
 * KVREG_OPT_EVENT_MODE says and
 * (KEEP_TOKENS) its tokens, owned by the snapshot. Its position P is a clean cut: applying the
 * snapshot, then every event with event_id >= P, gives the registry's state (P counts events
 * emitted, whether or not they were delivered, polled or dropped yet). It is taken with every
 * shard locked (registry calls wait for the copy: O(blocks ever held)); the ordering is done
 * after the locks are released. Emits no event. Allowed from a callback and in POLL mode.
 * The snapshot is independent of the registry (free it any time, also after the registry).
 * KVREG_EINVAL for NULL arguments, KVREG_ENOMEM (*out untouched). */
typedef struct kvreg_snapshot kvreg_snapshot;
KVREG_API int kvreg_registry_snapshot(kvreg_registry *reg, kvreg_snapshot **out) KVREG_NOEXCEPT;
KVREG_API void kvreg_snapshot_free(kvreg_snapshot *snap) KVREG_NOEXCEPT; /* NULL-safe */
/* The event_id of the first event the snapshot does not contain (0 for NULL). */
KVREG_API uint64_t kvreg_snapshot_position(const kvreg_snapshot *snap) KVREG_NOEXCEPT;
/* Borrowed array of the snapshot's events (*n_events of them, maybe 0), and their tokens, valid
 * until kvreg_snapshot_free(). KVREG_EINVAL for a NULL argument. */
KVREG_API int kvreg_snapshot_events(const kvreg_snapshot *snap, const kvreg_event **events,
                                    size_t *n_events) KVREG_NOEXCEPT;

/* *present = 1 if sequence_hash is registered in any pool of the registry, else 0.
 * KVREG_OK, or KVREG_EINVAL for a NULL argument (*present untouched). */
KVREG_API int kvreg_registry_contains(const kvreg_registry *reg, uint64_t sequence_hash,
                                      int *present) KVREG_NOEXCEPT;

#define KVREG_STAT_HASHES 1u          /* distinct hashes registered (in any pool) */
#define KVREG_STAT_POOLS 2u           /* live pools */
#define KVREG_STAT_EVENTS_REGISTER 3u /* Register events emitted (delivered, queued or dropped) */
#define KVREG_STAT_EVENTS_REMOVE 4u   /* Remove events emitted */
#define KVREG_STAT_EVENTS_DROPPED 5u  /* dropped: POLL queue full or out of memory, INLINE with no
                                        callback, or lost in kvreg_pool_free (see there) */
#define KVREG_STAT_EVENTS_QUEUED 6u   /* waiting in the POLL queue */
#define KVREG_STAT_NEXT_EVENT_ID 7u   /* event_id the next event will get */
#define KVREG_STAT_TOKEN_BYTES 8u     /* bytes of stored tokens (KEEP_TOKENS) */
#define KVREG_STAT_EVENTS_CLEARED 9u  /* Cleared events emitted (kvreg_registry_clear) */
/* KVREG_EINVAL for an unknown stat. A consistent snapshot of each value, not of all. */
KVREG_API int kvreg_registry_stat(const kvreg_registry *reg, uint32_t stat,
                                  uint64_t *value) KVREG_NOEXCEPT;

/* ------------------------------------------------------------------------------------------ */
/* Pools                                                                                      */
/* ------------------------------------------------------------------------------------------ */
typedef struct kvreg_pool kvreg_pool;

/* At most KVREG_MAX_POOLS live pools per registry (KVREG_EOVERFLOW beyond). name is copied
 * (NULL gives ""); the registry keeps one copy of every distinct name it is given until it is
 * freed, so kvreg_pool_name() stays valid (engines reuse a few tier names). */
#define KVREG_MAX_POOLS 65535u
KVREG_API int kvreg_pool_new(kvreg_pool **out, kvreg_registry *reg,
                             const char *name) KVREG_NOEXCEPT;
/* As kvreg_pool_new, for a pool on the given medium (KVREG_MEDIUM_*; KVREG_EINVAL beyond). */
KVREG_API int kvreg_pool_new_medium(kvreg_pool **out, kvreg_registry *reg, const char *name,
                                    uint32_t medium) KVREG_NOEXCEPT;
/* The pool's KVREG_MEDIUM_* (KVREG_MEDIUM_GPU for NULL). */
KVREG_API uint32_t kvreg_pool_medium(const kvreg_pool *pool) KVREG_NOEXCEPT;

/* Releases every reference the pool still holds (Remove events for hashes no other pool
 * holds, delivered as for any call: see KVREG_OPT_DELIVERY) and retires the pool. It visits
 * only this pool's blocks: its cost does not depend on other pools. NULL-safe. The pool's
 * memory stays with the registry: later calls with this pointer return KVREG_ESTALE, until a
 * new pool reuses the slot (the first 1024 pools get fresh slots; after that freed slots are
 * reused least-recently first). Allowed from a callback. It cannot fail:
 * if memory runs out, a Remove goes out without its tokens, and inside a callback it may only
 * be counted in KVREG_STAT_EVENTS_DROPPED (without an event_id). Calls other threads make on
 * the pool meanwhile either complete before the sweep reaches their hash or fail with
 * KVREG_ESTALE; nothing they register survives it. */
KVREG_API void kvreg_pool_free(kvreg_pool *pool) KVREG_NOEXCEPT;

/* Small integer naming the pool in events (1 .. KVREG_MAX_POOLS); 0 for NULL. */
KVREG_API uint32_t kvreg_pool_id(const kvreg_pool *pool) KVREG_NOEXCEPT;
/* Borrowed, valid until the registry is freed; "" for NULL. */
KVREG_API const char *kvreg_pool_name(const kvreg_pool *pool) KVREG_NOEXCEPT;
/* Number of distinct hashes the pool holds (0 for NULL or a freed pool). */
KVREG_API size_t kvreg_pool_size(const kvreg_pool *pool) KVREG_NOEXCEPT;

/* ------------------------------------------------------------------------------------------ */
/* Registering and releasing blocks                                                           */
/* ------------------------------------------------------------------------------------------ */
typedef uint64_t kvreg_block; /* opaque; 0 (KVREG_BLOCK_NONE) is never a valid handle */
#define KVREG_BLOCK_NONE UINT64_C(0)

/* A complete block described by its hashes (from kvreg_hash_blocks or a sequence, or computed
 * elsewhere with the same rule). tokens are optional: n_tokens == 0 registers by hash only.
 * If block_size != 0 and tokens are given, n_tokens < block_size is a partial block
 * (KVREG_ESTATE) and n_tokens > block_size is KVREG_EINVAL. The registry does not re-hash. */
typedef struct kvreg_block_desc {
    uint64_t sequence_hash;
    uint64_t block_hash;
    uint64_t parent_sequence_hash; /* ignored when has_parent == 0 */
    uint32_t has_parent;
    uint32_t block_size;           /* expected tokens per block, 0 = do not check */
    const uint32_t *tokens;        /* NULL when n_tokens == 0 */
    size_t n_tokens;
} kvreg_block_desc;

/* Register one complete block in pool; *out gets a handle holding one reference (it is already
 * set when the block's Register event reaches the callback, on any thread).
 * A shard holds at most 16,776,960 blocks (2^24 - 256) at once (KVREG_OPT_SHARDS shards, 64 by default:
 * over a billion in all); past that, KVREG_EOVERFLOW.
 * Checks in this order: arguments (KVREG_EINVAL), completeness (KVREG_ESTATE), pool retired
 * (KVREG_ESTALE), already live in this pool (KVREG_EEXIST: nothing changes; use kvreg_acquire).
 * The first registration of a hash in any pool emits a Register event; others emit nothing.
 * A hash keeps the block and parent hashes of that first registration (its Register carries
 * them, and so do its Remove and kvreg_block_get_info in every pool); a later registration
 * naming other ones in another pool does not change them. */
KVREG_API KVREG_DEPRECATED("use kvreg_pool_register") int kvreg_register(kvreg_pool *pool, const kvreg_block_desc *desc,
                             kvreg_block *out) KVREG_NOEXCEPT;

/* Register n blocks in input order (n == 0 with NULL arrays is a no-op). Per block, out_blocks[i] gets the handle (or
 * KVREG_BLOCK_NONE) and out_status[i] (optional) the status kvreg_register would return.
 * *n_registered (optional) counts the successes. Returns KVREG_OK unless the arguments
 * themselves are bad (then nothing is registered). The Register events of one call have
 * increasing ids in input order; single-threaded they arrive in one callback call (in
 * consecutive calls of KVREG_EVENTS_PER_CALL when there are more). See KVREG_OPT_DELIVERY. */
KVREG_API KVREG_DEPRECATED("use kvreg_pool_register_batch") int kvreg_register_batch(kvreg_pool *pool, const kvreg_block_desc *descs, size_t n,
                                   kvreg_block *out_blocks, int *out_status,
                                   size_t *n_registered) KVREG_NOEXCEPT;

/* Register complete block `index` of seq (with its tokens). KVREG_ESTATE for the partial block
 * (index == num_blocks), KVREG_ERANGE beyond it. */
KVREG_API KVREG_DEPRECATED("use kvreg_pool_register_sequence_block") int kvreg_register_sequence_block(kvreg_pool *pool, const kvreg_sequence *seq,
                                            size_t index, kvreg_block *out) KVREG_NOEXCEPT;

/* Batch form: blocks [first, first + count) of seq; as kvreg_register_batch (count 0 with NULL
 * outputs is a no-op). KVREG_ERANGE if the range goes past the complete blocks (nothing
 * registered). */
KVREG_API KVREG_DEPRECATED("use kvreg_pool_register_sequence") int kvreg_register_sequence(kvreg_pool *pool, const kvreg_sequence *seq, size_t first,
                                      size_t count, kvreg_block *out_blocks, int *out_status,
                                      size_t *n_registered) KVREG_NOEXCEPT;

/* Take another reference on the block registered under sequence_hash in this pool; *out is the
 * same handle value kvreg_register returned. KVREG_ENOENT if the pool does not hold it. Every
 * successful register/acquire must be paired with exactly one release. */
KVREG_API KVREG_DEPRECATED("use kvreg_pool_acquire") int kvreg_acquire(kvreg_pool *pool, uint64_t sequence_hash,
                            kvreg_block *out) KVREG_NOEXCEPT;

/* Acquire the longest prefix of hashes[0..n) held by the pool: out_blocks (room for n handles)
 * gets out_blocks[0..*n_acquired). On an error nothing stays acquired. */
KVREG_API KVREG_DEPRECATED("use kvreg_pool_acquire_prefix") int kvreg_acquire_prefix(kvreg_pool *pool, const uint64_t *hashes, size_t n,
                                   kvreg_block *out_blocks, size_t *n_acquired) KVREG_NOEXCEPT;

/* Drop one reference. When the pool's last reference goes, the hash leaves the pool at once;
 * when it leaves its last pool, a Remove event is emitted. KVREG_ESTALE for a handle that is
 * not live in this pool (released, double-released, another pool's or registry's). */
KVREG_API KVREG_DEPRECATED("use kvreg_pool_release") int kvreg_release(kvreg_pool *pool, kvreg_block block) KVREG_NOEXCEPT;

/* Release n handles in order (n == 0 with NULL arrays is a no-op); out_status[i] (optional) per handle; *n_released (optional)
 * counts successes. Remove events of one call are delivered as for
 * kvreg_register_batch. */
KVREG_API KVREG_DEPRECATED("use kvreg_pool_release_batch") int kvreg_release_batch(kvreg_pool *pool, const kvreg_block *blocks, size_t n,
                                  int *out_status, size_t *n_released) KVREG_NOEXCEPT;

/* ------------------------------------------------------------------------------------------ */
/* Queries                                                                                    */
/* ------------------------------------------------------------------------------------------ */
/* *present = 1 if the pool holds sequence_hash, else 0. Returns KVREG_OK, or KVREG_EINVAL
 * (NULL argument) / KVREG_ESTALE (freed pool) with *present untouched: the answer and the status
 * never share a channel, so `if (kvreg_pool_contains(...))` cannot mistake an error for "held". */
KVREG_API int kvreg_pool_contains(const kvreg_pool *pool, uint64_t sequence_hash,
                                  int *present) KVREG_NOEXCEPT;

/* *n_matched = length of the longest prefix of hashes[0..n) the pool holds (stops at the first
 * miss). Takes no references. */
KVREG_API int kvreg_pool_match(const kvreg_pool *pool, const uint64_t *hashes, size_t n,
                               size_t *n_matched) KVREG_NOEXCEPT;

/* Hashes of a live handle (position is KVREG_POSITION_UNKNOWN): its sequence hash, and the
 * block and parent hashes its hash was first registered with (kvreg_register). KVREG_ESTALE if
 * not live. */
KVREG_API KVREG_DEPRECATED("use kvreg_pool_block_info") int kvreg_block_get_info(const kvreg_pool *pool, kvreg_block block,
                                   kvreg_block_info *out) KVREG_NOEXCEPT;

/* Handle's reference count in its pool. KVREG_ESTALE if not live. */
KVREG_API KVREG_DEPRECATED("use kvreg_pool_block_refcount") int kvreg_block_refcount(const kvreg_pool *pool, kvreg_block block,
                                   uint32_t *refcount) KVREG_NOEXCEPT;

/* Copy the block's stored tokens (KEEP_TOKENS) into out[0..cap); *n_tokens gets their number,
 * also when KVREG_ERANGE is returned because cap is too small (nothing copied then; call with
 * out = NULL, cap = 0 to size the buffer). KVREG_ENOENT if no tokens are stored for it;
 * KVREG_ESTALE if the handle is not live. */
KVREG_API KVREG_DEPRECATED("use kvreg_pool_block_tokens") int kvreg_block_tokens(const kvreg_pool *pool, kvreg_block block, uint32_t *out,
                                 size_t cap, size_t *n_tokens) KVREG_NOEXCEPT;

/* ------------------------------------------------------------------------------------------ */
/* Regular names (0.6). Every object's calls are kvreg_<object>_<verb>: the handle first, then */
/* inputs, then outputs (a _new returns its object through its first parameter). The names    */
/* above marked KVREG_DEPRECATED are aliases of these, kept (exported, working) for the 0.x    */
/* series; docs/config.md maps each old name to its new one.                                  */
/* ------------------------------------------------------------------------------------------ */

/* A block to register, as kvreg_block_desc, with room to grow: `size` is sizeof the struct the
 * caller was compiled with, so a later library can tell which fields it carries. Start from
 * KVREG_POOL_BLOCK_DESC_INIT (every other field 0) and set what you need. The library takes
 * a size it knows (this version: exactly sizeof(kvreg_pool_block_desc)); anything else is
 * KVREG_EINVAL. */
typedef struct kvreg_pool_block_desc {
    size_t size;                   /* sizeof(kvreg_pool_block_desc) */
    uint64_t sequence_hash;
    uint64_t block_hash;
    uint64_t parent_sequence_hash; /* ignored when has_parent == 0 */
    uint32_t has_parent;
    uint32_t block_size;           /* expected tokens per block, 0 = do not check */
    const uint32_t *tokens;        /* NULL when n_tokens == 0 */
    size_t n_tokens;
} kvreg_pool_block_desc;
#define KVREG_POOL_BLOCK_DESC_INIT { sizeof(kvreg_pool_block_desc), 0, 0, 0, 0, 0, NULL, 0 }

/* kvreg_register with a sized descriptor; same checks, events and results. */
KVREG_API int kvreg_pool_register(kvreg_pool *pool, const kvreg_pool_block_desc *desc,
                                  kvreg_block *out) KVREG_NOEXCEPT;
/* kvreg_register_batch with sized descriptors (every descs[i].size the same known size, else
 * KVREG_EINVAL and nothing registered). */
KVREG_API int kvreg_pool_register_batch(kvreg_pool *pool, const kvreg_pool_block_desc *descs,
                                        size_t n, kvreg_block *out_blocks, int *out_status,
                                        size_t *n_registered) KVREG_NOEXCEPT;
/* As kvreg_register_sequence_block / kvreg_register_sequence. */
KVREG_API int kvreg_pool_register_sequence_block(kvreg_pool *pool, const kvreg_sequence *seq,
                                                 size_t index, kvreg_block *out) KVREG_NOEXCEPT;
KVREG_API int kvreg_pool_register_sequence(kvreg_pool *pool, const kvreg_sequence *seq,
                                           size_t first, size_t count, kvreg_block *out_blocks,
                                           int *out_status, size_t *n_registered) KVREG_NOEXCEPT;
/* As kvreg_acquire / kvreg_acquire_prefix / kvreg_release / kvreg_release_batch. */
KVREG_API int kvreg_pool_acquire(kvreg_pool *pool, uint64_t sequence_hash,
                                 kvreg_block *out) KVREG_NOEXCEPT;
KVREG_API int kvreg_pool_acquire_prefix(kvreg_pool *pool, const uint64_t *hashes, size_t n,
                                        kvreg_block *out_blocks, size_t *n_acquired) KVREG_NOEXCEPT;
KVREG_API int kvreg_pool_release(kvreg_pool *pool, kvreg_block block) KVREG_NOEXCEPT;
KVREG_API int kvreg_pool_release_batch(kvreg_pool *pool, const kvreg_block *blocks, size_t n,
                                       int *out_status, size_t *n_released) KVREG_NOEXCEPT;
/* As kvreg_block_get_info / kvreg_block_refcount / kvreg_block_tokens. */
KVREG_API int kvreg_pool_block_info(const kvreg_pool *pool, kvreg_block block,
                                    kvreg_block_info *out) KVREG_NOEXCEPT;
KVREG_API int kvreg_pool_block_refcount(const kvreg_pool *pool, kvreg_block block,
                                        uint32_t *refcount) KVREG_NOEXCEPT;
KVREG_API int kvreg_pool_block_tokens(const kvreg_pool *pool, kvreg_block block, uint32_t *out,
                                      size_t cap, size_t *n_tokens) KVREG_NOEXCEPT;

/* One configuration pattern (docs/config.md has a table per object): _set / _get with uint64_t
 * values, _set_string / _get_string where an object has strings. Getters write *value (or the
 * string) only on KVREG_OK; KVREG_EINVAL for a NULL argument or an unknown option. String
 * getters copy at most cap bytes including the terminating NUL into buf; *len gets the length
 * without the NUL, also when KVREG_ERANGE says cap is too small (nothing copied then; buf may
 * be NULL with cap 0 to ask the length). */

/* The value kvreg_config_set stored, or the default. */
KVREG_API int kvreg_config_get(const kvreg_config *cfg, uint32_t option,
                               uint64_t *value) KVREG_NOEXCEPT;
/* The options a registry was created with (KVREG_OPT_*, read only). */
KVREG_API int kvreg_registry_get(const kvreg_registry *reg, uint32_t option,
                                 uint64_t *value) KVREG_NOEXCEPT;

/* Pool options, fixed when the pool is made (kvreg_pool_set returns KVREG_ESTATE for them). */
#define KVREG_POOL_OPT_MEDIUM 1u /* KVREG_MEDIUM_* (kvreg_pool_new_medium) */
#define KVREG_POOL_OPT_ID 2u     /* kvreg_pool_id */
#define KVREG_POOL_NAME 1u       /* string: kvreg_pool_name */
KVREG_API int kvreg_pool_set(kvreg_pool *pool, uint32_t option, uint64_t value) KVREG_NOEXCEPT;
KVREG_API int kvreg_pool_get(const kvreg_pool *pool, uint32_t option,
                             uint64_t *value) KVREG_NOEXCEPT;
KVREG_API int kvreg_pool_get_string(const kvreg_pool *pool, uint32_t option, char *buf,
                                    size_t cap, size_t *len) KVREG_NOEXCEPT;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KVREG_H */
