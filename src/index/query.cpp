// Matching a prompt: walk its router hashes in order and follow the workers still matching.
//
// Only workers holding the first block can match at all, so the candidates are fixed at
// block 0 (sorted by slot) and only shrink: each later block's holders are looked up among
// them by binary search, and a candidate that misses a block stops there. The walk ends when
// no candidate is left, so a prompt costs one holder lookup per block some worker still holds.
#include <algorithm>

#include "index.hpp"

namespace kvreg::index {

namespace {

struct Candidate {
    uint32_t slot;
    uint32_t alive_at; // last block index it held (its depth - 1)
    uint32_t best_counts[kTiers];
    uint32_t tier_depth[kTiers];
};

// The fastest tier in counts (lowest medium number with a copy); kTiers if none.
unsigned fastest(uint32_t counts) noexcept {
    for (unsigned t = 0; t < kTiers; t++)
        if (tier_byte(counts, t)) return t;
    return kTiers;
}

void account(Candidate &c, uint32_t counts, uint32_t block) noexcept {
    const unsigned best = fastest(counts);
    if (best < kTiers) c.best_counts[best]++;
    for (unsigned t = 0; t < kTiers; t++)
        if (tier_byte(counts, t) && c.tier_depth[t] == block) c.tier_depth[t]++;
    c.alive_at = block;
}

} // namespace

void Index::query(const uint64_t *hashes, size_t n, size_t top_k, std::vector<kvreg_index_match> &out) const {
    out.clear();
    if (n == 0) return;
    std::vector<Holder> holders;
    std::vector<Candidate> cand;
    table_.holders(hashes[0], holders);
    for (const Holder &h : holders) {
        if (fastest(h.counts) == kTiers) continue;
        Candidate c{};
        c.slot = h.slot;
        account(c, h.counts, 0);
        cand.push_back(c);
    }
    std::sort(cand.begin(), cand.end(), [](const Candidate &a, const Candidate &b) { return a.slot < b.slot; });
    size_t alive = cand.size();
    const size_t limit = std::min<size_t>(n, UINT32_MAX - 1);
    for (size_t i = 1; i < limit && alive; i++) {
        if (i + 1 < limit) table_.prefetch(hashes[i + 1]);
        table_.holders(hashes[i], holders);
        size_t still = 0;
        for (const Holder &h : holders) {
            auto it = std::lower_bound(cand.begin(), cand.end(), h.slot,
                                       [](const Candidate &c, uint32_t s) { return c.slot < s; });
            if (it == cand.end() || it->slot != h.slot || it->alive_at + 1 != i) continue;
            if (fastest(h.counts) == kTiers) continue;
            account(*it, h.counts, static_cast<uint32_t>(i));
            still++;
        }
        alive = still;
    }

    out.reserve(cand.size());
    for (const Candidate &c : cand) {
        const Worker &w = workers_.at(c.slot);
        kvreg_index_match m{};
        m.worker_id = w.id.load(std::memory_order_relaxed);
        m.dp_rank = w.dp.load(std::memory_order_relaxed);
        m.depth = c.alive_at + 1;
        double score = 0;
        for (unsigned t = 0; t < kTiers; t++) {
            m.blocks[t] = c.best_counts[t];
            m.tier_depth[t] = c.tier_depth[t];
            score += opt_.weight[t] / 1000.0 * c.best_counts[t];
        }
        m.score = score;
        out.push_back(m);
    }
    auto better = [](const kvreg_index_match &a, const kvreg_index_match &b) {
        if (a.score != b.score) return a.score > b.score;
        if (a.depth != b.depth) return a.depth > b.depth;
        if (a.worker_id != b.worker_id) return a.worker_id < b.worker_id;
        return a.dp_rank < b.dp_rank;
    };
    if (top_k && top_k < out.size()) {
        std::partial_sort(out.begin(), out.begin() + static_cast<ptrdiff_t>(top_k), out.end(), better);
        out.resize(top_k);
    } else {
        std::sort(out.begin(), out.end(), better);
    }
}

} // namespace kvreg::index
