// One pool's membership of one hash: 48 bytes, stored in a shard's slab. Records never move
// (handles index them). Each record is on two lists: the hash's chain of memberships (one per
// pool holding it; the index points at the first) and its pool's list in this shard (so
// kvreg_pool_free visits that pool's records only).
#pragma once

#include <cstdint>

namespace kvreg {

inline constexpr uint32_t kNil = 0; // "no record" in links (links are index + 1)

struct Record {
    uint64_t seq;       // sequence hash (the key)
    uint64_t block;     // block hash
    uint64_t parent;    // parent sequence hash, valid when flags & kHasParent
    uint32_t refcount;  // references the pool holds; 0 means the record is free
    uint32_t next;      // next membership of the same hash, or the free-list link
    uint32_t pool_prev; // the pool's previous / next record in this shard
    uint32_t pool_next;
    uint32_t gen;       // bumped on every free; handles carry it (see kGenLimit)
    uint16_t pool;      // pool id 1..65535 (0 when free)
    uint8_t flags;
    uint8_t unused;

    static constexpr uint8_t kHasParent = 1;
    static constexpr uint8_t kHead = 2; // the index points at this record (first of its chain)

    // Handles have 27 bits for the generation. A slot whose generation reaches the limit is
    // retired (never handed out again), so no handle can ever name a later block in that slot.
    static constexpr uint32_t kGenBits = 27;
    static constexpr uint32_t kGenLimit = (1u << kGenBits) - 1;
};
static_assert(sizeof(Record) == 48, "Record layout is part of the memory budget");

} // namespace kvreg
