// Fixed-address storage for Records: chunks of 256, a free list threaded through `next`.
// Growing never moves a record, so indices (and handles) stay valid. A record whose generation
// reaches Record::kGenLimit is retired instead of freed (see record.hpp). With tokens kept, a
// parallel array holds each record's TokenStore ref (so registries that do not keep tokens
// do not pay for the field). Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <new>
#include <vector>

#include "record.hpp"
#include "token_store.hpp"

namespace kvreg {

class RecordSlab {
public:
    // Indices fit the index's 24 bits, minus the values it reserves.
    static constexpr uint32_t kMaxRecords = (1u << 24) - 2;
    static constexpr uint32_t kFull = UINT32_MAX; // allocate(): kMaxRecords in use
    static constexpr uint32_t kNoTokens = TokenStore::kNone; // one sentinel, not two

    explicit RecordSlab(bool with_token_refs = false) : with_tokens_(with_token_refs) {}

    Record &at(uint32_t idx) noexcept { return chunks_[idx >> kBits][idx & kMask]; }
    const Record &at(uint32_t idx) const noexcept { return chunks_[idx >> kBits][idx & kMask]; }
    uint32_t capacity() const noexcept { return used_; }

    void enable_token_refs() noexcept { with_tokens_ = true; } // before the first allocate()
    void set_first_gen(uint32_t g) noexcept { first_gen_ = g; } // before the first allocate()
    uint32_t retired() const noexcept { return retired_; }
    void set_token_ref(uint32_t idx, uint32_t ref) noexcept { tok_chunks_[idx >> kBits][idx & kMask] = ref; }
    uint32_t token_ref(uint32_t idx) const noexcept {
        return with_tokens_ ? tok_chunks_[idx >> kBits][idx & kMask] : kNoTokens;
    }

    // Index of a free record (contents unspecified except gen), or kFull. Throws std::bad_alloc.
    uint32_t allocate() {
        if (free_ != kNil) {
            uint32_t idx = free_ - 1;
            free_ = at(idx).next;
            return idx;
        }
        if (used_ >= kMaxRecords) return kFull;
        if ((used_ & kMask) == 0) {
            chunks_.reserve(chunks_.size() + 1);
            if (with_tokens_) tok_chunks_.reserve(tok_chunks_.size() + 1);
            std::unique_ptr<Record[]> c(new Record[kChunk]());
            for (uint32_t i = 0; i < kChunk; i++) c[i].gen = first_gen_;
            if (with_tokens_) tok_chunks_.emplace_back(new uint32_t[kChunk]);
            chunks_.push_back(std::move(c));
        }
        if (with_tokens_) set_token_ref(used_, kNoTokens);
        return used_++;
    }

    void release(uint32_t idx) noexcept {
        Record &r = at(idx);
        r.refcount = 0;
        r.pool = 0;
        r.flags = 0;
        r.next = kNil;
        if (++r.gen >= Record::kGenLimit) {
            retired_++; // never reused: see record.hpp
        } else {
            r.next = free_;
            free_ = idx + 1;
        }
        if (with_tokens_) set_token_ref(idx, kNoTokens);
    }

private:
    static constexpr uint32_t kBits = 8;
    static constexpr uint32_t kChunk = 1u << kBits;
    static constexpr uint32_t kMask = kChunk - 1;

    bool with_tokens_;
    std::vector<std::unique_ptr<Record[]>> chunks_;
    std::vector<std::unique_ptr<uint32_t[]>> tok_chunks_;
    uint32_t used_ = 0;   // records ever handed out (high-water mark)
    uint32_t retired_ = 0;
    uint32_t first_gen_ = 0; // tests start generations near the limit
    uint32_t free_ = kNil;
};

} // namespace kvreg
