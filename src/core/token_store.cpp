#include "core/token_store.hpp"

#include <cstring>
#include <new>

namespace kvreg {

uint32_t TokenStore::store(const uint32_t *tokens, uint32_t n) {
    const uint64_t words = uint64_t{n} + 1; // a header word holding n, then the tokens
    FreeList *cls = nullptr;
    for (auto &f : free_)
        if (f.n == n) cls = &f;
    uint32_t ref;
    if (cls && cls->head != kNone) {
        ref = cls->head;
        cls->head = word(ref)[1]; // a free allocation keeps the next free ref after its header
    } else {
        if (!cls) {
            free_.reserve(free_.size() + 1); // may throw: nothing changed yet
            free_.push_back(FreeList{n, kNone});
            cls = &free_.back();
        }
        if (words > kChunkWords) {
            // A block larger than a chunk gets a dedicated chunk of its own size.
            if (chunks_.size() >= (1u << (32 - kChunkBits))) throw std::bad_alloc();
            chunks_.reserve(chunks_.size() + 1);
            chunks_.emplace_back(new uint32_t[words]);
            ref = static_cast<uint32_t>((chunks_.size() - 1) << kChunkBits);
            fill_ = kChunkWords; // next small allocation starts a fresh chunk
        } else {
            if (fill_ + words > kChunkWords) {
                if (chunks_.size() >= (1u << (32 - kChunkBits)) - 1) throw std::bad_alloc();
                chunks_.reserve(chunks_.size() + 1);
                chunks_.emplace_back(new uint32_t[kChunkWords]);
                fill_ = 0;
            }
            ref = static_cast<uint32_t>(((chunks_.size() - 1) << kChunkBits) | fill_);
            fill_ += static_cast<uint32_t>(words);
        }
    }
    uint32_t *w = word(ref);
    w[0] = n;
    if (n) std::memcpy(w + 1, tokens, size_t{n} * sizeof(uint32_t));
    live_bytes_ += uint64_t{n} * sizeof(uint32_t);
    return ref;
}

void TokenStore::release(uint32_t ref) noexcept {
    uint32_t *w = word(ref);
    const uint32_t n = w[0];
    live_bytes_ -= uint64_t{n} * sizeof(uint32_t);
    for (auto &f : free_) {
        if (f.n != n) continue;
        // A zero-token allocation has no room for the link; it is one header word, so just
        // leak it into the chunk (registering zero tokens with KEEP_TOKENS stores nothing).
        if (n == 0) return;
        w[1] = f.head;
        f.head = ref;
        return;
    }
}

} // namespace kvreg
