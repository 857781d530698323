// Fixed-address storage for Records: chunks of 1024, a free list threaded through `next`.
// Growing never moves a record, so indices (and handles) stay valid. Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <new>
#include <vector>

#include "record.hpp"

namespace kvreg {

class RecordSlab {
public:
    static constexpr uint32_t kMaxRecords = (1u << 24) - 1; // indices fit the index's 24 bits

    Record &at(uint32_t idx) noexcept { return chunks_[idx >> kBits][idx & kMask]; }
    const Record &at(uint32_t idx) const noexcept { return chunks_[idx >> kBits][idx & kMask]; }
    uint32_t capacity() const noexcept { return used_; }

    // Index of a free record (contents unspecified except gen). Throws std::bad_alloc.
    uint32_t allocate() {
        if (free_ != kNil) {
            uint32_t idx = free_ - 1;
            free_ = at(idx).next;
            return idx;
        }
        if (used_ >= kMaxRecords) throw std::bad_alloc();
        if ((used_ & kMask) == 0) {
            chunks_.reserve(chunks_.size() + 1);
            chunks_.emplace_back(new Record[kChunk]());
        }
        return used_++;
    }

    void release(uint32_t idx) noexcept {
        Record &r = at(idx);
        r.refcount = 0;
        r.pool = 0;
        r.gen++;
        r.next = free_;
        free_ = idx + 1;
    }

private:
    static constexpr uint32_t kBits = 10;
    static constexpr uint32_t kChunk = 1u << kBits;
    static constexpr uint32_t kMask = kChunk - 1;

    std::vector<std::unique_ptr<Record[]>> chunks_;
    uint32_t used_ = 0;   // records ever handed out (high-water mark)
    uint32_t free_ = kNil;
};

} // namespace kvreg
