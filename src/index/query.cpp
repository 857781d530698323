// Matching a prompt: walk its router hashes in order and follow the workers still matching.
//
// Only workers holding the first block can match at all, so the candidates are fixed at
// block 0 (sorted by slot) and only shrink: each later block's holders are looked up among
// them by binary search, and a candidate that misses a block stops there. The walk ends when
// no candidate is left, so a prompt costs one holder lookup per block some worker still holds.
// Small clusters (up to kInline holders or candidates) never touch the heap.
#include <algorithm>

#include "index.hpp"

namespace kvreg::index {

namespace {

constexpr size_t kInline = 64;

struct Candidate {
    uint32_t slot;
    uint32_t alive_at; // last block index it held (its depth - 1)
    uint32_t best_counts[kTiers];
    uint32_t tier_depth[kTiers];
};

// A buffer on the stack that moves to the heap only when it must.
template <class T> class Scratch {
public:
    T *data() noexcept { return heap_.empty() ? inline_ : heap_.data(); }
    size_t cap() const noexcept { return heap_.empty() ? kInline : heap_.size(); }
    void reserve(size_t n) { // throws std::bad_alloc; contents are not kept
        if (n > cap()) heap_.resize(n);
    }

private:
    T inline_[kInline];
    std::vector<T> heap_;
};

// The holders of hash, in h (grown as needed); returns their number.
size_t read_holders(const HolderTable &t, uint64_t hash, Scratch<Holder> &h) {
    for (;;) {
        const size_t n = t.holders(hash, h.data(), h.cap());
        if (n <= h.cap()) return n;
        h.reserve(n * 2);
    }
}

// Bit t set when tier t holds a copy (its count byte is not zero).
uint32_t tier_mask(uint32_t counts) noexcept {
    uint32_t m = 0;
    for (unsigned t = 0; t < kTiers; t++) m |= (tier_byte(counts, t) != 0) << t;
    return m;
}

// The fastest tier in counts (lowest medium number with a copy); kTiers if none.
unsigned fastest(uint32_t counts) noexcept {
    const uint32_t m = tier_mask(counts);
    return m ? static_cast<unsigned>(__builtin_ctz(m)) : kTiers;
}

void account(Candidate &c, uint32_t counts, uint32_t block) noexcept {
    uint32_t m = tier_mask(counts);
    c.best_counts[__builtin_ctz(m)]++;
    for (; m; m &= m - 1) {
        const unsigned t = static_cast<unsigned>(__builtin_ctz(m));
        if (c.tier_depth[t] == block) c.tier_depth[t]++;
    }
    c.alive_at = block;
}

bool better(const kvreg_index_match &a, const kvreg_index_match &b) noexcept {
    if (a.score != b.score) return a.score > b.score;
    if (a.depth != b.depth) return a.depth > b.depth;
    if (a.worker_id != b.worker_id) return a.worker_id < b.worker_id;
    return a.dp_rank < b.dp_rank;
}

} // namespace

int Index::query(const uint64_t *hashes, size_t n, size_t top_k, kvreg_index_match *out, size_t cap,
                 size_t *n_matches) const {
    Scratch<Holder> holders;
    Scratch<Candidate> cand;
    size_t n_cand = 0;
    // Load a few blocks ahead: a walk is a chain of cache misses the core cannot overlap by
    // itself (each block's work is long), so the table's lines are requested early.
    constexpr size_t kAhead = 4;
    for (size_t i = 1; i < n && i <= kAhead; i++) table_.prefetch(hashes[i]);
    if (n > 0) {
        const size_t first = read_holders(table_, hashes[0], holders);
        cand.reserve(first);
        for (size_t k = 0; k < first; k++) {
            const Holder &h = holders.data()[k];
            if (fastest(h.counts) == kTiers) continue;
            Candidate &c = cand.data()[n_cand++];
            c = Candidate{};
            c.slot = h.slot;
            account(c, h.counts, 0);
        }
    }
    Candidate *const cb = cand.data(), *const ce = cb + n_cand;
    std::sort(cb, ce, [](const Candidate &a, const Candidate &b) { return a.slot < b.slot; });
    // The candidates' slots side by side: the search per holder scans 4 bytes a candidate.
    Scratch<uint32_t> slots;
    slots.reserve(n_cand);
    uint32_t *const sb = slots.data(), *const se = sb + n_cand;
    for (size_t k = 0; k < n_cand; k++) sb[k] = cb[k].slot;
    size_t alive = n_cand;
    const size_t limit = std::min<size_t>(n, UINT32_MAX - 1);
    for (size_t i = 1; i < limit && alive; i++) {
        if (i + kAhead < limit) table_.prefetch(hashes[i + kAhead]);
        const size_t nh = read_holders(table_, hashes[i], holders);
        size_t still = 0;
        for (size_t k = 0; k < nh; k++) {
            const Holder &h = holders.data()[k];
            const uint32_t *at = n_cand <= 16 ? std::find(sb, se, h.slot) : std::lower_bound(sb, se, h.slot);
            if (at == se || *at != h.slot) continue;
            Candidate *it = cb + (at - sb);
            if (it->alive_at + 1 != i || fastest(h.counts) == kTiers) continue;
            account(*it, h.counts, static_cast<uint32_t>(i));
            still++;
        }
        alive = still;
    }

    const size_t want = top_k && top_k < n_cand ? top_k : n_cand;
    *n_matches = want;
    if (want > cap || (want && !out)) return KVREG_ERANGE;
    auto match_of = [&](const Candidate &c) {
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
        return m;
    };
    if (want == n_cand) { // every match: build them in place, then sort
        for (size_t k = 0; k < n_cand; k++) out[k] = match_of(cb[k]);
        std::sort(out, out + n_cand, better);
    } else { // the best `want`: a bounded insertion (top_k is small) into out
        size_t kept = 0;
        for (const Candidate *c = cb; c != ce; c++) {
            const kvreg_index_match m = match_of(*c);
            if (kept == want && !better(m, out[want - 1])) continue;
            size_t at = kept < want ? kept++ : want - 1;
            while (at > 0 && better(m, out[at - 1])) {
                out[at] = out[at - 1];
                at--;
            }
            out[at] = m;
        }
    }
    return KVREG_OK;
}

} // namespace kvreg::index
