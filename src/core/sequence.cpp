#include "core/sequence.hpp"

#include <cstring>
#include <functional>

#include "core/hash.hpp"

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
        out->sequence_hash = out->block_hash; // no parent, so no chain step (kvreg.h)
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

// Capacity for at least `need` (<= max). Growing doubles, capped at max, so n one-token appends
// move the stored elements O(log n) times in all instead of once per call.
template <typename A> static void grow_for(A &a, size_t need, size_t max) {
    const size_t cap = a.capacity();
    if (need <= cap) return;
    const size_t doubled = cap <= max / 2 ? cap * 2 : max;
    a.reserve(doubled < need ? need : doubled);
}

size_t Sequence::max_total_for(uint32_t block_size) noexcept {
    // Blocks stay within kMaxBlocks while total <= kMaxBlocks * block_size + block_size - 1.
    // If kMaxTokens / block_size <= kMaxBlocks (block sizes from 8 up) the token limit is the
    // tighter one; otherwise (kMaxBlocks + 1) * block_size <= kMaxTokens, so nothing wraps.
    if (kMaxTokens / block_size <= kMaxBlocks) return kMaxTokens;
    return kMaxBlocks * block_size + (block_size - 1);
}

// Allocates before anything changes, so that nothing after it can throw (all-or-nothing).
// blocks_ first: if tokens_ then fails it has not moved, so views taken before stay valid.
void Sequence::reserve_for(size_t total, size_t blocks) {
    grow_for(blocks_, blocks, kMaxBlocks);
    grow_for(tokens_, total, max_total_);
}

void Sequence::commit_block(size_t i) noexcept {
    kvreg_block_info info;
    hash_one(tokens_.data() + i * block_size_, block_size_, salt_, i, i ? &blocks_[i - 1] : nullptr,
             &info);
    blocks_.push_unchecked(info); // within the capacity reserve_for() made
    next_commit_ += block_size_;
}

size_t Sequence::extend(const uint32_t *tokens, size_t n) {
    if (n == 0) return 0;
    const size_t old_total = tokens_.size();
    const size_t old_blocks = blocks_.size();
    const size_t new_blocks = (old_total + n) / block_size_;
    // tokens may be one of our own views, which growing would free: keep it as an offset.
    // std::less gives a total order even over pointers into different arrays.
    const std::less<const uint32_t *> below;
    const uint32_t *const base = tokens_.data();
    const bool own = old_total > 0 && !below(tokens, base) && below(tokens, base + old_total);
    const size_t offset = own ? static_cast<size_t>(tokens - base) : 0;
    reserve_for(old_total + n, new_blocks);
    if (own) tokens = tokens_.data() + offset; // moved with the array; lies below old_total
    // memmove: a caller passing more than its view would overlap source and destination.
    std::memmove(tokens_.data() + old_total, tokens, n * sizeof(uint32_t));
    tokens_.grow_unchecked(n);
    for (size_t i = old_blocks; i < new_blocks; i++) commit_block(i);
    return new_blocks - old_blocks;
}

bool Sequence::append_slow(uint32_t token) {
    const size_t old_blocks = blocks_.size();
    const bool completes = tokens_.size() + 1 == next_commit_;
    reserve_for(tokens_.size() + 1, old_blocks + (completes ? 1 : 0));
    tokens_.push_unchecked(token);
    if (completes) commit_block(old_blocks);
    return completes;
}

void Sequence::truncate(size_t n) noexcept {
    if (n >= tokens_.size()) return;
    tokens_.shrink_to(n);
    blocks_.shrink_to(n / block_size_);
    next_commit_ = (blocks_.size() + 1) * block_size_;
}

bool Sequence::pop(uint32_t *token) noexcept {
    if (tokens_.size() == 0) return false;
    *token = tokens_.data()[tokens_.size() - 1];
    truncate(tokens_.size() - 1);
    return true;
}

} // namespace kvreg
