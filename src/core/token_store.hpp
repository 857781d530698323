// Token storage for KVREG_OPT_KEEP_TOKENS: one copy per hash, in big chunks with per-size free
// lists, so steady-state register/release cycles allocate nothing. Not thread-safe: each shard
// owns one and uses it under the shard lock.
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

private:
    static constexpr uint32_t kChunkBits = 16;
    static constexpr uint32_t kChunkWords = 1u << kChunkBits; // 256 KiB chunks

    uint32_t *word(uint32_t ref) const noexcept {
        return chunks_[ref >> kChunkBits].get() + (ref & (kChunkWords - 1));
    }

    struct FreeList {
        uint32_t n;    // tokens per allocation of this class
        uint32_t head; // ref of the first free allocation, kNone if empty
    };

    std::vector<std::unique_ptr<uint32_t[]>> chunks_;
    std::vector<FreeList> free_;  // a handful of classes (one per block size in use)
    uint32_t fill_ = kChunkWords; // words used in the last chunk (full: forces a new chunk)
    uint64_t live_bytes_ = 0;
};

} // namespace kvreg
