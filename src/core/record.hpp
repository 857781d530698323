// One pool's membership of one hash: 48 bytes, stored in a shard's slab. Records never move
// (handles index them). Each record is on two lists: the hash's chain of memberships (one per
// pool holding it; the index points at the first, the head) and its pool's list in this shard
// (so kvreg_pool_free visits that pool's records only).
//
// The chain is doubly linked and new memberships go right after the head, so joining or
// leaving a chain writes only the records next to yours: with many pools holding a hash (one
// pool per engine thread sharing a prompt prefix), walking the chain meant reading every other
// pool's record, each a line another core wrote last. A hash's block and parent hashes are
// those of its first registration (its Register event carried them): every member copies the
// block hash when it joins, the head alone keeps the parent hash (the other members use that
// space for their back link) and a small filter of which pools may be in the chain (in `flags`),
// so that a registration by a pool not in it needs no walk to rule out KVREG_EEXIST. A head
// that leaves hands both to the next member.
#pragma once

#include <cstdint>

namespace kvreg {

inline constexpr uint32_t kNil = 0; // "no record" in links (links are index + 1)

struct Record {
    uint64_t seq;       // sequence hash (the key)
    uint64_t block;     // block hash: the hash's (a member copies the head's when it joins)
    union {
        uint64_t parent;     // head: parent sequence hash, valid when flags & kHasParent
        uint32_t chain_prev; // not the head: the previous membership of the hash (index + 1)
    };
    uint32_t refcount;  // references the pool holds; 0 means the record is free
    uint32_t next;      // next membership of the same hash, or the free-list link
    uint32_t pool_prev; // the pool's previous / next record in this shard
    uint32_t pool_next;
    // gen: bumped on every free; handles carry it (see kGenLimit). The 5 bits above it hold
    // media (KVREG_MEDIUM_*, 2 bits each), so the record stays 48 bytes: `tier`, set in the
    // per-tier event mode only, is the medium of this record's pool (that mode asks whether
    // another member of the chain is on the same medium, and a pool id alone cannot tell
    // without the pool table, which the shard lock does not guard); `event_tier`, in a head, is
    // the medium the hash's
    // Register carried in the global event mode, so its Remove carries the same one (a new
    // head takes it from the old head).
    uint32_t gen : 27;
    uint32_t tier : 2;
    uint32_t event_tier : 2;
    uint32_t : 1;
    uint16_t pool;      // pool id 1..65535 (0 when free)
    uint16_t flags;     // kHasParent, kHead; in a head also the member filter (kMembers):
                        // member_bit() of every pool in the chain, and maybe of others. A
                        // record that is not a head has only its own pool's bit (so a walk
                        // that rebuilds the filter ORs flags instead of computing bits); a
                        // new head takes its old head's flags whole.

    static constexpr uint16_t kHasParent = 1;
    static constexpr uint16_t kHead = 2; // the index points at this record (first of its chain)
    static constexpr uint16_t kMembers = static_cast<uint16_t>(~(kHasParent | kHead)); // the filter: the 14 bits above

    // A pool's bit in a head's filter. Stale bits (a pool that left) only cost a walk, which
    // rebuilds the filter; fourteen bits tell apart any fourteen consecutive pool ids (ids are
    // given out from 1 up): an engine's tiers, or one pool per worker thread up to fourteen.
    // (It had 8 bits, pool & 7, until the flags' unused bits joined it: with 16 pools holding
    // every hash, a registration then walked the chain whenever a filter-mate was in it.)
    static constexpr uint16_t member_bit(uint16_t pool) noexcept {
        return static_cast<uint16_t>((kHead << 1) << (pool % 14)); // bits 2..15: kMembers
    }

    // Handles have 27 bits for the generation. A slot whose generation reaches the limit is
    // retired (never handed out again), so no handle can ever name a later block in that slot.
    static constexpr uint32_t kGenBits = 27; // the width of `gen`
    static constexpr uint32_t kGenLimit = (1u << kGenBits) - 1;
};
static_assert(sizeof(Record) == 48, "Record layout is part of the memory budget");

} // namespace kvreg
