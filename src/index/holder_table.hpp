// The index's shared table: which workers hold a router hash, and in which tiers.
//
// One entry per (hash, worker slot), 16 bytes: the hash, and the slot with one count byte per
// tier (KVREG_MEDIUM_*). Open addressing with linear probing on the hash alone, so all holders
// of one hash sit in one probe cluster and a lookup copies them in one walk. Deletion shifts
// the cluster back (no tombstones to purge).
//
// Concurrency: the table is split into shards by hash. Writers of a shard take its writer
// flag (a spin lock; their critical sections are one insert, update or erase). Readers take no
// lock and write nothing: each shard has a sequence counter that is odd while a writer changes
// slots, and a reader copies the cluster between two reads of the counter, retrying if it
// moved (a seqlock). Every slot word is a relaxed atomic, so a racing read is well defined and
// only ever discarded. A reader waits at most for one entry's change: growth builds the bigger
// table beside the old one (readers keep using the old one meanwhile) and only the pointer
// swap is inside the odd window. Old tables stay allocated until the table is destroyed,
// because a reader may still be walking one; they add at most the live size (growth doubles).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "kvreg.h"

namespace kvreg::index {

constexpr unsigned kTiers = KVREG_MEDIUM_COUNT;
static_assert(kTiers <= 4, "one count byte per tier in 32 bits");

// counts: byte t is how many of the worker's stored blocks put this hash in tier t.
struct Holder {
    uint32_t slot;
    uint32_t counts;
};

inline uint32_t tier_byte(uint32_t counts, unsigned tier) noexcept { return (counts >> (8 * tier)) & 0xffu; }

class HolderTable {
public:
    static constexpr uint32_t kMaxShards = 4096;
    // shards: rounded up to a power of two, at most kMaxShards. expected: entries to size the
    // shards for up front (0: start small). Throws std::bad_alloc.
    HolderTable(uint32_t shards, uint64_t expected);
    ~HolderTable();
    HolderTable(const HolderTable &) = delete;
    HolderTable &operator=(const HolderTable &) = delete;

    // Writers (any thread; serialized per shard). Change the counts of (hash, slot) to
    // f(old counts) (old is 0 when absent); a result of 0 removes the entry. Returns the new
    // counts. Throws std::bad_alloc (table unchanged) only when the entry is new and the shard
    // must grow.
    template <class F> uint32_t update(uint64_t hash, uint32_t slot, F f);

    // Remove every entry of slot, shard by shard (a worker cleared or removed). Readers wait at
    // most for one entry's removal at a time. Returns how many were removed.
    uint64_t erase_slot(uint32_t slot) noexcept;

    // Reader (any thread, never blocks writers): copy the holders of hash into out[0..cap),
    // one consistent state of the hash's cluster. Returns how many there are; when that is
    // more than cap, only cap were copied: call again with room for them all.
    size_t holders(uint64_t hash, Holder *out, size_t cap) const noexcept;

    // Start loading the first slot a lookup of hash would read.
    void prefetch(uint64_t hash) const noexcept;

    uint64_t entries() const noexcept;
    uint64_t bytes() const noexcept; // live and retired tables, and the shard array

private:
    struct Slot {
        std::atomic<uint64_t> key;
        std::atomic<uint64_t> val; // slot << 32 | counts; kEmpty when unused
    };
    static constexpr uint64_t kEmpty = UINT64_MAX;
    // A table is an array of Slot whose element 0 holds the mask (capacity - 1) in key; the
    // slots proper are 1 .. capacity, so a reader that loaded the pointer always finds the
    // matching size beside it.
    struct alignas(64) Shard {
        std::atomic<uint64_t> seq{0};      // odd while slots change
        std::atomic<uint32_t> writer{0};   // writers' spin lock
        std::atomic<uint32_t> count{0};    // entries (written under the writer lock)
        std::atomic<Slot *> table{nullptr};
        std::atomic<uint64_t> mask{0};     // the live table's, for prefetch() (a hint only)
        std::atomic<uint64_t> bytes{0};    // of every table allocated (live and retired)
        std::vector<std::unique_ptr<Slot[]>> tables; // the live one last; older ones retired
    };

    static uint64_t mix(uint64_t hash) noexcept { return hash * UINT64_C(0x9E3779B97F4A7C15); }
    // The shard from the top bits, the bucket from bits 16 and up: independent for any table
    // below 2^36 slots.
    Shard &shard_of(uint64_t mixed) const noexcept { return shards_[(mixed >> 52) & shard_mask_]; }
    static uint64_t mask_of(const Slot *t) noexcept { return t[0].key.load(std::memory_order_relaxed); }
    static uint64_t home(uint64_t mixed, uint64_t mask) noexcept { return ((mixed >> 16) & mask) + 1; }
    static uint64_t next(uint64_t i, uint64_t mask) noexcept { return i > mask ? 1 : i + 1; }

