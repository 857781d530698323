// The global registry and its pools.
//
// One table for everything: the registry is split into shards by hash; each shard has one
// lock (shard_lock.hpp: a short spin, then a sleep), an index from sequence hash to the head of that hash's membership chain, a slab of
// membership records (one per pool holding the hash) and the stored tokens. A hash is
// "registered" exactly while its chain is non-empty, so the global registry and the pools can
// never disagree, every state change of a hash happens under one lock (no pool lock nested
// around a global lock, no background cleanup, no registry-wide lock), and that lock also
// orders the hash's events (see event_log.hpp for how ids and delivery work). Only the
// whole-registry operations, clear and snapshot (registry_whole.cpp), take every shard lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

#include "util/shard_lock.hpp"
#include <set>
#include <string>
#include <vector>

#include "events/callback.hpp"
#include "events/event_log.hpp"
#include "core/hash_index.hpp"
#include "kvreg.h"
#include "core/record_slab.hpp"
#include "core/token_store.hpp"

// A pool slot. The struct lives as long as the registry and is reused by later pools with
// the same id, so a caller that keeps using a freed pool's pointer races only with atomics:
// `reg` and `id` never change after the slot is first made, and everything a new pool
// rewrites is atomic (a stale handle then decodes against the new key and is ESTALE).
struct kvreg_pool {
    kvreg_registry *reg = nullptr; // set once
    uint16_t id = 0;               // set once
    std::atomic<bool> live{false};
    std::atomic<uint64_t> key{0};   // XORed into handles: another pool's handle decodes to garbage
    uint64_t incarnation = 0;       // under the registry's pools_mu_
    std::atomic<const std::string *> name{nullptr}; // interned in the registry
    std::atomic<uint32_t> medium{KVREG_MEDIUM_GPU}; // KVREG_MEDIUM_*, rewritten when the slot is reused
    // Per shard, guarded by that shard's lock: the first of this pool's records there (index +
    // 1, kvreg::kNil if none) and how many there are. Counting per shard, under the lock we
    // hold anyway, keeps a shared counter (a locked add on a line every thread of the pool
    // writes) off the registration path; kvreg_pool_size() adds the counts up.
    //
    // Also per shard: a few records this pool freed there, kept for its next registration
    // there (index + 1, linked through Record::next). The slab's free list and its chunk
    // bookkeeping are shared by every thread using the shard, so taking a record from it moves
    // those lines, and the record's, from the core that freed it; an engine's pool is mostly
    // used by one thread, and its spares stay on that thread's core. (`kvreg-bench --workload
    // disjoint --threads 2` spends far less time in RecordSlab::allocate.) At most kSpares per shard (64 shards: 256
    // records a pool, which can keep as many of the slab's 12 KB chunks from being given back
    // after a large drop), handed back to the slab by kvreg_pool_free.
    static constexpr uint32_t kSpares = 4;
    struct PerShard {
        uint32_t first = 0;
        std::atomic<uint32_t> count{0}; // written under the lock, read without it
        uint32_t spare = 0;             // kvreg::kNil when none
        uint32_t n_spare = 0;
    };
    std::unique_ptr<PerShard[]> shard;
    kvreg_pool *next_free = nullptr; // the registry's queue of free slots (under pools_mu_)
};

namespace kvreg {

struct alignas(64) Shard {
    ShardLock mu;
    HashIndex index;
    RecordSlab slab;
    TokenStore tokens;
};

struct Options {
    bool poll_mode = false;
    bool keep_tokens = false;
    uint64_t poll_capacity = 65536;
    uint32_t shards = 64;
    uint64_t reserve_blocks = 0; // KVREG_OPT_RESERVE_BLOCKS
    bool per_tier_events = false; // KVREG_OPT_EVENT_MODE == KVREG_EVENTS_PER_TIER
    CallbackRef callback;
    uint32_t first_gen = 0; // tests only (internal): start record generations here
};

// Fibonacci hashing: one multiply spreads non-uniform keys; uniform ones lose nothing.
inline uint64_t mix(uint64_t key) noexcept { return key * UINT64_C(0x9E3779B97F4A7C15); }

} // namespace kvreg

struct kvreg_registry {
    explicit kvreg_registry(const kvreg::Options &opt);
    ~kvreg_registry();

    // The options it was created with, callback left out (kvreg_registry_get reads them).
    kvreg::Options settings;
    kvreg_registry(const kvreg_registry &) = delete;
    kvreg_registry &operator=(const kvreg_registry &) = delete;

    // Pools
    int pool_new(const char *name, uint32_t medium, kvreg_pool **out);
    void pool_free(kvreg_pool *p) noexcept;
    uint64_t live_pools() const noexcept;
    uint64_t pool_size(const kvreg_pool *p) const noexcept; // distinct hashes it holds

