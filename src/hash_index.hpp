// Open-addressing index from a 64-bit key to a record index, 4 bytes a slot.
//
// Keys are already uniform hashes, so they are not re-hashed: one multiply (Fibonacci hashing)
// is applied by the caller only to protect against callers that register non-uniform names
// (counters, trace ids). A slot holds an 8-bit tag from the key and the record index + 1 in
// 24 bits; the tag rejects almost every non-matching probe without touching the record.
// Linear probing with backward-shift deletion (no tombstones), capacity grows 1.5x at 7/8 load
// so the table's slack stays small (memory budget). Not thread-safe.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <new>

#include "record_slab.hpp"

namespace kvreg {

class HashIndex {
public:
    // mixed: the caller's mixed key. Slot position comes from bits 12..43, the tag from 44..51;
    // the bits above are the shard number.
    static uint32_t tag_of(uint64_t mixed) noexcept { return static_cast<uint32_t>(mixed >> 44) & 0xFF; }

    uint32_t size() const noexcept { return size_; }
    uint64_t slot_bytes() const noexcept { return uint64_t{cap_} * sizeof(uint32_t); }

    // Record index of key, or UINT32_MAX.
    uint32_t find(uint64_t key, uint64_t mixed, const RecordSlab &slab) const noexcept {
        if (cap_ == 0) return UINT32_MAX;
        const uint32_t tag = tag_of(mixed);
        for (uint32_t i = home(mixed);; i = next(i)) {
            const uint32_t s = slots_[i];
            if (s == 0) return UINT32_MAX;
            if ((s >> 24) == tag && slab.at((s & kIdxMask) - 1).seq == key) return (s & kIdxMask) - 1;
        }
    }

    // Make room for one more insert. Throws std::bad_alloc (index unchanged).
    void reserve_one(const RecordSlab &slab, uint64_t (*mix)(uint64_t)) {
        if (uint64_t{size_ + 1} * 8 <= uint64_t{cap_} * 7) return;
        uint32_t ncap = cap_ < 16 ? 16 : cap_ + cap_ / 2;
        rebuild(ncap, slab, mix);
    }

    // Insert a key known to be absent; reserve_one must have been called.
    void insert(uint64_t mixed, uint32_t idx) noexcept {
        uint32_t i = home(mixed);
        while (slots_[i] != 0) i = next(i);
        slots_[i] = (tag_of(mixed) << 24) | (idx + 1);
        size_++;
    }

    // Repoint key's slot from record old_idx to new_idx (a chain's head changed).
    void replace(uint64_t mixed, uint32_t old_idx, uint32_t new_idx) noexcept {
        for (uint32_t i = home(mixed);; i = next(i)) {
            if ((slots_[i] & kIdxMask) == old_idx + 1) {
                slots_[i] = (slots_[i] & ~kIdxMask) | (new_idx + 1);
                return;
            }
        }
    }

    // Remove the slot pointing at record idx (key present).
    void erase(uint64_t mixed, uint32_t idx, const RecordSlab &slab, uint64_t (*mix)(uint64_t)) noexcept {
        uint32_t i = home(mixed);
        while ((slots_[i] & kIdxMask) != idx + 1) i = next(i);
        // Backward shift: pull later entries of the cluster into the hole when their home
        // position allows it, so lookups never need tombstones.
        for (uint32_t j = next(i);; j = next(j)) {
            const uint32_t s = slots_[j];
            if (s == 0) break;
            const uint32_t h = home(mix(slab.at((s & kIdxMask) - 1).seq));
            const bool movable = (i <= j) ? (h <= i || h > j) : (h <= i && h > j);
            if (movable) {
                slots_[i] = s;
                i = j;
            }
        }
        slots_[i] = 0;
        size_--;
    }

private:
    static constexpr uint32_t kIdxMask = (1u << 24) - 1;

    uint32_t home(uint64_t mixed) const noexcept {
        // Lemire's fastrange: a multiply instead of a modulo, any capacity.
        return static_cast<uint32_t>((uint64_t{static_cast<uint32_t>(mixed >> 12)} * cap_) >> 32);
    }
    uint32_t next(uint32_t i) const noexcept { return i + 1 == cap_ ? 0 : i + 1; }

    void rebuild(uint32_t ncap, const RecordSlab &slab, uint64_t (*mix)(uint64_t)) {
        std::unique_ptr<uint32_t[]> fresh(new uint32_t[ncap]());
        std::unique_ptr<uint32_t[]> old = std::move(slots_);
        const uint32_t ocap = cap_;
        slots_ = std::move(fresh);
        cap_ = ncap;
        size_ = 0;
        for (uint32_t i = 0; i < ocap; i++) {
            const uint32_t s = old[i];
            if (s != 0) insert(mix(slab.at((s & kIdxMask) - 1).seq), (s & kIdxMask) - 1);
        }
    }

    std::unique_ptr<uint32_t[]> slots_;
    uint32_t cap_ = 0;
    uint32_t size_ = 0;
};

} // namespace kvreg
