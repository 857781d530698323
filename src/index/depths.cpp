// Depths only: how deep each worker matches a prompt, without tiers, scores or ranking.
//
// The walk is query.cpp's (walk.hpp: candidates fixed at block 0, each later block's lookup
// copies only the holders still matching and stops once it found them all), with less to
// carry: a worker's whole state is its depth so far. In the dense case (candidate slots fill a good
// part of 0 .. max_slot, as when thousands of workers hold a prompt's first block) that state
// is an array indexed by slot, and "still matching at block i" is "its depth is i": no set to
// rebuild per block, no candidate record to find. When a few candidates have large slot
// numbers, zeroing such an array would cost more than the walk, so their slots are kept
// sorted beside their depths and found by binary search.
#include <algorithm>
#include <cstring>

#include "index/index.hpp"
#include "index/query_scratch.hpp"
#include "index/walk.hpp"

namespace kvreg::index {

namespace {

// Dense when the depth array (one word per slot up to max_slot) is at most this many words
// per candidate, plus a few lines whatever the count.
constexpr size_t kDenseWordsPerCandidate = 16;
constexpr size_t kDenseSlack = 1024;

// The walk's state (walk.hpp) in the dense case: depth[0 .. max_slot] is 0 for a slot that is
// not a candidate, else how many blocks it matched so far.
struct DenseState {
    uint32_t *depth;
    uint32_t max_slot;

    auto matching(uint32_t block) const noexcept {
        return [d = depth, max = max_slot, block](uint32_t tag) {
            const uint32_t s = slot_of(tag);
            return s <= max && d[s] == block;
        };
    }
    size_t take(const Holder *h, size_t nh, uint32_t block) noexcept {
        for (size_t k = 0; k < nh; k++) depth[slot_of(h[k].slot)] = block + 1;
        return nh;
    }
};

// The sparse case: tags[0 .. n_cand) sorted by slot, depth[k] the depth of tags[k]'s worker so
// far.
struct SparseState {
    const uint32_t *tags;
    uint32_t *depth;
    size_t n_cand;

    size_t find(uint32_t tag) const noexcept {
        const uint32_t s = slot_of(tag);
        const uint32_t *p =
            std::lower_bound(tags, tags + n_cand, s, [](uint32_t a, uint32_t b) { return slot_of(a) < b; });
        return p != tags + n_cand && slot_of(*p) == s ? static_cast<size_t>(p - tags) : SIZE_MAX;
    }
    auto matching(uint32_t block) const noexcept {
        return [this, block](uint32_t tag) {
            const size_t k = find(tag);
            return k != SIZE_MAX && depth[k] == block;
        };
    }
    size_t take(const Holder *h, size_t nh, uint32_t block) noexcept {
        for (size_t k = 0; k < nh; k++) depth[find(h[k].slot)] = block + 1;
        return nh;
    }
};

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
        DenseState st{d, max_slot};
        walk_prefix(table_, hashes, limit, n_cand, h, st);
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
        SparseState st{tags.data(), depth.data(), n_cand};
        walk_prefix(table_, hashes, limit, n_cand, h, st);
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
