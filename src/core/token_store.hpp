// Token storage for KVREG_OPT_KEEP_TOKENS: one copy per hash, in big chunks. Freed room goes
// on a free list of its size class and serves the next store of that class, so steady
// register/release cycles allocate nothing. Classes are exact up to kExactWords words (every
// block size below 512 tokens gets exactly its room), then an eighth apart (at most an eighth
// of a bigger allocation unused). Room freed for one token count serves every count of its
// class, so what stays held is bounded by each class's peak: with one free list per exact
// count, a registry that stored one block of each of 20,000 counts held 1.1 GB with nothing
// live, and each store scanned a list of every count seen. Not thread-safe: each shard owns
// one and uses it under the shard lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace kvreg {

class TokenStore {
public:
    static constexpr uint32_t kNone = UINT32_MAX;

    // Copy n tokens in; returns a ref. Throws std::bad_alloc (store unchanged).
    uint32_t store(const uint32_t *tokens, uint32_t n);
    void release(uint32_t ref) noexcept;
    const uint32_t *tokens(uint32_t ref) const noexcept { return word(ref) + 1; }
    uint32_t size(uint32_t ref) const noexcept { return *word(ref); }
    uint64_t bytes() const noexcept { return live_bytes_; }
    // Bytes of the chunks held (live, free and unused room): what the store costs.
    uint64_t held_bytes() const noexcept { return held_words_ * sizeof(uint32_t); }

    // An allocation of `words` words (the header word and the tokens, >= 1): its class and the
    // words it gets.
    struct SizeClass {
        uint32_t index;
        uint64_t room;
    };
    static constexpr uint64_t kExactWords = 512;
    // Index 0 unused, 1 .. kExactWords exact, then eight for each power of two 2^b, b = 9 .. 31,
    // up to 2^32 words (a header word and 2^32 - 1 tokens).
    static constexpr uint32_t kClasses = kExactWords + 1 + (31 - 9 + 1) * 8;
    static SizeClass size_class(uint64_t words) noexcept;

private:
    static constexpr uint32_t kChunkBits = 16;
    static constexpr uint32_t kChunkWords = 1u << kChunkBits; // 256 KiB chunks

    uint32_t *word(uint32_t ref) const noexcept {
        return chunks_[ref >> kChunkBits].get() + (ref & (kChunkWords - 1));
    }

    std::vector<std::unique_ptr<uint32_t[]>> chunks_;
    // Per class, the ref of its first free allocation (kNone: none); a free allocation keeps
    // the next one's ref after its header word. Made with the first store.
    std::unique_ptr<uint32_t[]> free_;
    uint32_t fill_ = kChunkWords; // words used in the last chunk (full: forces a new chunk)
    uint64_t live_bytes_ = 0;
    uint64_t held_words_ = 0;
};

} // namespace kvreg
