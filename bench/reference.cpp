// The hash rule implemented a second time, directly on libxxhash, so the benchmark never trusts
// the library under test for its own expected values (and times the raw limit in `hash`).
#include "bench.hpp"

#include <xxhash.h>

#include <bit>
#include <cstdio>
#include <cstring>

namespace bench {

static_assert(sizeof(uint32_t) == 4 && sizeof(uint64_t) == 8, "fixed-width types");

uint64_t ref_block_hash(const uint32_t *tokens, size_t n, uint64_t salt) {
    if constexpr (std::endian::native == std::endian::little) {
        return XXH3_64bits_withSeed(tokens, n * 4, salt);
    } else {
        // The rule hashes each token as 4 little-endian bytes.
        std::vector<unsigned char> le(n * 4);
        for (size_t i = 0; i < n; i++)
            for (size_t k = 0; k < 4; k++) le[i * 4 + k] = static_cast<unsigned char>(tokens[i] >> (8 * k));
        return XXH3_64bits_withSeed(le.data(), le.size(), salt);
    }
}

uint64_t ref_chain_hash(uint64_t parent, uint64_t block_hash, uint64_t salt) {
    unsigned char buf[16];
    for (size_t k = 0; k < 8; k++) {
        buf[k] = static_cast<unsigned char>(parent >> (8 * k));
        buf[8 + k] = static_cast<unsigned char>(block_hash >> (8 * k));
    }
    return XXH3_64bits_withSeed(buf, sizeof buf, salt);
}

bool check_vectors() {
    // Dynamo's test constants (lib/llm/src/tokens.rs), the same ones the peer checks at start.
    const uint32_t toks[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    const uint64_t want[2] = {UINT64_C(14643705804678351452), UINT64_C(4945711292740353085)};
    kvreg_block_info info[2];
    size_t nb = 0;
    if (kvreg_hash_blocks(toks, 10, 4, 1337, info, 2, &nb) != KVREG_OK || nb != 2) return false;
    const bool lib_ok = info[0].sequence_hash == want[0] && info[1].sequence_hash == want[1] &&
                        info[1].parent_sequence_hash == want[0] && info[0].has_parent == 0 &&
                        info[1].has_parent == 1;
    const uint64_t r0 = ref_block_hash(toks, 4, 1337);
    const uint64_t r1 = ref_chain_hash(r0, ref_block_hash(toks + 4, 4, 1337), 1337);
    const bool ref_ok = r0 == want[0] && r1 == want[1];
    if (!lib_ok || !ref_ok)
        std::fprintf(stderr, "kvreg-bench: hash vectors mismatch (library %s, reference %s)\n",
                     lib_ok ? "ok" : "WRONG", ref_ok ? "ok" : "WRONG");
    return lib_ok && ref_ok;
}

} // namespace bench
