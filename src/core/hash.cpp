// The only translation unit that calls xxHash. XXH_INLINE_ALL takes the system header's inline
// implementation (allowed by the project: still the system libxxhash, no vendored copy) so the
// 64-byte and 16-byte inputs this library hashes compile to straight-line code.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cstring>
#include <new>

#include "core/hash.hpp"

namespace kvreg {

static_assert(sizeof(uint32_t) == 4);

// Dynamo hashes the in-memory bytes of the u32 tokens; Dynamo only ships on little-endian
// hosts and the router uses to_le_bytes, so little-endian is canonical. On a big-endian host
// we byte-swap into a bounce buffer to produce the same names.
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
static uint64_t hash_le_words(const uint32_t *tokens, size_t n, uint64_t salt) noexcept {
    XXH3_state_t st;
    XXH3_64bits_reset_withSeed(&st, salt);
    uint32_t buf[256];
    while (n > 0) {
        size_t k = n < 256 ? n : 256;
        for (size_t i = 0; i < k; i++) buf[i] = __builtin_bswap32(tokens[i]);
        XXH3_64bits_update(&st, buf, k * 4);
        tokens += k;
        n -= k;
    }
    return XXH3_64bits_digest(&st);
}
#endif

uint64_t block_hash(const uint32_t *tokens, size_t n_tokens, uint64_t salt) noexcept {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    return hash_le_words(tokens, n_tokens, salt);
#else
    return XXH3_64bits_withSeed(tokens, n_tokens * sizeof(uint32_t), salt);
#endif
}

uint64_t chain_hash(uint64_t parent_sequence_hash, uint64_t block_hash_value, uint64_t salt) noexcept {
    // u64le(parent) || u64le(block): on a little-endian host that is the two words' memory.
    uint64_t words[2] = {parent_sequence_hash, block_hash_value};
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    words[0] = __builtin_bswap64(words[0]);
    words[1] = __builtin_bswap64(words[1]);
#endif
    return XXH3_64bits_withSeed(words, sizeof words, salt);
}

uint64_t checksum64(const void *data, size_t len) noexcept { return XXH3_64bits(data, len); }

Checksum64::Checksum64() : state_(XXH3_createState()) {
    if (!state_) throw std::bad_alloc();
    XXH3_64bits_reset(static_cast<XXH3_state_t *>(state_));
}

Checksum64::~Checksum64() { XXH3_freeState(static_cast<XXH3_state_t *>(state_)); }

void Checksum64::update(const void *data, size_t len) noexcept {
    XXH3_64bits_update(static_cast<XXH3_state_t *>(state_), data, len);
}

uint64_t Checksum64::digest() const noexcept { return XXH3_64bits_digest(static_cast<XXH3_state_t *>(state_)); }

} // namespace kvreg