    // Blocks. Events go through the caller's batch, which delivers them once no lock is held.
    int register_block(kvreg_pool *p, const kvreg_block_desc &d, kvreg_block *out, kvreg::EventBatch &batch);
    int acquire(kvreg_pool *p, uint64_t seq, kvreg_block *out) noexcept;
    int release(kvreg_pool *p, kvreg_block b, kvreg::EventBatch &batch) noexcept;
    int pool_contains(const kvreg_pool *p, uint64_t seq) noexcept;
    bool contains(uint64_t seq) noexcept;
    int block_info(const kvreg_pool *p, kvreg_block b, kvreg_block_info *out) noexcept;
    int block_refcount(const kvreg_pool *p, kvreg_block b, uint32_t *out) noexcept;
    int block_tokens(const kvreg_pool *p, kvreg_block b, uint32_t *out, size_t cap, size_t *n) noexcept;

    // Warm the cache for a coming lookup of seq (no lock, no effect on state).
    void prefetch(uint64_t seq) const noexcept {
        const uint64_t m = kvreg::mix(seq);
        shards_[shard_of(m)].index.prefetch(m);
    }

    // Warm the cache for a coming release of b: its index slot, and the record before it on
    // its pool's list, which unlinking it writes (no lock, no effect on state). Only for
    // records in a reserved registry's pinned chunks, whose memory stays for the registry's
    // life, so the record's hash and link can be read without the shard lock (atomically; if
    // the record was freed or reused meanwhile, the prefetch is merely wasted). Releasing is
    // bound by those two cache misses: kvreg_release_batch issues this a few handles ahead.
    // (The neighbour: an engine releases a sequence's blocks in the order it registered them,
    // so the record unlinked is the oldest of its pool in the shard, and its predecessor on
    // the list is the one registered about a shard's count of blocks later: cold by then.)
    bool prefetches_releases() const noexcept { return pinned_; }
    void prefetch_release(const kvreg_pool *p, kvreg_block b) const noexcept {
        Decoded d;
        if (!decode(p, b, &d)) return;
        const kvreg::RecordSlab &slab = shards_[d.shard].slab;
        const kvreg::Record *r = slab.pinned_record(d.idx);
        if (!r) return;
        prefetch(__atomic_load_n(&r->seq, __ATOMIC_RELAXED));
        const uint32_t prev = __atomic_load_n(&r->pool_prev, __ATOMIC_RELAXED);
        if (prev == kvreg::kNil) return;
        if (const kvreg::Record *n = slab.pinned_record(prev - 1)) __builtin_prefetch(n, 1);
    }

    // Whole registry, under every shard lock (see event_log.hpp): drop every membership and
    // emit one Cleared event; or copy one Register per registered hash (heads of chains, in
    // slab order, tokens included) and the id of the first event not reflected in them.
    int clear() noexcept;
    void snapshot(kvreg::EventCopies &out, uint64_t *position); // throws std::bad_alloc

    uint64_t hash_count() noexcept;
    uint64_t token_bytes() noexcept;

