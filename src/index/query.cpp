// Matching a prompt with tiers and ranking: the walk (walk.hpp) follows the workers still
// matching and records, per candidate, its blocks per tier and where each tier's prefix ends;
// then the candidates are scored and ranked. Small clusters (up to kInline holders or
// candidates) never touch the heap.
#include <algorithm>
#include <bit>
#include <cstring>
#include <memory>

#include "index/index.hpp"
#include "index/query_scratch.hpp"
#include "index/walk.hpp"

namespace kvreg::index {

namespace {

struct Candidate {
    uint32_t tag;      // the worker's slot and generation, as block 0's entry had them
    uint32_t alive_at; // last block index it held (its depth - 1)
    uint32_t unbroken; // tiers that held every block so far (their tier_depth is still open)
    uint32_t best_counts[kTiers];
    uint32_t tier_depth[kTiers]; // of the tiers no longer unbroken; finish() sets the others
};

// Bit t set when tier t holds a copy (its count byte is not zero), without a loop: the high
// bit of each byte is set when the byte is not zero, and one multiply gathers the four high
// bits side by side (every partial product lands on its own bit, so nothing carries).
uint32_t tier_mask(uint32_t counts) noexcept {
    const uint32_t high = (((counts & 0x7f7f7f7fu) + 0x7f7f7f7fu) | counts) & 0x80808080u;
    return (((high >> 7) * 0x00204081u) >> 21) & ((1u << kTiers) - 1);
}

// Block `block` is held by the candidate in tiers m (not 0). A tier's prefix ends at the first
// block it misses: recorded then, which is rare, so the usual block costs a count and a mask.
void account(Candidate &c, uint32_t m, uint32_t block) noexcept {
    c.best_counts[__builtin_ctz(m)]++;
    for (uint32_t broke = c.unbroken & ~m; broke; broke &= broke - 1)
        c.tier_depth[__builtin_ctz(broke)] = block;
    c.unbroken &= m;
    c.alive_at = block;
}

// A candidate's first block (block 0): its tiers start their prefixes.
void start(Candidate &c, uint32_t tag, uint32_t m) noexcept {
    c = Candidate{};
    c.tag = tag;
    c.unbroken = m;
    c.best_counts[__builtin_ctz(m)] = 1;
}

// After the walk: the tiers still unbroken hold the whole matched prefix.
void finish(Candidate &c) noexcept {
    for (uint32_t u = c.unbroken; u; u &= u - 1) c.tier_depth[__builtin_ctz(u)] = c.alive_at + 1;
}

// The walk's state (walk.hpp) when every candidate's slot is below 64 (any cluster of up to 64
// workers, and the usual case): the candidates still matching are a bit set.
struct SmallState {
    Candidate *cb;
    uint8_t pos[64]; // candidate index of a slot (read for alive slots only)
    uint64_t alive = 0;

    SmallState(Candidate *c, size_t n_cand) noexcept : cb(c) {
        for (size_t k = 0; k < n_cand; k++) {
            const uint32_t s = slot_of(cb[k].tag);
            pos[s] = static_cast<uint8_t>(k);
            alive |= uint64_t{1} << s;
        }
    }
    auto matching(uint32_t) const noexcept {
        return [bits = alive](uint32_t tag) {
            const uint32_t s = slot_of(tag);
            return s < 64 && (bits >> s & 1);
        };
    }
    // The bits set in alive are counted here, not by popcnt (not in the base ISA).
    size_t take(const Holder *h, size_t nh, uint32_t block) noexcept {
        alive = 0;
        size_t n_alive = 0;
        for (size_t k = 0; k < nh; k++) {
            const uint32_t m = tier_mask(h[k].counts);
            if (!m) continue;
            const uint32_t s = slot_of(h[k].slot);
            account(cb[pos[s]], m, block);
            alive |= uint64_t{1} << s;
            n_alive++;
        }
        return n_alive;
    }
};

// The same for any slot numbers (a cluster of more than 64 workers): the candidates still
// matching are a bit set over slot numbers up to max_slot, and pos names each one's candidate.
// A block's lookup tests a bit per holder instead of searching the candidates, and the set is
// rebuilt from the holders found (a word per 64 slots).
struct WideState {
    Candidate *cb;
    uint32_t max_slot;
    uint32_t *pos;
    uint64_t *alive;
    size_t words;

