// Open-addressing index from a 64-bit key to the record heading that key's chain, 4 bytes a
// slot.
//
// Keys are already uniform hashes, so they are not re-hashed: the caller applies one multiply
// (Fibonacci hashing) only to protect against non-uniform names (counters, trace ids). A slot
// holds an 8-bit tag from the key and the record index + 1 in 24 bits, so a probe almost never
// touches a record that does not match. Deletion leaves a tombstone: no record is read to
// delete (backward shifting would read the records of the rest of the cluster, a cache miss
// each). Rebuilds (growth 1.5x at 7/8 live load, or a purge when tombstones fill the table)
// scan the slab in address order for chain heads instead of chasing records from the slots.
// Not thread-safe.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <new>

#include "core/record_slab.hpp"

namespace kvreg {

class HashIndex {
public:
    static constexpr uint32_t kMissing = UINT32_MAX;

    uint32_t size() const noexcept { return size_; }

    // Start loading the slot a lookup of `mixed` would probe first. Callable without the
    // shard lock: it reads a relaxed copy of the table's address and size, and a prefetch of a
    // stale address is harmless (it never faults). Batch calls use it a few blocks ahead, so
    // the table's cache miss overlaps the work on the blocks before.
    void prefetch(uint64_t mixed) const noexcept {
        const uint32_t *slots = hint_.slots.load(std::memory_order_relaxed);
        const uint32_t cap = hint_.cap.load(std::memory_order_relaxed);
        if (slots && cap)
            __builtin_prefetch(slots + static_cast<uint32_t>((uint64_t{static_cast<uint32_t>(mixed >> 12)} * cap) >> 32));
    }

    // Record index of key, or kMissing; *pos gets the slot (for erase_at) when found. When the
    // key is missing, *free_pos (if given) gets the slot insert_at() may use (the first
    // tombstone or the empty slot ending the probe), so an insert does not walk the cluster again.
    uint32_t find(uint64_t key, uint64_t mixed, const RecordSlab &slab, uint32_t *pos = nullptr,
                  uint32_t *free_pos = nullptr) const noexcept {
        if (cap_ == 0) {
            if (free_pos) *free_pos = kMissing;
            return kMissing;
        }
        const uint32_t tag = tag_of(mixed);
        uint32_t first_tomb = kMissing;
        for (uint32_t i = home(mixed);; i = next(i)) {
            const uint32_t s = slots_[i];
            if (s == kEmpty) {
                if (free_pos) *free_pos = first_tomb != kMissing ? first_tomb : i;
                return kMissing;
            }
            if (s == kTomb) {
                if (first_tomb == kMissing) first_tomb = i;
            } else if ((s >> 24) == tag && slab.at((s & kIdxMask) - 1).seq == key) {
                if (pos) *pos = i;
                return (s & kIdxMask) - 1;
            }
        }
    }

    // Insert at a slot find() reported, if reserve_one() did not rebuild in between.
    void insert_at(uint32_t pos, uint64_t mixed, uint32_t idx) noexcept {
        if (slots_[pos] == kTomb) tombs_--;
        slots_[pos] = (tag_of(mixed) << 24) | (idx + 1);
        size_++;
    }

    // Make room for one more insert; true if the table was rebuilt (slots from an earlier
    // find() are then stale). Throws std::bad_alloc (index unchanged).
    bool reserve_one(const RecordSlab &slab, uint64_t (*mix)(uint64_t)) {
        if (uint64_t{size_ + tombs_ + 1} * 8 <= uint64_t{cap_} * 7) return false;
        uint32_t ncap = cap_;
        if (cap_ < 16)
            ncap = 16;
        else if (uint64_t{size_ + 1} * 8 > uint64_t{cap_} * 6) // mostly live: grow
            ncap = cap_ + cap_ / 2;
        rebuild(ncap, slab, mix); // otherwise: same size, tombstones purged
        return true;
    }

    // After an erase: when the table is mostly empty, rebuild it at a quarter of its size, so
    // a registry whose live set shrank by a large factor gives the memory back (never below
    // what reserve() set aside). A reserved table at its floor is purged instead once a
    // quarter of it is tombstones: it is never rebuilt smaller, and a lookup of a missing key
    // would otherwise walk the tombstones of every hash it ever held (kvreg-bench
    // register_release --reserve-blocks auto, second pass, shows it). Never
    // throws: without memory for the new table, the old one stays.
    void maybe_shrink(const RecordSlab &slab, uint64_t (*mix)(uint64_t)) noexcept {
        if (uint64_t{size_} * 16 > cap_) return;
        try {
            if (cap_ > kMinShrinkCap && cap_ > floor_cap_)
                rebuild(std::max(cap_ / 4, floor_cap_), slab, mix);
            else if (cap_ == floor_cap_ && uint64_t{tombs_} * 4 >= cap_)
                rebuild(cap_, slab, mix); // the spare table: no allocation
        } catch (...) {
        }
    }

    // Size the table for `keys` live keys now and keep at least that size from then on
    // (KVREG_OPT_RESERVE_BLOCKS): up to that many, inserts never grow it, and tombstones are
    // purged in place. Throws std::bad_alloc (index unchanged).
    void reserve(uint32_t keys, const RecordSlab &slab, uint64_t (*mix)(uint64_t)) {
        const uint64_t want = uint64_t{keys} * 8 / 7 + 1; // reserve_one() grows past 7/8 full
        const uint32_t ncap = static_cast<uint32_t>(std::min<uint64_t>(want, kIdxMask));
        if (ncap <= floor_cap_) return;
        std::unique_ptr<uint32_t[]> spare(new uint32_t[ncap]()); // touched now, not on a purge
        if (ncap > cap_) rebuild(ncap, slab, mix);
        floor_cap_ = ncap;
        if (cap_ == ncap) spare_ = std::move(spare);
    }

