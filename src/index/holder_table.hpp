// The index's shared table: which workers hold a router hash, and in which tiers.
//
// One entry per (hash, worker slot), 16 bytes: the hash mixed (below), and the slot with one
// count byte per tier (KVREG_MEDIUM_*). The mix is a multiplication by an odd constant, a
// bijection, so the mixed hash names the hash as well as the hash itself does; storing it means
// an entry's home slot is a shift and a mask away, where every slot a lookup steps past would
// otherwise cost a multiplication to place. Open addressing with linear probing on the hash alone, kept in order
// (Robin Hood): along a cluster, entries are sorted by home slot, then by hash. So all holders
// of one hash sit side by side, and a lookup stops at the first entry past them (or past
// where they would be) instead of walking to the cluster's end: a hash many workers hold
// makes long clusters, and most of a prompt's lookups used to walk them. An insert shifts
// the rest of the cluster one slot on; deletion shifts it back (no tombstones to purge).
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

#include "index/mix.hpp"
#include "util/cpu_relax.hpp"
#include "util/huge_array.hpp"
#include <algorithm>
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

// slot: the worker's name in the table (the index stores its slot tagged with the slot's
// generation, workers.hpp). counts: byte t is how many of the worker's stored blocks put this
// hash in tier t.
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

    // The shard a hash's entries are in (for reserve()).
    uint32_t shard_index(uint64_t hash) const noexcept { return static_cast<uint32_t>((mix(hash) >> 52) & shard_mask_); }
    uint32_t shard_count() const noexcept { return n_shards_; }
    // Room for more[si] new entries in each shard si (shard_count() counts), before loading
    // many with update_many() (index/load.cpp): every table that would grow gets its place at
    // its final size now, all in one region the kernel may back with huge pages (as the
    // constructor's up-front sizing does); update_many() grows each into its place once (a
    // reader sees one growth). Throws std::bad_alloc (nothing changed).
    void reserve(const uint64_t *more);

    // Entries [previous run's end, end) are slot's (update_many()).
    struct SlotRun {
        size_t end;
        uint32_t slot;
    };
    // update() for n entries at once (loading a dump, index/load.cpp): for each i, the counts
    // of (hashes[i], slot: the slot of the run i is in) become f(hashes[i], slot, payload[i],
    // old counts); runs cover 0 .. n in order. The entries go shard by shard, each
    // shard's writer lock taken once and its table grown at most once, beforehand, to hold
    // them all (growth one entry at a time rebuilt every table about seven times and left the
    // smaller copies allocated); a reader still waits at most for one entry's change. An entry
    // given twice is found the second time, as by two update() calls. Throws std::bad_alloc,
    // or what f throws: then some entries are in and the others not (the caller undoes them).
    // f is called with no change window open.
    template <class F>
    void update_many(const uint64_t *hashes, const uint8_t *payload, size_t n, const SlotRun *runs, F f);

    // Remove every entry of slot, shard by shard (a worker cleared or removed). Readers wait at
    // most for one entry's removal at a time. Returns how many were removed.
    uint64_t erase_slot(uint32_t slot) noexcept {
        return erase_slots([slot](uint32_t s) { return s == slot; });
    }
    // The same for every slot gone(slot) names, in one pass (gone must not throw).
    template <class Gone> uint64_t erase_slots(Gone gone) noexcept;

    // Reader (any thread, never blocks writers): copy the holders of hash into out[0..cap),
    // one consistent state of the hash's cluster. Returns how many there are; when that is
    // more than cap, only cap were copied: call again with room for them all.
    size_t holders(uint64_t hash, Holder *out, size_t cap) const noexcept {
        return holders_if(hash, out, cap, SIZE_MAX, [](uint32_t) { return true; });
    }
    // The same, copying only the holders whose slot keep(slot) accepts, and stopping once
    // `enough` are found: a slot holds a hash at most once, so when the caller wants k known
    // slots, the rest of the cluster cannot hold another one it wants. keep must only read
    // (a read racing a writer runs again).
    template <class Keep>
    size_t holders_if(uint64_t hash, Holder *out, size_t cap, size_t enough, Keep keep) const noexcept;

    // Calls f(hash, slot, counts) for every entry, one shard at a time under its writer lock
    // (writers of that shard wait; readers and other shards go on), the holders of one hash one
    // after another. For a dump, a digest or statistics (index/dump.cpp, index/stats.cpp); f
    // must not touch the table.
    template <class F> void for_each_entry(F f) const;

    // Start loading the first slot a lookup of hash would read.
    void prefetch(uint64_t hash) const noexcept;

    uint64_t entries() const noexcept;
    uint64_t bytes() const noexcept; // live and retired tables, and the shard array

