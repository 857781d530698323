// Block hashing: the Dynamo 1.0.x rule, stated in full in include/kvreg.h ("Hashing").
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvreg {

// XXH3-64 over the tokens' little-endian bytes, seeded with the salt. n_tokens must be at most
// SIZE_MAX / 4 (callers check): beyond it the byte count wraps and a wrong length is hashed.
uint64_t block_hash(const uint32_t *tokens, size_t n_tokens, uint64_t salt) noexcept;

// XXH3-64 over u64le(parent) || u64le(block), seeded with the salt (exactly 16 bytes).
uint64_t chain_hash(uint64_t parent_sequence_hash, uint64_t block_hash, uint64_t salt) noexcept;

} // namespace kvreg
