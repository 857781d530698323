// The one prefix walk every query of the index makes (query.cpp: ranked matches with tiers;
// depths.cpp: depths only), over the holder table.
//
// Only workers holding a prompt's first block can match at all, so the candidates are fixed at
// block 0 (the caller reads them) and only shrink: a candidate that misses a block stops there.
// Each later block's lookup copies only the entries of candidates still matching and stops as
// soon as it has found them all (usually long before the end of the hash's probe cluster). The
// walk ends when no candidate is left, so a prompt costs one holder lookup per block some
// worker still holds.
//
// What differs between the queries is only how they know "still matching" and what they record
// for a block's holders, so that is the State the walk is given:
//   auto matching(uint32_t block) const  -> a callable keep(tag) -> bool: is the candidate with
//                                           this tag still matching at `block`? It must only
//                                           read: a lookup racing a writer runs it again.
//   size_t take(const Holder *h, size_t n, uint32_t block)
//                                        -> the n holders of `block` it kept: record them, and
//                                           return how many candidates still match.
// Each State stays a small struct whose calls inline into this loop: the walk is a query's
// innermost loop, and a virtual call per holder would cost more than the work.
#pragma once

#include <cstddef>
#include <cstdint>

#include "index/holder_table.hpp"
#include "index/query_scratch.hpp"

namespace kvreg::index {

// Blocks 1 .. limit-1 of hashes, n_cand candidates at block 0; h has room for all of them.
// A walk that gets this deep (a long prompt some worker still matches) loads kDeepAhead blocks
// ahead from there on: its lookups are a chain of cache misses, and two in flight leave the
// core waiting on each; most walks end before this (or the lines would be for blocks past where
// they end).
constexpr size_t kDeepAfter = 16;
constexpr size_t kDeepAhead = 8;

template <class State>
inline void walk_prefix(const HolderTable &table, const uint64_t *hashes, size_t limit, size_t n_cand, Holder *h,
                        State &state) {
    size_t n_alive = n_cand;
    size_t i = 1;
    // The usual walk, which ends within kDeepAfter blocks: as it always was (a test for the
    // deeper distance inside this loop made the K1 workload's queries slower).
    for (const size_t shallow = limit < kDeepAfter ? limit : kDeepAfter; i < shallow && n_alive; i++) {
        if (i + kAhead < limit) table.prefetch(hashes[i + kAhead]);
        n_alive = state.take(h, table.holders_if(hashes[i], h, n_cand, n_alive, state.matching(uint32_t(i))),
                             uint32_t(i));
    }
    if (i >= limit || !n_alive) return;
    // Deeper: the blocks the longer distance skips over first, then kDeepAhead ahead.
    for (size_t j = i + kAhead; j < i + kDeepAhead && j < limit; j++) table.prefetch(hashes[j]);
    for (; i < limit && n_alive; i++) {
        if (i + kDeepAhead < limit) table.prefetch(hashes[i + kDeepAhead]);
        n_alive = state.take(h, table.holders_if(hashes[i], h, n_cand, n_alive, state.matching(uint32_t(i))),
                             uint32_t(i));
    }
}

} // namespace kvreg::index