private:
    struct Slot {
        std::atomic<uint64_t> key; // mix(hash)
        std::atomic<uint64_t> val; // slot << 32 | counts; kEmpty when unused
    };
    static constexpr uint64_t kEmpty = UINT64_MAX;
    // A table is an array of Slot whose element 0 holds the mask (capacity - 1) in key, for
    // writers; the slots proper are 1 .. capacity. Readers take the mask from the shard.
    struct alignas(64) Shard {
        std::atomic<uint64_t> seq{0};      // odd while slots change
        std::atomic<uint32_t> writer{0};   // writers' spin lock
        std::atomic<uint32_t> count{0};    // entries (written under the writer lock)
        std::atomic<Slot *> table{nullptr};
        std::atomic<uint64_t> mask{0};     // the live table's (stored after table; see holders_if)
        std::atomic<uint64_t> bytes{0};    // of every table allocated (live and retired)
        std::vector<std::unique_ptr<Slot[]>> tables; // grown on the heap (others are in arenas_)
        // reserve()'s place for the shard's next table (spare_cap slots, in arenas_), not yet
        // written: update_many() grows into it just before its inserts, so the fresh lines are
        // still in cache when the entries go in (written all at once in reserve(), most
        // lookups of the load missed them). Under the writer lock.
        Slot *spare = nullptr;
        uint64_t spare_cap = 0;
    };

    static uint64_t mix(uint64_t hash) noexcept { return mix_hash(hash); }
    // mix's inverse: the multiplicative inverse of the odd constant modulo 2^64 (Newton steps).
    static constexpr uint64_t kUnmix = [] {
        uint64_t x = kMixFactor;
        for (int i = 0; i < 6; i++) x *= 2 - kMixFactor * x;
        return x;
    }();
    static_assert(kUnmix * kMixFactor == 1, "mix is a bijection");
    // The shard from the top bits, the bucket from bits 16 and up: independent for any table
    // below 2^36 slots.
    Shard &shard_of(uint64_t mixed) const noexcept { return shards_[(mixed >> 52) & shard_mask_]; }
    static uint64_t mask_of(const Slot *t) noexcept { return t[0].key.load(std::memory_order_relaxed); }
    static uint64_t home(uint64_t mixed, uint64_t mask) noexcept { return ((mixed >> 16) & mask) + 1; }
    static uint64_t next(uint64_t i, uint64_t mask) noexcept { return i > mask ? 1 : i + 1; }
    static uint64_t prev(uint64_t i, uint64_t mask) noexcept { return i == 1 ? mask + 1 : i - 1; }
    // Whether the entry with (mixed) key at slot i comes after the place of mixed, looked up d
    // slots from its home: its home is later (it is fewer slots from it), or the same with a
    // bigger key.
    static bool past(uint64_t key, uint64_t i, uint64_t d, uint64_t mixed, uint64_t mask) noexcept {
        const uint64_t de = (i - home(key, mask)) & mask;
        return de < d || (de == d && key > mixed);
    }
    // The index of (mixed, slot), or 0 when absent; then *ins is where it belongs.
    static uint64_t find(const Slot *t, uint64_t mask, uint64_t mixed, uint32_t slot, uint64_t *ins) noexcept;
    // Put an entry at ins, shifting the entries from ins to the cluster's end one slot on
    // (there is an empty slot: the load stays below 3/4). Inside a change window once published.
    static void insert_at(Slot *t, uint64_t mask, uint64_t ins, uint64_t key, uint64_t val) noexcept;

    static void lock_writer(Shard &s) noexcept;
    static void unlock_writer(Shard &s) noexcept { s.writer.store(0, std::memory_order_release); }
    // A shard's writer lock for one scope: released on every way out, a throw from f included.
    class WriterGuard {
      public:
        explicit WriterGuard(Shard &s) noexcept : s_(s) { lock_writer(s_); }
        ~WriterGuard() { unlock_writer(s_); }
        WriterGuard(const WriterGuard &) = delete;
        WriterGuard &operator=(const WriterGuard &) = delete;

      private:
        Shard &s_;
    };
    // Enter / leave the window in which readers retry. Slot words written inside a window are
    // release stores (plain stores on x86) and readers load them with acquire: a reader that
    // sees any of them also sees the odd counter on its second look (no fences, which
    // ThreadSanitizer cannot check).
    static void begin_change(Shard &s) noexcept;
    static void end_change(Shard &s) noexcept;
    // Under the writer lock. The new table goes at `place` (room for at_least rounded up as
    // grow rounds it, plus element 0) when given, else on the heap.
    void grow(Shard &s, uint64_t at_least = 0, Slot *place = nullptr);
    // A table of cap slots, every one empty, at place when given (else on the heap, owned
    // gets it); not yet seen by readers. Throws std::bad_alloc (place: never).
    static Slot *new_table(uint64_t cap, Slot *place, std::unique_ptr<Slot[]> &owned);
    // Make fresh the shard's live table (a reader waits for this one change); owned, when
    // set, is kept until the table is destroyed. Throws std::bad_alloc (nothing changed).
    static void publish(Shard &s, Slot *fresh, std::unique_ptr<Slot[]> owned);
    // update_many()'s entries: the mixed key, the slot and the payload.
    struct Item {
        uint64_t mixed;
        uint32_t slot;
        uint8_t payload;
    };
    // update_many() into a shard with no entries that must grow: the items go into its new
    // table before readers can see it (fill_fresh), the table's count becomes what went in.
    template <class F>
    static void fill_fresh(Shard &s, uint64_t cap, Slot *place, const Item *items, size_t n,
                           std::vector<uint32_t> &scratch, F &f);
    static uint64_t capacity_for(uint64_t at_least, uint64_t from) noexcept;
    static void erase_at(Slot *t, uint64_t i) noexcept; // inside a change window

    struct FreeArena {
        void operator()(void *p) const noexcept;
    };

    uint32_t shard_mask_;
    uint32_t n_shards_;
    std::unique_ptr<Shard[]> shards_;
    // Every shard's first table, side by side, when the table is sized up front, and the
    // tables reserve() made: regions the kernel may back with huge pages (holder_table.cpp).
    std::vector<std::unique_ptr<void, FreeArena>> arenas_;
    // Bytes of arenas_ that reserve() handed out and no table uses (yet): in bytes(), where a
    // table grown into its place is counted as its shard's from then on.
    std::atomic<uint64_t> idle_bytes_{0};
    void take_spare(Shard &s) noexcept { // s's spare now holds its table
        idle_bytes_.fetch_sub((s.spare_cap + 1) * sizeof(Slot), std::memory_order_relaxed);
        s.spare = nullptr;
    }
    static void *new_region(size_t bytes); // aligned, advised; throws std::bad_alloc
};

