// Block hashing: the Dynamo 1.0.x rule (see include/kvreg.h and spec §1.2).
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvreg {

// XXH3-64 over the tokens' little-endian bytes, seeded with the salt.
uint64_t block_hash(const uint32_t *tokens, size_t n_tokens, uint64_t salt) noexcept;

// XXH3-64 over u64le(parent) || u64le(block), seeded with the salt (exactly 16 bytes).
uint64_t chain_hash(uint64_t parent_sequence_hash, uint64_t block_hash, uint64_t salt) noexcept;

} // namespace kvreg
