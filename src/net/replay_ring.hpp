// The publisher's replay ring: the last `capacity` batches by seq, as vLLM's deque of
// (seq, payload) with maxlen = buffer_steps. Seqs are contiguous (every batch is kept, also
// the ones the PUB socket dropped at its high-water mark: those are what a replay is for), so
// a seq's slot is found by arithmetic.
//
// Each batch is a ReplayEntry shared by reference count between the ring and the replay
// answers that libzmq still holds (sent zero-copy: net_replay.cpp), so an answer never copies
// the ring, and a batch the ring overwrites lives on only as long as an answer queued it.
// A slot whose entry nobody else holds keeps its buffer for the next batch, so a warm ring
// does not allocate. The ring is the sender thread's; only the reference counts are shared
// (libzmq's I/O thread drops its references when it is done with a message).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

namespace kvreg::net {

struct ReplayEntry {
    std::atomic<uint32_t> refs{1};
    size_t len = 0;
    size_t cap = 0;
    unsigned char *data() noexcept { return reinterpret_cast<unsigned char *>(this + 1); }

    // nullptr when out of memory.
    static ReplayEntry *make(size_t cap) noexcept {
        void *mem = std::malloc(sizeof(ReplayEntry) + (cap ? cap : 1));
        if (!mem) return nullptr;
        auto *e = new (mem) ReplayEntry;
        e->cap = cap;
        return e;
    }
    void ref() noexcept { refs.fetch_add(1, std::memory_order_relaxed); }
    // acq_rel: the last holder frees the entry after every other holder is done with it.
    void unref() noexcept {
        if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            this->~ReplayEntry();
            std::free(this);
        }
    }
};

class ReplayRing {
  public:
    explicit ReplayRing(size_t capacity = 1) : capacity_(capacity ? capacity : 1) {}
    ~ReplayRing() { clear(); }
    ReplayRing(const ReplayRing &) = delete;
    ReplayRing &operator=(const ReplayRing &) = delete;
    ReplayRing &operator=(ReplayRing &&o) noexcept {
        if (this != &o) {
            clear();
            capacity_ = o.capacity_;
            slots_.swap(o.slots_);
            first_ = o.first_;
            count_ = o.count_;
            o.count_ = 0;
        }
        return *this;
    }

    // seq must be the one after the newest kept (or any seq when empty). Throws bad_alloc
    // (the ring is then as before, less the oldest batch when it was full).
    void push(uint64_t seq, const unsigned char *payload, size_t len) {
        if (count_ == 0) first_ = seq;
        if (count_ == capacity_) {
            first_++;
            count_--;
        }
        const size_t slot = static_cast<size_t>(seq % capacity_);
        if (slot >= slots_.size()) slots_.resize(slot + 1, nullptr);
        ReplayEntry *&e = slots_[slot];
        // Reused only when no answer holds it (acquire: pairs with the answer's release, so
        // libzmq's last read of the old bytes comes before we overwrite them).
        if (e && (e->refs.load(std::memory_order_acquire) != 1 || e->cap < len || e->cap > 4 * len + 4096)) {
            e->unref();
            e = nullptr;
        }
        if (!e) {
            e = ReplayEntry::make(len);
            if (!e) {
                // The slot is empty: an older seq is no longer kept either.
                first_ = seq + 1;
                count_ = 0;
                throw std::bad_alloc();
            }
        }
        if (len) std::memcpy(e->data(), payload, len);
        e->len = len;
        count_++;
    }

    size_t size() const { return count_; }
    uint64_t first_seq() const { return first_; }
    uint64_t end_seq() const { return first_ + count_; } // one past the newest kept

    // The kept batch with this seq (no reference taken), or nullptr when not kept.
    ReplayEntry *at(uint64_t seq) const {
        if (count_ == 0 || seq < first_ || seq >= first_ + count_) return nullptr;
        return slots_[static_cast<size_t>(seq % capacity_)];
    }

  private:
    void clear() noexcept {
        for (ReplayEntry *e : slots_)
            if (e) e->unref();
        slots_.clear();
        count_ = 0;
    }

    size_t capacity_;
    std::vector<ReplayEntry *> slots_;
    uint64_t first_ = 0;
    size_t count_ = 0;
};

} // namespace kvreg::net