    static void lock_writer(Shard &s) noexcept;
    static void unlock_writer(Shard &s) noexcept { s.writer.store(0, std::memory_order_release); }
    // Enter / leave the window in which readers retry. Slot words written inside a window are
    // release stores (plain stores on x86) and readers load them with acquire: a reader that
    // sees any of them also sees the odd counter on its second look (no fences, which
    // ThreadSanitizer cannot check).
    static void begin_change(Shard &s) noexcept;
    static void end_change(Shard &s) noexcept;
    void grow(Shard &s, uint64_t at_least = 0); // under the writer lock
    static void erase_at(Slot *t, uint64_t i) noexcept; // inside a change window

    uint32_t shard_mask_;
    uint32_t n_shards_;
    std::unique_ptr<Shard[]> shards_;
};

// Short spins first (the other side's window is a few stores), then give the core away: with
// more threads than cores the holder of a window may be descheduled.
inline void backoff(unsigned &spins) noexcept {
    if (++spins < 64) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    } else {
        std::this_thread::yield();
    }
}


// Inline: a query calls these once per block, in its innermost loop.
inline size_t HolderTable::holders(uint64_t hash, Holder *out, size_t cap) const noexcept {
    const uint64_t mixed = mix(hash);
    const Shard &s = shard_of(mixed);
    unsigned spins = 0;
    for (;;) {
        const uint64_t before = s.seq.load(std::memory_order_acquire);
        if (before & 1) {
            backoff(spins);
            continue;
        }
        const Slot *t = s.table.load(std::memory_order_acquire);
        if (!t) return 0;
        const uint64_t mask = mask_of(t);
        size_t n = 0;
        for (uint64_t i = home(mixed, mask), k = 0; k <= mask; i = next(i, mask), k++) {
            // Acquire loads (plain loads on x86): a slot word written inside a change window
            // makes the counter's odd value visible to the check below.
            const uint64_t v = t[i].val.load(std::memory_order_acquire);
            if (v == kEmpty) break;
            if (t[i].key.load(std::memory_order_acquire) == hash) {
                if (n < cap) out[n] = Holder{static_cast<uint32_t>(v >> 32), static_cast<uint32_t>(v)};
                n++;
            }
        }
        if (s.seq.load(std::memory_order_relaxed) == before) return n;
        backoff(spins);
    }
}

inline void HolderTable::prefetch(uint64_t hash) const noexcept {
    // Only the shard's own line is read (the table's size is kept there too), so the prefetch
    // never waits for memory; a stale pointer/size pair only prefetches a useless line.
    const uint64_t mixed = mix(hash);
    const Shard &s = shard_of(mixed);
    const Slot *t = s.table.load(std::memory_order_relaxed);
    if (t) __builtin_prefetch(t + home(mixed, s.mask.load(std::memory_order_relaxed)));
}

template <class F> uint32_t HolderTable::update(uint64_t hash, uint32_t slot, F f) {
    const uint64_t mixed = mix(hash);
    Shard &s = shard_of(mixed);
    lock_writer(s);
    struct Unlock {
        Shard &s;
        ~Unlock() { unlock_writer(s); }
    } unlock{s};
    Slot *t = s.table.load(std::memory_order_relaxed);
    uint64_t mask = t ? mask_of(t) : 0;
    uint64_t pos = 0;
    if (t) {
        for (uint64_t i = home(mixed, mask), n = 0; n <= mask; i = next(i, mask), n++) {
            const uint64_t v = t[i].val.load(std::memory_order_relaxed);
            if (v == kEmpty) break;
            if (t[i].key.load(std::memory_order_relaxed) == hash && (v >> 32) == slot) {
                pos = i;
                break;
            }
        }
    }
    if (pos) {
        const uint64_t old = t[pos].val.load(std::memory_order_relaxed);
        const uint32_t now = f(static_cast<uint32_t>(old));
        if (now == static_cast<uint32_t>(old)) return now;
        begin_change(s);
        if (now == 0) {
            erase_at(t, pos);
            s.count.store(s.count.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
        } else {
            t[pos].val.store((old & ~uint64_t{UINT32_MAX}) | now, std::memory_order_release);
        }
        end_change(s);
        return now;
    }
    const uint32_t now = f(0);
    if (now == 0) return 0;
    const uint32_t count = s.count.load(std::memory_order_relaxed);
    if (!t || uint64_t{count + 1} * 4 > (mask + 1) * 3) {
        grow(s); // may throw: nothing changed yet
        t = s.table.load(std::memory_order_relaxed);
        mask = mask_of(t);
    }
    uint64_t i = home(mixed, mask);
    while (t[i].val.load(std::memory_order_relaxed) != kEmpty) i = next(i, mask);
    begin_change(s);
    t[i].key.store(hash, std::memory_order_release);
    t[i].val.store(uint64_t{slot} << 32 | now, std::memory_order_release);
    end_change(s);
    s.count.store(count + 1, std::memory_order_relaxed);
    return now;
}

} // namespace kvreg::index
