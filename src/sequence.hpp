// A token sequence split into fixed-size blocks with chained hashes (Dynamo's
// TokenBlockSequence, spec §1.3-§1.5). Blocks are committed eagerly: as soon as the partial
// block is full it is hashed, so the partial block is never full after a call returns.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kvreg.h"

namespace kvreg {

class Sequence {
public:
    Sequence(uint32_t block_size, uint64_t salt) : block_size_(block_size), salt_(salt) {}

    // All-or-nothing: on std::bad_alloc the sequence is unchanged. Returns blocks completed.
    size_t extend(const uint32_t *tokens, size_t n);
    // Keep the first n tokens; whole blocks past it are dropped, survivors keep their hashes.
    void truncate(size_t n) noexcept;
    void reset() noexcept { truncate(0); }
    bool pop(uint32_t *token) noexcept;

    size_t num_blocks() const noexcept { return blocks_.size(); }
    size_t total_tokens() const noexcept { return tokens_.size(); }
    uint32_t block_size() const noexcept { return block_size_; }
    uint64_t salt() const noexcept { return salt_; }
    const kvreg_block_info &block(size_t i) const noexcept { return blocks_[i]; }
    const uint32_t *block_tokens(size_t i) const noexcept { return tokens_.data() + i * block_size_; }
    const uint32_t *partial_tokens() const noexcept { return tokens_.data() + blocks_.size() * block_size_; }
    size_t partial_len() const noexcept { return tokens_.size() - blocks_.size() * block_size_; }

private:
    uint32_t block_size_;
    uint64_t salt_;
    std::vector<uint32_t> tokens_;         // every token, committed blocks first
    std::vector<kvreg_block_info> blocks_; // one per committed block
};

// Fill out[0..n_tokens/block_size) for a flat token array (no allocation).
void hash_blocks_into(const uint32_t *tokens, size_t n_blocks, uint32_t block_size, uint64_t salt,
                      kvreg_block_info *out) noexcept;

} // namespace kvreg
