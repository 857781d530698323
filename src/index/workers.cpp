#include "index/workers.hpp"

namespace kvreg::index {

Workers::~Workers() {
    for (uint32_t c = 0; c < kMaxChunks; c++) delete chunks_[c].load(std::memory_order_relaxed);
}

uint32_t Workers::find(uint64_t id, uint32_t dp) const {
    std::shared_lock<std::shared_mutex> g(dir_lock_);
    auto it = dir_.find(Key{id, dp});
    return it == dir_.end() ? UINT32_MAX : it->second;
}

uint32_t Workers::find_or_add(uint64_t id, uint32_t dp, bool *added, bool loading) {
    *added = false;
    uint32_t slot = find(id, dp);
    if (slot != UINT32_MAX) return slot;
    {
        std::unique_lock<std::shared_mutex> g(dir_lock_);
        auto it = dir_.find(Key{id, dp});
        if (it != dir_.end()) return it->second;
        // Reuse a freed slot only once a few are waiting, oldest first (see the file comment).
        if (free_.size() > 64) {
            slot = free_.front();
        } else {
            slot = used_.load(std::memory_order_relaxed);
            if (slot >= kChunk * kMaxChunks) return UINT32_MAX;
            if (slot % kChunk == 0 && !chunks_[slot / kChunk].load(std::memory_order_relaxed))
                chunks_[slot / kChunk].store(new Chunk, std::memory_order_release);
        }
        dir_.emplace(Key{id, dp}, slot); // may throw: nothing else changed yet
        if (slot == used_.load(std::memory_order_relaxed))
            used_.store(slot + 1, std::memory_order_release);
        else
            free_.pop_front();
    }
    // Named but not live yet: lock_worker() callers that find it retry until this is done.
    // The worker's lock is never taken under dir_lock_ (remove takes them the other way).
    Worker &w = at(slot);
    {
        std::lock_guard<std::mutex> wl(w.lock);
        WorkerIdent &who = ident(slot);
        who.gen.store(who.gen.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        who.id.store(id, std::memory_order_release);
        who.dp.store(dp, std::memory_order_release);
        w.live = true;
        w.loading = loading;
        w.seq_known = true;
        w.next_seq = 0;
        w.model = 0;
        w.loras.clear();
    }
    count_.fetch_add(1, std::memory_order_relaxed);
    *added = true;
    return slot;
}

void Workers::release(uint64_t id, uint32_t dp, uint32_t slot) noexcept {
    std::unique_lock<std::shared_mutex> g(dir_lock_);
    auto it = dir_.find(Key{id, dp});
    if (it == dir_.end() || it->second != slot) return;
    dir_.erase(it);
    count_.fetch_sub(1, std::memory_order_relaxed);
    try {
        free_.push_back(slot);
    } catch (...) {
        // The worker is gone all the same (a remove never fails half-way, and a failed load
        // undoes itself from a noexcept path): its slot is simply never reused.
    }
}

uint64_t Workers::bytes() const noexcept {
    const uint64_t chunks = (used_.load(std::memory_order_relaxed) + kChunk - 1) / kChunk;
    return kMaxChunks * sizeof(std::atomic<Chunk *>) + chunks * sizeof(Chunk) +
           count() * (sizeof(Key) + sizeof(uint32_t) + 2 * sizeof(void *));
}

} // namespace kvreg::index
