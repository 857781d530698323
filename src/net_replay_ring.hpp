// The publisher's replay ring: the last `capacity` batches by seq, as vLLM's deque of
// (seq, payload) with maxlen = buffer_steps. Seqs are contiguous (every batch is kept, also
// the ones the PUB socket dropped at its high-water mark: those are what a replay is for), so
// a seq's slot is found by arithmetic. Slots keep their buffers, so a warm ring does not
// allocate. Used by the sender thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvreg::net {

class ReplayRing {
  public:
    explicit ReplayRing(size_t capacity = 1) : capacity_(capacity ? capacity : 1) {}

    // seq must be the one after the newest kept (or any seq when empty). Throws bad_alloc.
    void push(uint64_t seq, const unsigned char *payload, size_t len) {
        if (count_ == 0) first_ = seq;
        if (count_ == capacity_) {
            first_++;
            count_--;
        }
        const size_t slot = static_cast<size_t>(seq % capacity_);
        if (slot >= slots_.size()) slots_.resize(slot + 1);
        slots_[slot].assign(payload, payload + len);
        count_++;
    }

    size_t size() const { return count_; }
    uint64_t first_seq() const { return first_; }

    // f(seq, data, len) for every kept batch with seq >= start, oldest first; stops early when
    // f returns false.
    template <class F> void for_each_from(uint64_t start, F &&f) const {
        uint64_t seq = start < first_ ? first_ : start;
        for (; seq < first_ + count_; seq++) {
            const std::vector<unsigned char> &p = slots_[static_cast<size_t>(seq % capacity_)];
            if (!f(seq, p.data(), p.size())) return;
        }
    }

  private:
    size_t capacity_;
    std::vector<std::vector<unsigned char>> slots_;
    uint64_t first_ = 0;
    size_t count_ = 0;
};

} // namespace kvreg::net
