// One pool's membership of one hash: 40 bytes, stored in a shard's slab. The hashes are kept so
// the registry can answer queries and build Remove events; the head of a hash's chain (the one
// the index points at) also owns the stored tokens. Records never move (handles index them).
#pragma once

#include <cstdint>

namespace kvreg {

inline constexpr uint32_t kNil = 0; // "no record" in links (links are index + 1)

struct Record {
    uint64_t seq;          // sequence hash (the key)
    uint64_t block;        // block hash
    uint64_t parent;       // parent sequence hash, valid when flags & kHasParent
    uint32_t refcount;     // references the pool holds; 0 means the record is free
    uint32_t token_ref;    // head only: TokenStore ref, or TokenStore::kNone
    uint32_t next;         // next membership of the same hash (index + 1), or the free list link
    uint16_t gen;          // bumped on every free, so old handles to the slot go stale
    uint8_t pool;          // pool id 1..255 (0 when free)
    uint8_t flags;

    static constexpr uint8_t kHasParent = 1;
};
static_assert(sizeof(Record) == 40, "Record layout is part of the memory budget");

} // namespace kvreg
