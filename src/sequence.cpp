#include "sequence.hpp"

#include "hash.hpp"

namespace kvreg {

static void hash_one(const uint32_t *tokens, uint32_t block_size, uint64_t salt, size_t index,
                     const kvreg_block_info *parent, kvreg_block_info *out) noexcept {
    out->block_hash = block_hash(tokens, block_size, salt);
    if (parent) {
        out->parent_sequence_hash = parent->sequence_hash;
        out->has_parent = 1;
        out->sequence_hash = chain_hash(parent->sequence_hash, out->block_hash, salt);
    } else {
        out->parent_sequence_hash = 0;
        out->has_parent = 0;
        out->sequence_hash = out->block_hash; // the first block is not re-hashed (spec §1.2)
    }
    out->position = index > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(index);
}

void hash_blocks_into(const uint32_t *tokens, size_t n_blocks, uint32_t block_size, uint64_t salt,
                      kvreg_block_info *out) noexcept {
    // The hot loop of kvreg_hash_blocks: two XXH3 calls a block and nothing else that costs.
    uint64_t parent = 0;
    for (size_t i = 0; i < n_blocks; i++, tokens += block_size) {
        const uint64_t bh = block_hash(tokens, block_size, salt);
        const uint64_t sh = i ? chain_hash(parent, bh, salt) : bh;
        out[i].block_hash = bh;
        out[i].sequence_hash = sh;
        out[i].parent_sequence_hash = parent;
        out[i].has_parent = i ? 1u : 0u;
        out[i].position = i < UINT32_MAX ? static_cast<uint32_t>(i) : UINT32_MAX;
        parent = sh;
    }
}

size_t Sequence::extend(const uint32_t *tokens, size_t n) {
    if (n == 0) return 0;
    const size_t old_blocks = blocks_.size();
    const size_t new_total = tokens_.size() + n;
    const size_t new_blocks = new_total / block_size_;
    // Reserve first so that nothing below can throw: the call is all-or-nothing.
    tokens_.reserve(new_total);
    blocks_.reserve(new_blocks);
    tokens_.insert(tokens_.end(), tokens, tokens + n);
    for (size_t i = old_blocks; i < new_blocks; i++) {
        kvreg_block_info info;
        hash_one(tokens_.data() + i * block_size_, block_size_, salt_, i,
                 i ? &blocks_[i - 1] : nullptr, &info);
        blocks_.push_back(info);
    }
    return new_blocks - old_blocks;
}

void Sequence::truncate(size_t n) noexcept {
    if (n >= tokens_.size()) return;
    tokens_.resize(n); // shrinking never allocates
    blocks_.resize(n / block_size_);
}

bool Sequence::pop(uint32_t *token) noexcept {
    if (tokens_.empty()) return false;
    *token = tokens_.back();
    truncate(tokens_.size() - 1);
    return true;
}

} // namespace kvreg
