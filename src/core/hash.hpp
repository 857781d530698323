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

// XXH3-64 (seed 0) of a byte string: the index dump's checksum (index/dump.cpp).
uint64_t checksum64(const void *data, size_t len) noexcept;

// The same checksum of a string fed in pieces, for a dump that is never held whole.
class Checksum64 {
public:
    Checksum64(); // throws std::bad_alloc
    ~Checksum64();
    Checksum64(const Checksum64 &) = delete;
    Checksum64 &operator=(const Checksum64 &) = delete;
    void update(const void *data, size_t len) noexcept;
    uint64_t digest() const noexcept;

private:
    void *state_; // XXH3_state_t (xxhash.h stays inside hash.cpp)
};

} // namespace kvreg
