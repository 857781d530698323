#include "core/token_store.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <new>

namespace kvreg {

TokenStore::SizeClass TokenStore::size_class(uint64_t words) noexcept {
    if (words <= kExactWords) return {static_cast<uint32_t>(words), words};
    // 2^b < words <= 2^(b+1), b >= 9: eight classes of 2^(b-3) words each up to 2^(b+1).
    const unsigned b = static_cast<unsigned>(std::bit_width(words - 1)) - 1;
    const uint64_t step = uint64_t{1} << (b - 3);
    const uint64_t room = (words + step - 1) / step * step;
    return {static_cast<uint32_t>(kExactWords + (b - 9) * 8 + room / step - 8), room};
}

uint32_t TokenStore::store(const uint32_t *tokens, uint32_t n) {
    const SizeClass cls = size_class(uint64_t{n} + 1); // a header word holding n, then the tokens
    if (!free_) { // may throw: nothing changed yet
        free_.reset(new uint32_t[kClasses]);
        std::fill_n(free_.get(), kClasses, kNone);
    }
    uint32_t ref;
    if (uint32_t &head = free_[cls.index]; head != kNone) {
        ref = head;
        head = word(ref)[1];
    } else if (cls.room > kChunkWords) {
        // An allocation larger than a chunk gets a dedicated chunk of its class's size.
        if (chunks_.size() >= (1u << (32 - kChunkBits))) throw std::bad_alloc();
        chunks_.reserve(chunks_.size() + 1);
        chunks_.emplace_back(new uint32_t[cls.room]);
        held_words_ += cls.room;
        ref = static_cast<uint32_t>((chunks_.size() - 1) << kChunkBits);
        fill_ = kChunkWords; // next small allocation starts a fresh chunk
    } else {
        if (fill_ + cls.room > kChunkWords) {
            if (chunks_.size() >= (1u << (32 - kChunkBits)) - 1) throw std::bad_alloc();
            chunks_.reserve(chunks_.size() + 1);
            chunks_.emplace_back(new uint32_t[kChunkWords]);
            held_words_ += kChunkWords;
            fill_ = 0;
        }
        ref = static_cast<uint32_t>(((chunks_.size() - 1) << kChunkBits) | fill_);
        fill_ += static_cast<uint32_t>(cls.room);
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
    // A zero-token allocation is its header word alone, no room for the link: left in its
    // chunk (registering zero tokens with KEEP_TOKENS stores nothing else).
    if (n == 0) return;
    uint32_t &head = free_[size_class(uint64_t{n} + 1).index];
    w[1] = head;
    head = ref;
}

} // namespace kvreg