    WideState(Candidate *c, size_t n_cand, uint32_t max, uint32_t *p, uint64_t *a) noexcept
        : cb(c), max_slot(max), pos(p), alive(a), words(max / 64 + 1) {
        std::memset(alive, 0, words * sizeof(uint64_t));
        for (size_t k = 0; k < n_cand; k++) {
            const uint32_t s = slot_of(cb[k].tag);
            pos[s] = static_cast<uint32_t>(k);
            alive[s / 64] |= uint64_t{1} << (s % 64);
        }
    }
    auto matching(uint32_t) const noexcept {
        return [a = alive, max = max_slot](uint32_t tag) {
            const uint32_t s = slot_of(tag);
            return s <= max && (a[s / 64] >> (s % 64) & 1);
        };
    }
    size_t take(const Holder *h, size_t nh, uint32_t block) noexcept {
        std::memset(alive, 0, words * sizeof(uint64_t));
        size_t n_alive = 0;
        for (size_t k = 0; k < nh; k++) {
            const uint32_t m = tier_mask(h[k].counts);
            if (!m) continue;
            const uint32_t s = slot_of(h[k].slot);
            account(cb[pos[s]], m, block);
            alive[s / 64] |= uint64_t{1} << (s % 64);
            n_alive++;
        }
        return n_alive;
    }
};

// A candidate's place in the answer: the fields the order compares, and which candidate it is.
// The answer is ranked as these small keys and each match is written once, field by field,
// straight into the caller's array: building a kvreg_index_match on the stack and copying it
// out made the compiler store it in pieces and reload it whole, a store-forwarding stall on
// every match (most of a short query's time).
//
// The order (score, then depth, best first; then worker_id and dp_rank ascending) is kept as
// three words compared in turn, smaller first: the score's bits inverted (scores are >= 0,
// and the bits of non-negative doubles order as their values), then the depth inverted beside
// the worker id's high half, then its low half beside the DP rank. Sorting the thousands of
// matches of a hot prefix compares integers instead of a double and three more fields.
struct Ranked {
    uint64_t k0, k1, k2;
    uint32_t cand;

