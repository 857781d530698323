// Matching a prompt: walk its router hashes in order and follow the workers still matching.
//
// Only workers holding the first block can match at all, so the candidates are fixed at
// block 0 (sorted by slot) and only shrink: a candidate that misses a block stops there. Each
// later block's lookup copies only the entries of candidates still matching and stops as soon
// as it has found them all (usually long before the end of the hash's probe cluster). The walk
// ends when no candidate is left, so a prompt costs one holder lookup per block some worker
// still holds. Small clusters (up to kInline holders or candidates) never touch the heap.
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

// Bit t set when tier t holds a copy (its count byte is not zero), without a loop: the high
// bit of each byte is set when the byte is not zero, and one multiply gathers the four high
// bits side by side (every partial product lands on its own bit, so nothing carries).
uint32_t tier_mask(uint32_t counts) noexcept {
    const uint32_t high = (((counts & 0x7f7f7f7fu) + 0x7f7f7f7fu) | counts) & 0x80808080u;
    return (((high >> 7) * 0x00204081u) >> 21) & ((1u << kTiers) - 1);
}

void account(Candidate &c, uint32_t m, uint32_t block) noexcept {
    c.best_counts[__builtin_ctz(m)]++;
    for (; m; m &= m - 1) {
        const unsigned t = static_cast<unsigned>(__builtin_ctz(m));
        if (c.tier_depth[t] == block) c.tier_depth[t]++;
    }
    c.alive_at = block;
}

// Load a few blocks ahead: a walk is a chain of cache misses the core cannot overlap by itself
// (each block's work is long), so the table's lines are requested early.
constexpr size_t kAhead = 4;

// The walk past block 0 when every candidate's slot is below 64 (any cluster of up to 64
// workers, and the usual case): the candidates still matching are a bit set, and a block's
// lookup copies only their entries and stops at the cluster's end or once it found them all.
void walk_small(const HolderTable &table, const uint64_t *hashes, size_t limit, Candidate *cb, size_t n_cand,
                Holder *h) {
    uint8_t pos[64]; // candidate index of a slot (read for alive slots only)
    uint64_t alive = 0;
    for (size_t k = 0; k < n_cand; k++) {
        pos[cb[k].slot] = static_cast<uint8_t>(k);
        alive |= uint64_t{1} << cb[k].slot;
    }
    size_t n_alive = n_cand; // bits set in alive (kept, not counted: no popcnt in the base ISA)
    for (size_t i = 1; i < limit && n_alive; i++) {
        if (i + kAhead < limit) table.prefetch(hashes[i + kAhead]);
        const uint64_t bits = alive;
        const size_t nh = table.holders_if(hashes[i], h, n_cand, n_alive,
                                           [bits](uint32_t s) { return s < 64 && (bits >> s & 1); });
        alive = 0;
        n_alive = 0;
        for (size_t k = 0; k < nh; k++) {
            const uint32_t m = tier_mask(h[k].counts);
            if (!m) continue;
            account(cb[pos[h[k].slot]], m, static_cast<uint32_t>(i));
            alive |= uint64_t{1} << h[k].slot;
            n_alive++;
        }
    }
}

// The same for any slot numbers: the candidates sorted by slot, each holder found by search.
void walk_sorted(const HolderTable &table, const uint64_t *hashes, size_t limit, Candidate *cb, size_t n_cand,
                 const uint32_t *sb, Holder *h) {
    const uint32_t *const se = sb + n_cand;
    auto find = [sb, se](uint32_t s) {
        const uint32_t *at = se - sb <= 16 ? std::find(sb, se, s) : std::lower_bound(sb, se, s);
        return at == se || *at != s ? SIZE_MAX : static_cast<size_t>(at - sb);
    };
    size_t alive = n_cand;
    for (size_t i = 1; i < limit && alive; i++) {
        if (i + kAhead < limit) table.prefetch(hashes[i + kAhead]);
        const size_t nh = table.holders_if(hashes[i], h, n_cand, alive, [&](uint32_t s) {
            const size_t at = find(s);
            return at != SIZE_MAX && cb[at].alive_at + 1 == i;
        });
        alive = 0;
        for (size_t k = 0; k < nh; k++) {
            const uint32_t m = tier_mask(h[k].counts);
            if (!m) continue;
            account(cb[find(h[k].slot)], m, static_cast<uint32_t>(i));
            alive++;
        }
    }
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
    for (size_t i = 1; i < n && i <= kAhead; i++) table_.prefetch(hashes[i]);
    if (n > 0) {
        const size_t first = read_holders(table_, hashes[0], holders);
        cand.reserve(first);
        for (size_t k = 0; k < first; k++) {
            const Holder &h = holders.data()[k];
            const uint32_t m = tier_mask(h.counts);
            if (!m) continue;
            Candidate &c = cand.data()[n_cand++];
            c = Candidate{};
            c.slot = h.slot;
            account(c, m, 0);
        }
    }
    // holders has room for every candidate from here on: a block's lookup copies only theirs.
    Candidate *const cb = cand.data(), *const ce = cb + n_cand;
    std::sort(cb, ce, [](const Candidate &a, const Candidate &b) { return a.slot < b.slot; });
    const size_t limit = std::min<size_t>(n, UINT32_MAX - 1);
    if (n_cand && cb[n_cand - 1].slot < 64) {
        walk_small(table_, hashes, limit, cb, n_cand, holders.data());
    } else if (n_cand) {
        // The candidates' slots side by side: the search per holder scans 4 bytes a candidate.
        Scratch<uint32_t> slots;
        slots.reserve(n_cand);
        for (size_t k = 0; k < n_cand; k++) slots.data()[k] = cb[k].slot;
        walk_sorted(table_, hashes, limit, cb, n_cand, slots.data(), holders.data());
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
            score += weight_[t] * c.best_counts[t];
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