    // Insert a key known to be absent; reserve_one must have been called.
    void insert(uint64_t mixed, uint32_t idx) noexcept {
        uint32_t i = home(mixed);
        while (slots_[i] != kEmpty && slots_[i] != kTomb) i = next(i);
        if (slots_[i] == kTomb) tombs_--;
        slots_[i] = (tag_of(mixed) << 24) | (idx + 1);
        size_++;
    }

    // Repoint the slot at `pos` (from find) to record new_idx (a chain's head changed).
    void replace_at(uint32_t pos, uint32_t new_idx) noexcept {
        slots_[pos] = (slots_[pos] & ~kIdxMask) | (new_idx + 1);
    }

    // Forget every key and give the table back (kvreg_registry_clear); a reserved table is
    // kept, emptied.
    void clear() noexcept {
        if (floor_cap_ != 0 && cap_ != 0) {
            std::fill_n(slots_.get(), cap_, kEmpty);
            size_ = 0;
            tombs_ = 0;
            return;
        }
        hint_.slots.store(nullptr, std::memory_order_relaxed);
        hint_.cap.store(0, std::memory_order_relaxed);
        slots_.reset();
        cap_ = 0;
        size_ = 0;
        tombs_ = 0;
    }

    void erase_at(uint32_t pos) noexcept {
        slots_[pos] = kTomb;
        size_--;
        tombs_++;
    }

private:
    static constexpr uint32_t kIdxMask = (1u << 24) - 1;
    static constexpr uint32_t kMinShrinkCap = 4096; // small tables are not worth shrinking
    static constexpr uint32_t kEmpty = 0;
    static constexpr uint32_t kTomb = UINT32_MAX; // never a live slot: idx + 1 < 2^24 - 1

    // Slot position from bits 12..43 of the mixed key, the tag from 44..51; the bits above
    // choose the shard.
    static uint32_t tag_of(uint64_t mixed) noexcept { return static_cast<uint32_t>(mixed >> 44) & 0xFF; }
    uint32_t home(uint64_t mixed) const noexcept {
        // Lemire's fastrange: a multiply instead of a modulo, any capacity.
        return static_cast<uint32_t>((uint64_t{static_cast<uint32_t>(mixed >> 12)} * cap_) >> 32);
    }
    uint32_t next(uint32_t i) const noexcept { return i + 1 == cap_ ? 0 : i + 1; }

    void rebuild(uint32_t ncap, const RecordSlab &slab, uint64_t (*mix)(uint64_t)) {
        std::unique_ptr<uint32_t[]> fresh;
        if (spare_ && ncap == floor_cap_) {
            // A reserved table's tombstone purge (or a shrink back to it): the spare table,
            // no allocation and no page touched for the first time.
            fresh = std::move(spare_);
            std::fill_n(fresh.get(), ncap, kEmpty);
        } else {
            fresh.reset(new uint32_t[ncap]()); // may throw: nothing changed
        }
        std::unique_ptr<uint32_t[]> old = std::move(slots_);
        const uint32_t ocap = cap_;
        const uint32_t live = size_;
        slots_ = std::move(fresh);
        cap_ = ncap;
        size_ = 0;
        tombs_ = 0;
        hint_.slots.store(slots_.get(), std::memory_order_relaxed);
        hint_.cap.store(cap_, std::memory_order_relaxed);
        const uint32_t n = slab.capacity();
        if (uint64_t{live} * 4 >= n) {
            // Most records are live heads: scan the slab in address order (no cache-missing
            // jumps from slots to records).
            insert_heads(slab, mix);
        } else {
            // Few live entries in a big slab (after a burst): visit only them.
            for (uint32_t i = 0; i < ocap; i++) {
                const uint32_t s = old[i];
                if (s != kEmpty && s != kTomb) insert(mix(slab.at((s & kIdxMask) - 1).seq), (s & kIdxMask) - 1);
            }
        }
        if (floor_cap_ != 0 && ocap == floor_cap_) spare_ = std::move(old); // for the next purge at that size
    }

    // Every live head of the slab, in address order.
    void insert_heads(const RecordSlab &slab, uint64_t (*mix)(uint64_t)) noexcept {
        const uint32_t n = slab.capacity();
        for (uint32_t idx = 0; idx < n; idx++) {
            const Record *r = slab.find(idx); // chunks given back have none
            if (r && r->refcount != 0 && (r->flags & Record::kHead)) insert(mix(r->seq), idx);
        }
    }

    std::unique_ptr<uint32_t[]> slots_;
    uint32_t floor_cap_ = 0; // reserve(): the table never gets smaller than this
    // reserve(): a second table of floor_cap_ slots (when set, always that size), so that
    // purging tombstones at that size swaps tables instead of allocating one (4 bytes a
    // reserved key).
    std::unique_ptr<uint32_t[]> spare_;
    uint32_t cap_ = 0;
    uint32_t size_ = 0;
    uint32_t tombs_ = 0;
    // For prefetch() only, read without the shard lock by other threads: on a line of their
    // own (the struct pads to 64 bytes), away from the lock and the counters every
    // registration writes.
    struct alignas(64) Hint {
        std::atomic<const uint32_t *> slots{nullptr};
        std::atomic<uint32_t> cap{0};
    } hint_;
};

} // namespace kvreg
