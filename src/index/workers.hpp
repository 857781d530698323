// The index's workers: (worker_id, dp_rank) -> a small slot number the shared table stores,
// and per slot the worker's state (its lock, expected sequence number, engine-hash mapping).
//
// Slots live in fixed chunks that are never moved or freed before the index, so a query can
// read a slot's identity without a lock while workers are added. Freed slots are reused
// oldest first, so a query still holding a just-freed slot number almost never sees it reused.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

#include "engine_map.hpp"

namespace kvreg::index {

struct Worker {
    std::mutex lock; // one writer at a time: apply, clear, remove
    std::atomic<uint64_t> id{0};
    std::atomic<uint32_t> dp{0};
    bool live = false;         // under lock
    bool seq_known = false;    // next_seq is meaningful (false: accept any as the start)
    uint64_t next_seq = 0;
    EngineMap map;             // ENGINE mode only
};

class Workers {
public:
    static constexpr uint32_t kChunk = 256;
    static constexpr uint32_t kMaxChunks = 4096; // a million workers

    Workers() = default;
    ~Workers();
    Workers(const Workers &) = delete;
    Workers &operator=(const Workers &) = delete;

    // The slot of (id, dp), or UINT32_MAX when unknown.
    uint32_t find(uint64_t id, uint32_t dp) const;
    // The slot of (id, dp), adding it when unknown (*added = true). Throws std::bad_alloc;
    // returns UINT32_MAX when the slot space is exhausted.
    uint32_t find_or_add(uint64_t id, uint32_t dp, bool *added);
    // Forget (id, dp) if its slot is `slot`; the slot becomes reusable. Call with the
    // worker's lock held and its entries already gone.
    void release(uint64_t id, uint32_t dp, uint32_t slot);

    Worker &at(uint32_t slot) const noexcept {
        return chunks_[slot / kChunk].load(std::memory_order_acquire)[slot % kChunk];
    }
    uint64_t count() const noexcept { return count_.load(std::memory_order_relaxed); }
    uint64_t bytes() const noexcept;
    // Calls f(Worker&) for every slot ever used (the caller locks each as needed).
    template <class F> void for_each_slot(F f) const {
        const uint32_t n = used_.load(std::memory_order_acquire);
        for (uint32_t s = 0; s < n; s++) f(at(s));
    }

private:
    struct Key {
        uint64_t id;
        uint32_t dp;
        bool operator==(const Key &o) const noexcept { return id == o.id && dp == o.dp; }
    };
    struct KeyHash {
        size_t operator()(const Key &k) const noexcept {
            return static_cast<size_t>((k.id ^ (uint64_t{k.dp} << 40 | k.dp)) * UINT64_C(0x9E3779B97F4A7C15) >> 16);
        }
    };

    mutable std::shared_mutex dir_lock_;
    std::unordered_map<Key, uint32_t, KeyHash> dir_;
    std::deque<uint32_t> free_;
    std::atomic<uint32_t> used_{0}; // slots handed out so far (under dir_lock_ for writers)
    std::atomic<uint64_t> count_{0};
    std::unique_ptr<std::atomic<Worker *>[]> chunks_{new std::atomic<Worker *>[kMaxChunks]()};
};

} // namespace kvreg::index
