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

void PollQueue::free_chunks(std::unique_ptr<Chunk> list) noexcept {
    while (list) list = std::move(list->next); // each step frees the old head alone
}

int PollQueue::take(kvreg_event *out, size_t cap, size_t *n_out) noexcept {
    // One take, in three steps:
    //  1. under mu_: the chunks whose remaining events all fit in cap are detached whole
    //     (pointer moves); if cap ends inside the next chunk, that part is copied here, with its
    //     tokens, into taken_tokens_, placed after the detached chunks' events in out;
    //  2. without mu_: the detached chunks' events are copied into out, pointing at the tokens
    //     in their chunks (no token copy);
    //  3. under mu_ again: the detached chunks join lent_, freed when the next take begins.
    // A later take (any thread) can only take events behind this one's, so each poller still
    // gets its events oldest first.
    std::unique_ptr<Chunk> mine; // detached chunks, oldest first
    Chunk *tail = nullptr;       // the last of them
    std::unique_ptr<Chunk> old_lent;
    size_t n = 0, whole = 0; // events taken; of them, in detached chunks
    {
        std::lock_guard<std::mutex> lk(mu_);
        // Plan first: how many whole chunks, and the tokens of the part copied here. Nothing
        // is consumed if the copy's token buffer cannot be allocated.
        size_t n_whole = 0, part = 0, part_tokens = 0;
        for (size_t ci = 0; ci < chunks_.size() && whole + part < cap; ci++) {
            const Chunk &c = *chunks_[ci];
            const size_t avail = c.q.size() - c.head;
            if (avail <= cap - whole) {
                whole += avail;
                n_whole++;
                continue;
            }
            part = cap - whole;
            for (size_t i = c.head; i < c.head + part; i++) part_tokens += c.q.events[i].n_tokens;
        }
        try {
            if (taken_tokens_.capacity() > 4 * part_tokens + 4096) std::vector<uint32_t>().swap(taken_tokens_);
            taken_tokens_.resize(part_tokens);
        } catch (...) {
            return KVREG_ENOMEM;
        }
        old_lent = std::move(lent_);
        for (size_t k = 0; k < n_whole; k++) {
            std::unique_ptr<Chunk> c = std::move(chunks_.front());
            chunks_.pop_front();
            Chunk *raw = c.get();
            if (tail)
                tail->next = std::move(c);
            else
                mine = std::move(c);
            tail = raw;
        }
        if (part) {
            Chunk &c = *chunks_.front();
            size_t tpos = 0;
            for (size_t k = 0; k < part; k++, c.head++) {
                kvreg_event e = c.q.events[c.head];
                if (e.n_tokens) {
                    std::memcpy(taken_tokens_.data() + tpos, c.q.tokens_of(c.head), e.n_tokens * sizeof(uint32_t));
                    e.tokens = taken_tokens_.data() + tpos;
                    tpos += e.n_tokens;
                } else {
                    e.tokens = nullptr;
                }
                out[whole + k] = e;
            }
        }
        n = whole + part;
        size_ -= n;
        size_hint_.store(size_, std::memory_order_relaxed);
        // The events of earlier takes are no longer valid: their chunks go, one of them kept
        // as the spare (the rest is freed below, without the mutex).
        if (!spare_ && old_lent && old_lent->q.tokens.capacity() <= 64 * kChunk) {
            spare_ = std::move(old_lent);
            old_lent = std::move(spare_->next);
        }
    }
    free_chunks(std::move(old_lent));
    size_t at = 0;
    for (const Chunk *c = mine.get(); c; c = c->next.get())
        for (size_t i = c->head; i < c->q.size(); i++) {
            kvreg_event e = c->q.events[i];
            e.tokens = c->q.tokens_of(i);
            out[at++] = e;
        }
    if (mine) {
        std::lock_guard<std::mutex> lk(mu_);
        tail->next = std::move(lent_); // lent by takes that ended meanwhile
        lent_ = std::move(mine);
    }
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
    for (const Chunk *c = lent_.get(); c; c = c->next.get()) b += c->q.bytes();
    if (spare_) b += spare_->q.bytes();
    return b;
}

} // namespace kvreg
