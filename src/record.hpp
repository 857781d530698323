// One pool's membership of one hash: 36 bytes, stored in a shard's slab. The hashes are kept so
// the registry can answer queries and build Remove events. Records never move (handles index
// them). Packed to 4-byte alignment: the memory budget is < 48 bytes per held block in all,
// index included, and x86-64/aarch64 load unaligned u64 at full speed.
#pragma once

#include <cstdint>

namespace kvreg {

inline constexpr uint32_t kNil = 0; // "no record" in links (links are index + 1)

struct __attribute__((packed, aligned(4))) Record {
    uint64_t seq;      // sequence hash (the key)
    uint64_t block;    // block hash
    uint64_t parent;   // parent sequence hash, valid when flags & kHasParent
    uint32_t refcount; // references the pool holds; 0 means the record is free
    uint32_t next;     // next membership of the same hash (index + 1), or the free list link
    uint16_t gen;      // bumped on every free, so old handles to the slot go stale
    uint8_t pool;      // pool id 1..255 (0 when free)
    uint8_t flags;

    static constexpr uint8_t kHasParent = 1;
    static constexpr uint8_t kHead = 2; // the index points at this record (first of its chain)
};
static_assert(sizeof(Record) == 36, "Record layout is part of the memory budget");

} // namespace kvreg
