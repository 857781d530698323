// C entry points for hashing.
#include "core/hash.hpp"
#include "kvreg.h"
#include "core/sequence.hpp"

// More tokens than this cannot be a buffer: their byte count, n_tokens * 4, wraps around size_t
// (2^62 + 2 tokens would hash as 2). kvreg.h documents the result for larger counts.
static constexpr size_t kMaxHashTokens = SIZE_MAX / sizeof(uint32_t);

extern "C" {

KVREG_API uint64_t kvreg_block_hash(const uint32_t *tokens, size_t n_tokens, uint64_t salt) noexcept {
    if (!tokens) n_tokens = 0; // documented: NULL only with 0 tokens; never dereference NULL
    if (n_tokens > kMaxHashTokens) return 0; // documented: no buffer holds that many
    return kvreg::block_hash(tokens, n_tokens, salt);
}

KVREG_API uint64_t kvreg_sequence_hash(uint64_t parent_sequence_hash, uint64_t block_hash,
                                       uint64_t salt) noexcept {
    return kvreg::chain_hash(parent_sequence_hash, block_hash, salt);
}

KVREG_API int kvreg_hash_blocks(const uint32_t *tokens, size_t n_tokens, uint32_t block_size,
                                uint64_t salt, kvreg_block_info *out, size_t out_cap,
                                size_t *n_blocks) noexcept {
    if (!n_blocks || block_size == 0 || (!tokens && n_tokens > 0)) return KVREG_EINVAL;
    if (n_tokens > kMaxHashTokens) return KVREG_EOVERFLOW;
    const size_t n = n_tokens / block_size;
    *n_blocks = n;
    if (n == 0) return KVREG_OK;
    if (out_cap < n) return KVREG_ERANGE;
    if (!out) return KVREG_EINVAL;
    kvreg::hash_blocks_into(tokens, n, block_size, salt, out);
    return KVREG_OK;
}

} // extern "C"
