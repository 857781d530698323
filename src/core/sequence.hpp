// A token sequence split into fixed-size blocks with chained hashes (the counterpart of Dynamo's
// TokenBlockSequence; the hash rule is in include/kvreg.h). Blocks are committed eagerly: as soon
// as the partial block is full it is hashed, so the partial block is never full after a call
// returns.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <type_traits>

#include "kvreg.h"

namespace kvreg {

// A growable array of trivially copyable T: data, size and capacity, grown only by reserve().
// Not a std::vector, so that growth can use realloc (which can extend or remap a large array
// instead of copying it and faulting fresh pages in) and so that an append within capacity is
// one store with no reallocation branch (see Sequence::append).
template <typename T> class PodArray {
public:
    PodArray() = default;
    PodArray(const PodArray &) = delete;
    PodArray &operator=(const PodArray &) = delete;
    ~PodArray() { std::free(data_); }

    size_t size() const noexcept { return size_; }
    size_t capacity() const noexcept { return cap_; }
    T *data() noexcept { return data_; }
    const T *data() const noexcept { return data_; }
    const T &operator[](size_t i) const noexcept { return data_[i]; }
    // Capacity for at least n (n * sizeof(T) must not wrap: callers stay within the Sequence
    // limits). Throws std::bad_alloc on failure; realloc then leaves the array as it was.
    void reserve(size_t n) {
        if (n <= cap_) return;
        void *p = std::realloc(data_, n * sizeof(T));
        if (!p) throw std::bad_alloc();
        data_ = static_cast<T *>(p);
        cap_ = n;
    }
    void push_unchecked(const T &v) noexcept { data_[size_++] = v; } // requires size < capacity
    void grow_unchecked(size_t n) noexcept { size_ += n; }           // requires room for n
    void shrink_to(size_t n) noexcept { size_ = n; }                 // requires n <= size

private:
    static_assert(std::is_trivially_copyable_v<T>, "realloc moves the bytes");
    T *data_ = nullptr;
    size_t size_ = 0;
    size_t cap_ = 0;
};

class Sequence {
public:
    // The most tokens and blocks a sequence can ever hold: each array must stay within
    // PTRDIFF_MAX bytes (the largest object C and C++ can index). kvreg.h documents both.
    static constexpr size_t kMaxTokens = PTRDIFF_MAX / sizeof(uint32_t);
    static constexpr size_t kMaxBlocks = PTRDIFF_MAX / sizeof(kvreg_block_info);

    Sequence(uint32_t block_size, uint64_t salt)
        : block_size_(block_size), salt_(salt), max_total_(max_total_for(block_size)),
          next_commit_(block_size) {}

    // False when n more tokens (or the blocks they complete) would pass the limits above: such an
    // extend can never succeed, whatever memory is free. Reads and allocates nothing.
    bool can_grow_by(size_t n) const noexcept { return n <= max_total_ - tokens_.size(); }
    // Requires can_grow_by(n). tokens may point into this sequence's own tokens (a block or
    // partial view): the n tokens read are the ones there before the call. All-or-nothing: on
    // std::bad_alloc the sequence is unchanged. Amortised O(n). Returns blocks completed.
    size_t extend(const uint32_t *tokens, size_t n);
    // extend() by one token, for decode loops that call it once per token: the common case (room
    // left, block not completed) is inline and costs a store, not extend()'s divisions and
    // checks. Requires can_grow_by(1). Returns true when the token completed a block.
    bool append(uint32_t token) {
        if (tokens_.size() + 1 < next_commit_ && tokens_.size() < tokens_.capacity()) [[likely]] {
            tokens_.push_unchecked(token);
            return false;
        }
        return append_slow(token);
    }
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
    static size_t max_total_for(uint32_t block_size) noexcept;
    bool append_slow(uint32_t token);
    void reserve_for(size_t total, size_t blocks);
    void commit_block(size_t i) noexcept; // hash block i: its tokens are stored, its slot reserved

    uint32_t block_size_;
    uint64_t salt_;
    size_t max_total_;   // most tokens this sequence can hold under both limits above
    size_t next_commit_; // token count at which the next block completes: (blocks + 1) * size
    PodArray<uint32_t> tokens_;         // every token, committed blocks first; capacity <= max_total_
    PodArray<kvreg_block_info> blocks_; // one per committed block
};

// Fill out[0..n_tokens/block_size) for a flat token array (no allocation).
void hash_blocks_into(const uint32_t *tokens, size_t n_blocks, uint32_t block_size, uint64_t salt,
                      kvreg_block_info *out) noexcept;

} // namespace kvreg