// Short spins first (the other side's window is a few stores), then give the core away: with
// more threads than cores the holder of a window may be descheduled.
inline void backoff(unsigned &spins) noexcept {
    if (++spins < 64) {
        kvreg::cpu_relax();
    } else {
        std::this_thread::yield();
    }
}


// Inline: a query calls these once per block, in its innermost loop.
template <class Keep>
inline size_t HolderTable::holders_if(uint64_t hash, Holder *out, size_t cap, size_t enough, Keep keep) const noexcept {
    const uint64_t mixed = mix(hash);
    const Shard &s = shard_of(mixed);
    unsigned spins = 0;
    for (;;) {
        const uint64_t before = s.seq.load(std::memory_order_acquire);
        if (before & 1) {
            backoff(spins);
            continue;
        }
        // The size from the shard's line, not the table's element 0: one dependent load less
        // on every lookup. grow() stores the table before the size (both release), and
        // tables only grow, so a size read first never exceeds the table read after it.
        const uint64_t mask = s.mask.load(std::memory_order_acquire);
        const Slot *t = s.table.load(std::memory_order_acquire);
        if (!t) return 0;
        size_t n = 0;
        for (uint64_t i = home(mixed, mask), k = 0; k <= mask; i = next(i, mask), k++) {
            // Acquire loads (plain loads on x86): a slot word written inside a change window
            // makes the counter's odd value visible to the check below.
            const uint64_t v = t[i].val.load(std::memory_order_acquire);
            if (v == kEmpty) break;
            const uint64_t key = t[i].key.load(std::memory_order_acquire);
            if (key != mixed) {
                if (past(key, i, k, mixed, mask)) break; // the holders are all behind
                continue;
            }
            if (keep(static_cast<uint32_t>(v >> 32))) {
                if (n < cap) out[n] = Holder{static_cast<uint32_t>(v >> 32), static_cast<uint32_t>(v)};
                if (++n == enough) break;
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
    if (!t) return;
    const Slot *at = t + home(mixed, s.mask.load(std::memory_order_relaxed));
    // A lookup reads about three slots from its home (one holder or more of the hash, and the
    // earlier-homed entries before them), and four slots share a line: the line after the
    // home's too, unless the home starts its line. Both lines: 0.50x instead of 0.45x of the
    // plain table's lookup rate, and 0.54x instead of 0.51x of its update rate (the bench).
    __builtin_prefetch(at);
    __builtin_prefetch(at + 3);
}

template <class F> uint32_t HolderTable::update(uint64_t hash, uint32_t slot, F f) {
    const uint64_t mixed = mix(hash);
    Shard &s = shard_of(mixed);
    const WriterGuard writer{s};
    Slot *t = s.table.load(std::memory_order_relaxed);
    uint64_t mask = t ? mask_of(t) : 0;
    uint64_t ins = 0;
    const uint64_t pos = t ? find(t, mask, mixed, slot, &ins) : 0;
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
        find(t, mask, mixed, slot, &ins);
    }
    begin_change(s);
    insert_at(t, mask, ins, mixed, uint64_t{slot} << 32 | now);
    end_change(s);
    s.count.store(count + 1, std::memory_order_relaxed);
    return now;
}

template <class F>
void HolderTable::update_many(const uint64_t *hashes, const uint8_t *payload, size_t n, const SlotRun *runs, F f) {
    // The entries by shard (a counting sort), each with its mixed key, slot and payload: each
    // shard's table is then visited in one stretch, small enough to stay in cache, and
    // nothing is fetched from the caller's arrays in shard order (reading hashes[i] that way
    // missed the cache on most entries; reading the payload by index was a quarter of this
    // function's samples in a profile of a load).
    std::vector<size_t> first(n_shards_ + 1, 0);
    for (size_t i = 0; i < n; i++) first[((mix(hashes[i]) >> 52) & shard_mask_) + 1]++;
    for (uint32_t si = 0; si < n_shards_; si++) first[si + 1] += first[si];
    HugeArray<Item> items; // a load's every record: huge pages (util/huge_array.hpp)
    items.append(n);
    {
        std::vector<size_t> at(first.begin(), first.end() - 1);
        for (size_t i = 0; i < n; runs++) {
            for (const size_t end = std::min(runs->end, n); i < end; i++) {
                const uint64_t mixed = mix(hashes[i]);
                items[at[(mixed >> 52) & shard_mask_]++] = Item{mixed, runs->slot, payload[i]};
            }
        }
    }
    std::vector<uint32_t> scratch; // fill_fresh()'s, reused from shard to shard
    for (uint32_t si = 0; si < n_shards_; si++) {
        const size_t b = first[si], e = first[si + 1];
        if (b == e) continue;
        Shard &s = shards_[si];
        const WriterGuard writer{s};
        Slot *t = s.table.load(std::memory_order_relaxed);
        uint32_t count = s.count.load(std::memory_order_relaxed);
        const uint64_t want = uint64_t{count} + (e - b); // at most this many entries after
        if (!t || want * 4 > (mask_of(t) + 1) * 3) {
            // Into reserve()'s place when it fits exactly what growth would make (capacities
            // are powers of two: from <= spare_cap gives spare_cap), else on the heap.
            const uint64_t from = t ? (mask_of(t) + 1) * 2 : 16;
            const bool into_spare =
                s.spare && from <= s.spare_cap && capacity_for(want * 4 / 3 + 1, from) <= s.spare_cap;
            if (count == 0) { // as a load's every shard: filled before it is seen
                fill_fresh(s, into_spare ? s.spare_cap : capacity_for(want * 4 / 3 + 1, from),
                           into_spare ? s.spare : nullptr, items.data() + b, e - b, scratch, f);
                if (into_spare) take_spare(s);
                continue;
            }
            if (into_spare) {
                grow(s, s.spare_cap, s.spare); // may throw (the retired list): nothing changed
                take_spare(s);
            } else {
                grow(s, want * 4 / 3 + 1); // may throw: nothing of this shard changed yet
            }
            t = s.table.load(std::memory_order_relaxed);
        }
        const uint64_t mask = mask_of(t);
        for (size_t k = b; k < e; k++) {
            const uint64_t mixed = items[k].mixed;
            const uint32_t slot = items[k].slot;
            uint64_t ins = 0;
            const uint64_t pos = find(t, mask, mixed, slot, &ins);
            const uint64_t old = pos ? t[pos].val.load(std::memory_order_relaxed) : 0;
            const uint32_t now = f(mixed * kUnmix, slot, items[k].payload, static_cast<uint32_t>(old)); // may throw: entry unchanged
            if (now == static_cast<uint32_t>(old)) continue;
            begin_change(s);
            if (!pos) {
                insert_at(t, mask, ins, mixed, uint64_t{slot} << 32 | now);
                count++;
            } else if (now == 0) {
                erase_at(t, pos);
                count--;
            } else {
                t[pos].val.store((old & ~uint64_t{UINT32_MAX}) | now, std::memory_order_release);
            }
            end_change(s);
            s.count.store(count, std::memory_order_relaxed);
        }
    }
}

template <class Gone>
uint64_t HolderTable::erase_slots(Gone gone) noexcept {
    uint64_t removed = 0;
    for (uint32_t si = 0; si < n_shards_; si++) {
        Shard &s = shards_[si];
        lock_writer(s);
        Slot *t = s.table.load(std::memory_order_relaxed);
        if (t) {
            const uint64_t mask = mask_of(t);
            for (uint64_t i = 1; i <= mask + 1;) {
                const uint64_t v = t[i].val.load(std::memory_order_relaxed);
                if (v != kEmpty && gone(static_cast<uint32_t>(v >> 32))) {
                    // One window per entry; the entry shifted into i is checked next.
                    begin_change(s);
                    erase_at(t, i);
                    end_change(s);
                    s.count.store(s.count.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
                    removed++;
                } else {
                    i++;
                }
            }
        }
        unlock_writer(s);
    }
    return removed;
}

template <class F>
void HolderTable::fill_fresh(Shard &s, uint64_t cap, Slot *place, const Item *items, size_t n,
                             std::vector<uint32_t> &scratch, F &f) {
    // Readers cannot see the table yet, so the entries need no change windows, and they can go
    // in the table's own order: by home (a counting sort), then by key; each then lands at its
    // home or just past the entry before it, with no search and no shifting (update() one at a
    // time walked each entry's cluster and shifted its tail: most of a load's time in the table).
    std::unique_ptr<Slot[]> owned;
    Slot *t = new_table(cap, place, owned); // may throw: nothing changed
    const uint64_t mask = cap - 1;
    scratch.assign(cap + 2 + n, 0); // may throw: nothing changed
    uint32_t *at = scratch.data(), *order = at + cap + 2;
    for (size_t k = 0; k < n; k++) at[home(items[k].mixed, mask) + 1]++;
    for (uint64_t h = 1; h <= cap + 1; h++) at[h] += at[h - 1];
    for (size_t k = 0; k < n; k++) order[at[home(items[k].mixed, mask)]++] = static_cast<uint32_t>(k);
    // Within one home by key, then slot, so that the items naming one entry come together,
    // in the order given (stable). A home holds a few items, or as many as the workers that
    // hold one hash: an insertion sort for short runs, a merge sort past 16.
    const auto before = [&](uint32_t a, uint32_t b) {
        return items[a].mixed < items[b].mixed || (items[a].mixed == items[b].mixed && items[a].slot < items[b].slot);
    };
    for (size_t b = 0; b < n;) {
        const uint64_t h = home(items[order[b]].mixed, mask);
        size_t e = b + 1;
        while (e < n && home(items[order[e]].mixed, mask) == h) e++;
        if (e - b > 16) {
            std::stable_sort(order + b, order + e, before); // may throw: nothing changed yet
        } else {
            for (size_t k = b + 1; k < e; k++) {
                const uint32_t o = order[k];
                size_t j = k;
                for (; j > b && before(o, order[j - 1]); j--) order[j] = order[j - 1];
                order[j] = o;
            }
        }
        b = e;
    }
    uint32_t count = 0;
    uint64_t next_free = 1, last = 0; // last: the slot of the entry placed just before (0: none)
    for (size_t k = 0; k < n; k++) {
        const Item &x = items[order[k]];
        if (last && t[last].key.load(std::memory_order_relaxed) == x.mixed &&
            static_cast<uint32_t>(t[last].val.load(std::memory_order_relaxed) >> 32) == x.slot) {
            // The same (hash, slot) again: found, as by a second update().
            const uint64_t old = t[last].val.load(std::memory_order_relaxed);
            const uint32_t now = f(x.mixed * kUnmix, x.slot, x.payload, static_cast<uint32_t>(old)); // may throw: the table is dropped
            if (now == 0) {
                t[last].key.store(0, std::memory_order_relaxed);
                t[last].val.store(kEmpty, std::memory_order_relaxed);
                next_free = last;
                last = 0;
                count--;
            } else {
                t[last].val.store((old & ~uint64_t{UINT32_MAX}) | now, std::memory_order_relaxed);
            }
            continue;
        }
        const uint64_t h = home(x.mixed, mask);
        const uint64_t i = std::max(h, next_free);
        if (i <= cap) {
            const uint32_t now = f(x.mixed * kUnmix, x.slot, x.payload, 0); // may throw: the table is dropped
            if (now == 0) continue;
            t[i].key.store(x.mixed, std::memory_order_relaxed);
            t[i].val.store(uint64_t{x.slot} << 32 | now, std::memory_order_relaxed);
            next_free = i + 1;
            last = i;
            count++;
            continue;
        }
        // Past the table's end: the cluster wraps to its start, where entries homed there
        // already are. The rest go in one by one (they all home at the end, after this one).
        uint64_t ins = 0;
        const uint64_t pos = find(t, mask, x.mixed, x.slot, &ins);
        const uint64_t old = pos ? t[pos].val.load(std::memory_order_relaxed) : 0;
        const uint32_t now = f(x.mixed * kUnmix, x.slot, x.payload, static_cast<uint32_t>(old)); // may throw: the table is dropped
        last = 0;
        next_free = cap + 1;
        if (now == static_cast<uint32_t>(old)) continue;
        if (!pos) {
            insert_at(t, mask, ins, x.mixed, uint64_t{x.slot} << 32 | now);
            count++;
        } else if (now == 0) {
            erase_at(t, pos);
            count--;
        } else {
            t[pos].val.store((old & ~uint64_t{UINT32_MAX}) | now, std::memory_order_relaxed);
        }
    }
    publish(s, t, std::move(owned)); // may throw: the table is dropped
    s.count.store(count, std::memory_order_relaxed);
}

template <class F> void HolderTable::for_each_entry(F f) const {
    for (uint32_t si = 0; si < n_shards_; si++) {
        Shard &s = shards_[si];
        const WriterGuard writer{s};
        const Slot *t = s.table.load(std::memory_order_relaxed);
        if (!t) continue;
        const uint64_t mask = mask_of(t);
        // Start after an empty slot (the load stays below 3/4: there is one), so no cluster
        // wraps around the end and a hash's holders, side by side in it, come in one run.
        uint64_t start = 1;
        while (t[start].val.load(std::memory_order_relaxed) != kEmpty) start++;
        for (uint64_t k = 0, i = start; k <= mask; k++) {
            i = next(i, mask);
            const uint64_t v = t[i].val.load(std::memory_order_relaxed);
            if (v != kEmpty)
                f(t[i].key.load(std::memory_order_relaxed) * kUnmix, static_cast<uint32_t>(v >> 32),
                  static_cast<uint32_t>(v));
        }
    }
}

} // namespace kvreg::index
