// Workload inputs: token generation exactly as the peer draws it, then blocks hashed by the
// library (kvreg_hash_blocks) and cross-checked against the independent reference.
#include "bench.hpp"

#include <algorithm>

namespace bench {

// Hash every sequence of set.tokens with the library, fill descs, and verify each hash.
static void describe(SeqSet &set, const Opts &o) {
    set.per_seq = set.len / set.block;
    set.descs.resize(set.n_seqs * set.per_seq);
    std::vector<kvreg_block_info> info(set.per_seq);
    for (size_t s = 0; s < set.n_seqs; s++) {
        const uint32_t *toks = set.tokens.data() + s * set.len;
        size_t nb = 0;
        check_rc(kvreg_hash_blocks(toks, set.len, static_cast<uint32_t>(set.block), o.salt,
                                   info.data(), info.size(), &nb),
                 "kvreg_hash_blocks");
        uint64_t parent = 0;
        for (size_t k = 0; k < set.per_seq; k++) {
            const kvreg_block_info &bi = info[k];
            const uint32_t *bt = toks + k * set.block;
            const uint64_t bh = ref_block_hash(bt, set.block, o.salt);
            const uint64_t sh = k == 0 ? bh : ref_chain_hash(parent, bh, o.salt);
            if (bi.block_hash != bh || bi.sequence_hash != sh || bi.has_parent != (k > 0 ? 1u : 0u) ||
                (k > 0 && bi.parent_sequence_hash != parent))
                set.ref_ok = false;
            parent = sh;
            kvreg_block_desc &d = set.descs[s * set.per_seq + k];
            d.sequence_hash = bi.sequence_hash;
            d.block_hash = bi.block_hash;
            d.parent_sequence_hash = bi.parent_sequence_hash;
            d.has_parent = bi.has_parent;
            d.block_size = static_cast<uint32_t>(set.block);
            // Registered with tokens, like the seed's TokenBlock: Register events carry them.
            d.tokens = bt;
            d.n_tokens = set.block;
            set.checksum += bi.sequence_hash;
        }
    }
}

SeqSet gen_random(const Opts &o, size_t s, size_t l) {
    SeqSet set;
    set.n_seqs = s;
    set.len = l;
    set.block = o.block;
    set.tokens.resize(s * l);
    // One stream, one sequence after another: the same tokens as the peer's per-sequence draws.
    SplitMix64 rng(o.seed);
    rng.fill(set.tokens.data(), set.tokens.size());
    describe(set, o);
    return set;
}

SeqSet gen_prefixed(const Opts &o, size_t s, size_t l, size_t p, size_t groups) {
    SeqSet set;
    set.n_seqs = s;
    set.len = l;
    set.block = o.block;
    SplitMix64 rng(o.seed);
    std::vector<uint32_t> prefixes(groups * p);
    rng.fill(prefixes.data(), prefixes.size());
    set.tokens.resize(s * l);
    for (size_t i = 0; i < s; i++) {
        uint32_t *dst = set.tokens.data() + i * l;
        const uint32_t *pre = prefixes.data() + (i % groups) * p;
        for (size_t k = 0; k < p; k++) dst[k] = pre[k];
        rng.fill(dst + p, l - p);
    }
    describe(set, o);
    return set;
}

std::pair<uint64_t, uint64_t> distinct_hashes(const SeqSet &set) {
    // Sort + unique: several times faster than a node-based set at 640k hashes.
    std::vector<uint64_t> h(set.descs.size());
    for (size_t i = 0; i < h.size(); i++) h[i] = set.descs[i].sequence_hash;
    std::sort(h.begin(), h.end());
    h.erase(std::unique(h.begin(), h.end()), h.end());
    uint64_t sum = 0;
    for (uint64_t x : h) sum += x;
    return {h.size(), sum};
}

} // namespace bench