    Ranked() noexcept = default;
    Ranked(double score, uint32_t depth, uint64_t worker_id, uint32_t dp_rank, uint32_t c) noexcept
        : k0(~std::bit_cast<uint64_t>(score)), k1(uint64_t{~depth} << 32 | worker_id >> 32),
          k2(worker_id << 32 | dp_rank), cand(c) {}
    double score() const noexcept { return std::bit_cast<double>(~k0); }
    uint32_t depth() const noexcept { return ~static_cast<uint32_t>(k1 >> 32); }
    uint64_t worker_id() const noexcept { return k1 << 32 | k2 >> 32; }
    uint32_t dp_rank() const noexcept { return static_cast<uint32_t>(k2); }
};

bool better(const Ranked &a, const Ranked &b) noexcept {
    if (a.k0 != b.k0) return a.k0 < b.k0;
    if (a.k1 != b.k1) return a.k1 < b.k1;
    return a.k2 < b.k2;
}

// Sorts r[0..n) by (k0, k1, k2) ascending, least significant byte first, through tmp (room for
// n), visiting only the bytes in which some keys differ; false (nothing sorted) when more than
// kMaxPasses bytes differ, where a comparison sort is cheaper. The matches of a hot prefix are
// mostly ties on score and depth, told apart by a few bytes: five or six passes over them
// instead of a comparison sort, which was most of such a query's time (kvreg-bench --workload
// index_k1, whose answers hold thousands of workers). Moving 8-byte (key bytes, element number) items instead of the
// elements measured the same, and was dropped.
bool radix_sort(Ranked *r, Ranked *tmp, size_t n) {
    static constexpr int kMaxPasses = 6;
    uint64_t diff[3] = {0, 0, 0};
    for (size_t i = 1; i < n; i++) {
        diff[0] |= r[i].k0 ^ r[0].k0;
        diff[1] |= r[i].k1 ^ r[0].k1;
        diff[2] |= r[i].k2 ^ r[0].k2;
    }
    int passes = 0;
    for (uint64_t d : diff)
        for (int b = 0; b < 8; b++) passes += (d >> (8 * b) & 0xff) != 0;
    if (passes > kMaxPasses) return false;
    Ranked *src = r, *dst = tmp;
    for (int w = 2; w >= 0; w--) {
        for (int b = 0; b < 8; b++) {
            if ((diff[w] >> (8 * b) & 0xff) == 0) continue;
            const unsigned shift = 8 * static_cast<unsigned>(b);
            auto digit = [w, shift](const Ranked &x) {
                const uint64_t k = w == 0 ? x.k0 : w == 1 ? x.k1 : x.k2;
                return static_cast<size_t>(k >> shift & 0xff);
            };
            size_t at[256] = {};
            for (size_t i = 0; i < n; i++) at[digit(src[i])]++;
            for (size_t v = 0, sum = 0; v < 256; v++) {
                const size_t c = at[v];
                at[v] = sum;
                sum += c;
            }
            for (size_t i = 0; i < n; i++) dst[at[digit(src[i])]++] = src[i];
            std::swap(src, dst);
        }
    }
    if (src != r) std::memcpy(r, src, n * sizeof(Ranked));
    return true;
}

// Ranks a query's candidates into r, best first, keeping the best `want` of them. Answers are
// usually a few workers: each key is inserted as it is made, straight from registers (writing
// all the keys first and reading each back whole stalled on store forwarding, as above), and a
// key that cannot make the cut costs one comparison. Past kInsertMax candidates the keys are
// sorted once all are in (radix_sort, or the library's sort when too many bytes differ).
class Ranking {
public:
    static constexpr size_t kInsertMax = 32;
    Ranking(Ranked *r, Ranked *tmp, size_t n, size_t want) noexcept : r_(r), tmp_(tmp), n_(n), want_(want) {}
    void add(const Ranked &x) noexcept {
        if (n_ > kInsertMax) {
            r_[kept_++] = x;
            return;
        }
        if (kept_ == want_ && !better(x, r_[want_ - 1])) return;
        size_t at = kept_ < want_ ? kept_++ : want_ - 1;
        while (at > 0 && better(x, r_[at - 1])) {
            r_[at] = r_[at - 1];
            at--;
        }
        r_[at] = x;
    }
    // Sorts what was added (fewer than n when candidates were dropped); returns how many of
    // them are kept: want, or all of them when fewer.
    size_t finish() {
        if (n_ <= kInsertMax) return kept_;
        const size_t added = kept_, keep = std::min(want_, added);
        if (!radix_sort(r_, tmp_, added)) {
            if (keep == added)
                std::sort(r_, r_ + added, better);
            else
                std::partial_sort(r_, r_ + keep, r_ + added, better);
        }
        return keep;
    }

private:
    Ranked *r_, *tmp_;
    size_t n_, want_, kept_ = 0;
};

} // namespace

int Index::query(const uint64_t *hashes, size_t n, size_t top_k, kvreg_index_match *out, size_t cap,
                 size_t *n_matches) const {
    Scratch<Holder> holders;
    Scratch<Candidate> cand;
    size_t n_cand = 0;
    uint32_t max_slot = 0; // of the candidates: which walk, and how big its slot arrays
    for (size_t i = 1; i < n && i <= kAhead; i++) table_.prefetch(hashes[i]);
    if (n > 0) {
        const size_t first = read_holders(table_, hashes[0], holders);
        cand.reserve(first);
        for (size_t k = 0; k < first; k++) {
            const Holder &h = holders.data()[k];
            const uint32_t m = tier_mask(h.counts);
            if (!m) continue;
            start(cand.data()[n_cand++], h.slot, m);
            max_slot = std::max(max_slot, slot_of(h.slot));
        }
    }
    // holders has room for every candidate from here on: a block's lookup copies only theirs.
    Candidate *const cb = cand.data();
    const size_t limit = std::min<size_t>(n, UINT32_MAX - 1);
    if (n_cand && max_slot < 64) {
        SmallState st(cb, n_cand);
        walk_prefix(table_, hashes, limit, n_cand, holders.data(), st);
    } else if (n_cand) {
        Scratch<uint32_t> pos;
        Scratch<uint64_t> alive;
        pos.reserve(size_t{max_slot} + 1);
        alive.reserve(size_t{max_slot} / 64 + 1);
        WideState st(cb, n_cand, max_slot, pos.data(), alive.data());
        walk_prefix(table_, hashes, limit, n_cand, holders.data(), st);
    }

    for (size_t k = 0; k < n_cand; k++) finish(cb[k]);

    const size_t want = top_k && top_k < n_cand ? top_k : n_cand;
    *n_matches = want;
    if (want > cap || (want && !out)) return KVREG_ERANGE;
    Scratch<Ranked> ranked;
    ranked.reserve(n_cand);
    // the radix sort's second buffer, for the clusters that are sorted (heap: they are big)
    const std::unique_ptr<Ranked[]> spare(n_cand > Ranking::kInsertMax ? new Ranked[n_cand] : nullptr);
    Ranked *const r = ranked.data();
    Ranking ranking(r, spare.get(), n_cand, want);
    for (size_t k = 0; k < n_cand; k++) {
        const Candidate &c = cb[k];
        uint64_t id;
        uint32_t dp;
        if (!Workers::name(workers_.ident(slot_of(c.tag)), c.tag, id, dp)) continue; // it left (workers.hpp)
        double score = 0;
        for (unsigned t = 0; t < kTiers; t++) score += weight_[t] * c.best_counts[t];
        ranking.add(Ranked(score, c.alive_at + 1, id, dp, static_cast<uint32_t>(k)));
    }
    const size_t got = ranking.finish();
    *n_matches = got;
    for (size_t i = 0; i < got; i++) {
        const Candidate &c = cb[r[i].cand];
        kvreg_index_match &m = out[i];
        m.worker_id = r[i].worker_id();
        m.dp_rank = r[i].dp_rank();
        m.depth = r[i].depth();
        for (unsigned t = 0; t < kTiers; t++) {
            m.blocks[t] = c.best_counts[t];
            m.tier_depth[t] = c.tier_depth[t];
        }
        m.score = r[i].score();
        m.reserved[0] = m.reserved[1] = 0;
    }
    return KVREG_OK;
}

} // namespace kvreg::index
