#include "poll_queue.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace kvreg {

std::unique_ptr<PollQueue::Chunk> PollQueue::new_chunk() {
    std::unique_ptr<Chunk> c = spare_ ? std::move(spare_) : std::make_unique<Chunk>();
    c->q.clear();
    c->head = 0;
    c->q.reserve(kChunk); // may throw: nothing queued yet
    return c;
}

int PollQueue::take(kvreg_event *out, size_t cap, size_t *n_out) noexcept {
    std::lock_guard<std::mutex> lk(mu_);
    size_t n = 0, ntok = 0;
    // Size the token buffer first: nothing is consumed if it cannot be allocated.
    for (size_t ci = 0; ci < chunks_.size() && n < cap; ci++) {
        const Chunk &c = *chunks_[ci];
        for (size_t i = c.head; i < c.q.size() && n < cap; i++, n++) ntok += c.q.events[i].n_tokens;
    }
    try {
        if (taken_tokens_.capacity() > 4 * ntok + 4096) std::vector<uint32_t>().swap(taken_tokens_);
        taken_tokens_.resize(ntok);
    } catch (...) {
        return KVREG_ENOMEM;
    }
    size_t got = 0, tpos = 0;
    while (got < n) {
        Chunk &c = *chunks_.front();
        for (; c.head < c.q.size() && got < n; c.head++, got++) {
            kvreg_event e = c.q.events[c.head];
            if (e.n_tokens) {
                std::memcpy(taken_tokens_.data() + tpos, c.q.tokens_of(c.head), e.n_tokens * sizeof(uint32_t));
                e.tokens = taken_tokens_.data() + tpos;
                tpos += e.n_tokens;
            } else {
                e.tokens = nullptr;
            }
            out[got] = e;
        }
        if (c.head == c.q.size()) {
            // Fully consumed: give the memory back (keep one spare of the usual size).
            std::unique_ptr<Chunk> done = std::move(chunks_.front());
            chunks_.pop_front();
            if (!spare_ && done->q.tokens.capacity() <= 64 * kChunk) spare_ = std::move(done);
        }
    }
    size_ -= n;
    size_hint_.store(size_, std::memory_order_relaxed);
    *n_out = n;
    return KVREG_OK;
}

void PollQueue::wait_for_events(int timeout_ms) noexcept {
    // The bounded spin first (kWaitSpins). A wakeup() meanwhile finds no waiter and is kept in
    // pending_wakeups_, which the locked path below takes: late by the spin, never lost.
    for (unsigned spins = 0; spins < kWaitSpins; spins++) {
        if (size_hint_.load(std::memory_order_acquire) > 0) return;
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
    std::unique_lock<std::mutex> lk(mu_);
    if (pending_wakeups_ > 0) {
        pending_wakeups_--;
        return;
    }
    const uint64_t seen = wakeups_;
    waiting_++;
    auto ready = [this, seen] { return size_ > 0 || wakeups_ != seen; };
    if (timeout_ms < 0)
        cv_.wait(lk, ready);
    else if (timeout_ms > 0)
        cv_.wait_for(lk, std::chrono::milliseconds(timeout_ms), ready);
    if (wakeups_ == seen) waiting_--; // ended by an event or the timeout, not by wakeup()
}

void PollQueue::wakeup() noexcept {
    {
        std::lock_guard<std::mutex> lk(mu_);
        if (waiting_ > 0) {
            wakeups_++; // every current wait ends
            waiting_ = 0;
        } else if (pending_wakeups_ < UINT32_MAX) {
            pending_wakeups_++; // for the next waiter
        }
    }
    cv_.notify_all();
}

size_t PollQueue::size() const noexcept {
    std::lock_guard<std::mutex> lk(mu_);
    return size_;
}

size_t PollQueue::bytes() const noexcept {
    std::lock_guard<std::mutex> lk(mu_);
    size_t b = taken_tokens_.capacity() * sizeof(uint32_t);
    for (const auto &c : chunks_) b += c->q.bytes();
    if (spare_) b += spare_->q.bytes();
    return b;
}

} // namespace kvreg