    kvreg::EventLog log;

private:
    struct Decoded {
        uint32_t shard;
        uint32_t idx;
        uint32_t gen;
    };
    bool decode(const kvreg_pool *p, kvreg_block b, Decoded *d) const noexcept;
    kvreg_block encode(const kvreg_pool *p, uint32_t shard, uint32_t idx, uint32_t gen) const noexcept;
    uint32_t shard_of(uint64_t mixed) const noexcept {
        return shard_bits_ ? static_cast<uint32_t>(mixed >> (64 - shard_bits_)) : 0;
    }
    // Live record of (pool, shard, idx, gen) or nullptr; caller holds the shard lock.
    kvreg::Record *live_record(const kvreg_pool *p, kvreg::Shard &s, const Decoded &d) noexcept;
    template <typename F> int with_live(const kvreg_pool *p, kvreg_block b, F fn) noexcept;
    uint32_t find_member(kvreg::Shard &s, uint64_t seq, uint64_t mixed, uint16_t pool) noexcept;
    // pool's record in the chain headed by record head, or kNotFound (a walk only when the
    // head's member filter says pool may be in it). Caller holds the shard lock.
    uint32_t chain_find(kvreg::Shard &s, uint32_t head, uint16_t pool) noexcept;
    // The head of live record r's chain (a registered hash is always in the index).
    static uint32_t head_of(kvreg::Shard &s, const kvreg::Record &r) noexcept {
        return s.index.find(r.seq, kvreg::mix(r.seq), s.slab);
    }
    // KVREG_OPT_RESERVE_BLOCKS, from the constructor: every shard sets memory aside for its
    // share of `blocks` records and index slots. Throws std::bad_alloc, or std::length_error
    // when a shard's share is more than it can hold.
    void reserve(uint64_t blocks);
    // Take / drop every shard lock, in index order (the one order anyone takes two in).
    void lock_all() noexcept;
    void unlock_all() noexcept;
    // lock_all(), and into `slots` every pool slot a record can name meanwhile (pools_ itself
    // may grow: it is read under pools_mu_, which is not held with the shard locks, so at most
    // nshards_ locks are held at once; ThreadSanitizer tracks at most 64). Throws bad_alloc
    // with no lock held.
    void lock_all_with_pools(std::vector<kvreg_pool *> &slots);
    // Free every live record of shard sn (their handles go stale), its index and its tokens.
    void wipe(kvreg::Shard &s) noexcept;
    // snapshot()'s copy, every shard lock held.
    void copy_heads(kvreg::EventCopies &out, uint64_t *position);
    // Every write of a record's pool_prev: prefetch_release() reads it without the lock.
    // (Relaxed: a plain store on x86.)
    static void set_pool_prev(kvreg::Record &r, uint32_t v) noexcept { __atomic_store_n(&r.pool_prev, v, __ATOMIC_RELAXED); }
    // True when dropping record idx would take its hash out of the last pool.
    static bool is_last_member(const kvreg::Record &r) noexcept {
        return (r.flags & kvreg::Record::kHead) && r.next == kvreg::kNil;
    }
    // Record idx's chain head, and whether a member other than idx has idx's tier (a walk of
    // the chain both ways from idx; chains are as long as the pools holding the hash).
    static bool tier_shared(kvreg::Shard &s, uint32_t idx, uint32_t *head) noexcept;
    // True when the chain headed by `head` has a member on medium `tier`.
    static bool chain_has_tier(kvreg::Shard &s, uint32_t head, uint32_t tier) noexcept;
    // True when dropping live record idx emits a Remove: global mode, it is the hash's last
    // membership; per-tier mode, also when no other member is on its medium. *head: its
    // chain's head, whose tokens the Remove carries. Caller holds the shard lock.
    bool emits_remove(kvreg::Shard &s, uint32_t idx, uint32_t *head) const noexcept {
        const kvreg::Record &r = s.slab.at(idx);
        if (is_last_member(r)) {
            *head = idx;
            return true;
        }
        return per_tier_ && !tier_shared(s, idx, head);
    }
    // Tokens stored for record idx's hash (0 without KEEP_TOKENS); idx heads its chain.
    uint32_t token_count(kvreg::Shard &s, uint32_t idx) const noexcept {
        const uint32_t ref = s.slab.token_ref(idx);
        return ref == kvreg::RecordSlab::kNoTokens ? 0 : s.tokens.size(ref);
    }
    // A blank record for pool p in shard sn (one of its spares, else the slab's), or
    // RecordSlab::kFull. Throws std::bad_alloc (nothing changed). Caller holds the shard lock.
    uint32_t take_record(kvreg::Shard &s, uint32_t sn, kvreg_pool *p);
    // One of a pool's spare records in shard s, taken off its list, or UINT32_MAX if none.
    static uint32_t pop_spare(kvreg::Shard &s, kvreg_pool::PerShard &ps) noexcept;
    // Free record idx (out of every list): kept as one of p's spares, else to the slab.
    void free_record(kvreg::Shard &s, uint32_t sn, kvreg_pool *p, uint32_t idx) noexcept;
    // Drop record idx (refcount already 0) from its chain and its pool's list. With `emits`
    // (emits_remove() said so; `head` is what it gave), a Remove through batch (which holds a
    // credit for it) or, with batch null, only counted as lost. Caller holds the shard lock.
    void unlink(kvreg::Shard &s, uint32_t sn, uint32_t idx, kvreg_pool *p, bool emits, uint32_t head,
                kvreg::EventBatch *batch) noexcept;

    const bool keep_tokens_;
    const bool per_tier_; // KVREG_EVENTS_PER_TIER: Register / Remove per (hash, medium)
    bool pinned_ = false; // reserve() pinned the shards' chunks: prefetch_release() can work
    uint32_t shard_bits_ = 0;
    uint32_t nshards_ = 1;
    std::unique_ptr<kvreg::Shard[]> shards_;
    uint64_t nonce_;

    mutable std::mutex pools_mu_;
    std::vector<std::unique_ptr<kvreg_pool>> pools_; // pools_[id - 1]
    std::atomic<size_t> n_slots_{0};                 // pools_.size(), readable without pools_mu_
    // Free pool slots, least recently freed first (an intrusive queue: freeing cannot fail).
    kvreg_pool *free_head_ = nullptr;
    kvreg_pool *free_tail_ = nullptr;
    // Every pool name ever used, once each: kvreg_pool_name() pointers stay valid until the
    // registry is freed even when a pool's slot is reused (engines reuse a handful of names).
    std::set<std::string> names_;
    uint64_t live_pools_ = 0;
};
