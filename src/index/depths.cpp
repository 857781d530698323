// Depths only: how deep each worker matches a prompt, without tiers, scores or ranking.
//
// The walk is query.cpp's (candidates fixed at block 0, each later block's lookup copies only
// the holders still matching and stops once it found them all), with less to carry: a
// worker's whole state is its depth so far. In the dense case (candidate slots fill a good
// part of 0 .. max_slot, as when thousands of workers hold a prompt's first block) that state
// is an array indexed by slot, and "still matching at block i" is "its depth is i": no set to
// rebuild per block, no candidate record to find. When a few candidates have large slot
// numbers, zeroing such an array would cost more than the walk, so their slots are kept
// sorted beside their depths and found by binary search.
#include <algorithm>
#include <cstring>

#include "index/index.hpp"
#include "index/query_scratch.hpp"

namespace kvreg::index {

namespace {

// Dense when the depth array (one word per slot up to max_slot) is at most this many words
// per candidate, plus a few lines whatever the count.
constexpr size_t kDenseWordsPerCandidate = 16;
constexpr size_t kDenseSlack = 1024;

// depth[0 .. max_slot]: 0 for a slot that is not a candidate, else how many blocks it matched
// so far. h has room for every candidate.
void walk_dense(const HolderTable &table, const uint64_t *hashes, size_t limit, uint32_t *depth,
                uint32_t max_slot, size_t n_cand, Holder *h) {
    size_t n_alive = n_cand;
    for (size_t i = 1; i < limit && n_alive; i++) {
        if (i + kAhead < limit) table.prefetch(hashes[i + kAhead]);
        const uint32_t at = static_cast<uint32_t>(i);
        n_alive = table.holders_if(hashes[i], h, n_cand, n_alive, [depth, max_slot, at](uint32_t tag) {
            const uint32_t s = slot_of(tag);
            return s <= max_slot && depth[s] == at;
        });
        for (size_t k = 0; k < n_alive; k++) depth[slot_of(h[k].slot)] = at + 1;
    }
}

// tags[0 .. n_cand) sorted by slot, depth[k] the depth of tags[k]'s worker so far.
void walk_sparse(const HolderTable &table, const uint64_t *hashes, size_t limit, const uint32_t *tags,
                 uint32_t *depth, size_t n_cand, Holder *h) {
    auto find = [tags, n_cand](uint32_t tag) -> size_t {
        const uint32_t s = slot_of(tag);
        const uint32_t *p =
            std::lower_bound(tags, tags + n_cand, s, [](uint32_t a, uint32_t b) { return slot_of(a) < b; });
        return p != tags + n_cand && slot_of(*p) == s ? static_cast<size_t>(p - tags) : SIZE_MAX;
    };
    size_t n_alive = n_cand;
    for (size_t i = 1; i < limit && n_alive; i++) {
        if (i + kAhead < limit) table.prefetch(hashes[i + kAhead]);
        const uint32_t at = static_cast<uint32_t>(i);
        n_alive = table.holders_if(hashes[i], h, n_cand, n_alive, [&find, depth, at](uint32_t tag) {
            const size_t k = find(tag);
            return k != SIZE_MAX && depth[k] == at;
        });
        for (size_t k = 0; k < n_alive; k++) depth[find(h[k].slot)] = at + 1;
    }
}

} // namespace

int Index::depths(const uint64_t *hashes, size_t n, kvreg_index_depth *out, size_t cap, size_t *n_matches) const {
    Scratch<Holder> holders;
    size_t n_cand = 0;
    uint32_t max_slot = 0;
    for (size_t i = 1; i < n && i <= kAhead; i++) table_.prefetch(hashes[i]);
    if (n > 0) {
        const size_t first = read_holders(table_, hashes[0], holders);
        Holder *h = holders.data();
        for (size_t k = 0; k < first; k++) {
            if (!h[k].counts) continue; // not held in any tier (not stored: kept for safety)
            h[n_cand++] = h[k];
            max_slot = std::max(max_slot, slot_of(h[k].slot));
        }
    }
    *n_matches = n_cand;
    if (n_cand > cap || (n_cand && !out)) return KVREG_ERANGE;
    if (!n_cand) return KVREG_OK;

    // From here holders is the walk's buffer: it has room for every candidate, and a block's
    // lookup copies only theirs. The candidates' slots move to the depth state first.
    Holder *const h = holders.data();
    const size_t limit = std::min<size_t>(n, UINT32_MAX - 1);
    const size_t span = size_t{max_slot} + 1;
    size_t j = 0; // workers written; fewer than n_cand when some left during the walk
    if (span <= n_cand * kDenseWordsPerCandidate + kDenseSlack) {
        Scratch<uint32_t> depth;
        Scratch<uint16_t> gen; // each candidate's generation (workers.hpp), read where depth is
        depth.reserve(span);
        gen.reserve(span);
        uint32_t *d = depth.data();
        std::memset(d, 0, span * sizeof(uint32_t));
        for (size_t k = 0; k < n_cand; k++) {
            d[slot_of(h[k].slot)] = 1;
            gen.data()[slot_of(h[k].slot)] = static_cast<uint16_t>(gen_of(h[k].slot));
        }
        walk_dense(table_, hashes, limit, d, max_slot, n_cand, h);
        for (uint32_t c = 0; c <= max_slot / Workers::kChunk; c++) {
            const WorkerIdent *who = workers_.idents(c);
            const uint32_t base = c * Workers::kChunk;
            const uint32_t end = std::min(max_slot - base, Workers::kChunk - 1);
            for (uint32_t k = 0; k <= end; k++) {
                const uint32_t dep = d[base + k];
                if (!dep) continue;
                kvreg_index_depth &o = out[j];
                if (!Workers::name(who[k], uint32_t{gen.data()[base + k]} << kSlotBits, o.worker_id, o.dp_rank))
                    continue; // it left (workers.hpp)
                o.depth = dep;
                j++;
            }
        }
    } else {
        Scratch<uint32_t> tags, depth;
        tags.reserve(n_cand);
        depth.reserve(n_cand);
        for (size_t k = 0; k < n_cand; k++) tags.data()[k] = h[k].slot;
        std::sort(tags.data(), tags.data() + n_cand, [](uint32_t a, uint32_t b) { return slot_of(a) < slot_of(b); });
        std::fill_n(depth.data(), n_cand, 1u);
        walk_sparse(table_, hashes, limit, tags.data(), depth.data(), n_cand, h);
        for (size_t k = 0; k < n_cand; k++) {
            const uint32_t tag = tags.data()[k];
            kvreg_index_depth &o = out[j];
            if (!Workers::name(workers_.ident(slot_of(tag)), tag, o.worker_id, o.dp_rank)) continue;
            o.depth = depth.data()[k];
            j++;
        }
    }
    *n_matches = j;
    return KVREG_OK;
}

} // namespace kvreg::index
