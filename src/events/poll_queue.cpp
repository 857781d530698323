#include "events/poll_queue.hpp"
#include "util/cpu_relax.hpp"

#include <chrono>
#include <new>
#include <thread>

namespace kvreg {

PollQueue::PollQueue(size_t capacity) : capacity_(capacity) {
    tail_ = new_chunk(kFirstBudget * kChunk);
    if (!tail_) throw std::bad_alloc();
    head_ = tail_;
}

PollQueue::~PollQueue() {
    for (Chunk *c = head_; c;) {
        Chunk *next = c->next.load(std::memory_order_relaxed);
        free_chunk(c);
        c = next;
    }
    for (Chunk *c = lent_; c;) {
        Chunk *next = c->lent_next;
        free_chunk(c);
        c = next;
    }
    free_chunk(spare_.load(std::memory_order_relaxed));
}

PollQueue::Chunk *PollQueue::new_chunk(uint32_t token_cap) noexcept {
    Chunk *c = spare_.exchange(nullptr, std::memory_order_acquire);
    // The spare fits unless its arena is too small, or so much larger that keeping it would
    // hold memory the queue does not need (a chunk once sized for a burst of long events).
    if (c && (c->token_cap < token_cap || c->token_cap > 4 * token_cap + 4 * kChunk)) {
        free_chunk(c);
        c = nullptr;
    }
    if (c) {
        c->published.store(0, std::memory_order_relaxed);
        c->next.store(nullptr, std::memory_order_relaxed);
        c->tokens_used = 0;
        c->head = 0;
        c->lent_next = nullptr;
        return c;
    }
    const size_t bytes = Chunk::bytes_for(token_cap);
    void *mem = ::operator new(bytes, std::align_val_t{alignof(Chunk)}, std::nothrow);
    if (!mem) return nullptr;
    c = new (mem) Chunk;
    c->token_cap = token_cap;
    bytes_.fetch_add(bytes, std::memory_order_relaxed);
    return c;
}

void PollQueue::free_chunk(Chunk *c) noexcept {
    if (!c) return;
    bytes_.fetch_sub(Chunk::bytes_for(c->token_cap), std::memory_order_relaxed);
    c->~Chunk();
    ::operator delete(c, std::align_val_t{alignof(Chunk)});
}

PollQueue::Chunk *PollQueue::close_and_open(Chunk *c, uint32_t count, uint32_t need) noexcept {
    c->published.store(count, std::memory_order_release); // final: before `next`
    if (need == 0) {
        // Closed full: the next chunk gets what these events used per event, plus one token
        // each of slack, so a steady stream fills its chunks by events, not by tokens.
        const uint32_t per_event = (c->tokens_used + kChunk - 1) / kChunk;
        budget_ = std::min(per_event + 1, kMaxBudget);
    } else if (count > 0) {
        // Closed by its arena: the events are longer than the budget guessed.
        budget_ = std::min(2 * budget_, kMaxBudget);
    }
    Chunk *next = new_chunk(std::max(need, budget_ * kChunk));
    if (!next) return nullptr;
    c->next.store(next, std::memory_order_release); // step 2: the consumers may retire c now
    return next;
}

void PollQueue::notify_waiters() noexcept {
    // A consumer announces itself in waiters_ before it checks for events under wmu_ and
    // sleeps (wait_for_events), and we stored pushed_ before reading waiters_ (both seq_cst):
    // either it sees our events, or we see it. Taking wmu_ once orders our notify after its
    // check, so it cannot miss the notify between the check and the sleep.
    { std::lock_guard<std::mutex> lk(wmu_); }
    cv_.notify_all();
}

bool PollQueue::claim() noexcept {
    {
        std::lock_guard<std::mutex> lk(take_mu_);
        if (claimed_.load(std::memory_order_relaxed)) return false;
        claimed_.store(true, std::memory_order_release);
    }
    wakeup(); // a poll_wait sleeping since before the claim returns, refused by its take
    return true;
}

void PollQueue::unclaim() noexcept {
    std::lock_guard<std::mutex> lk(take_mu_);
    claimed_.store(false, std::memory_order_release);
}

int PollQueue::take(kvreg_event *out, size_t cap, size_t *n_out, bool owner) noexcept {
    std::lock_guard<std::mutex> lk(take_mu_);
    // Under take_mu_: a take that got past this finished before claim() returned (until 0.6's
    // last change a poll already in progress took the publisher's events, and could free
    // tokens the publisher was reading).
    if (claimed_.load(std::memory_order_relaxed) && !owner) return KVREG_EBUSY;
    // The previous take's retired chunks: their events are no longer valid (kvreg.h: tokens
    // live until the next poll). One goes back to the producer as its spare.
    while (lent_) {
        Chunk *c = lent_;
        lent_ = c->lent_next;
        Chunk *none = nullptr;
        if (!spare_.compare_exchange_strong(none, c, std::memory_order_release, std::memory_order_relaxed))
            free_chunk(c);
    }
    size_t n = 0;
    Chunk *c = head_;
    for (;;) {
        // `next` first: once it is set, `published` is final (close_and_open stores it before).
        Chunk *next = c->next.load(std::memory_order_acquire);
        const uint32_t published = c->published.load(std::memory_order_acquire);
        const size_t k = std::min<size_t>(published - c->head, cap - n);
        if (k) {
            std::memcpy(static_cast<void *>(out + n), c->events() + c->head, k * sizeof(kvreg_event));
            c->head += static_cast<uint32_t>(k);
            n += k;
        }
        if (c->head < published || !next) break; // cap reached, or c is the tail
        c->lent_next = lent_; // emptied and closed: retire it (its events may be in out)
        lent_ = c;
        c = next;
        if (n == cap) break;
    }
    head_ = c;
    if (n) taken_.fetch_add(n, std::memory_order_release);
    *n_out = n;
    return KVREG_OK;
}

void PollQueue::wait_for_events(int timeout_ms) noexcept {
    // The bounded spin first (kWaitSpins). A wakeup() meanwhile finds no waiter and is kept in
    // wakeup_pending_, which the locked path below takes: late by the spin, never lost.
    for (unsigned spins = 0; spins < kWaitSpins; spins++) {
        if (size() > 0) return;
        kvreg::cpu_relax();
        if (spins % kYieldEvery == kYieldEvery - 1) std::this_thread::yield();
    }
    std::unique_lock<std::mutex> lk(wmu_);
    if (wakeup_pending_) {
        wakeup_pending_ = false;
        return;
    }
    const uint64_t seen = wakeups_;
    waiting_++;
    waiters_.fetch_add(1, std::memory_order_seq_cst); // before the check: see notify_waiters
    auto ready = [this, seen] { return size() > 0 || wakeups_ != seen; };
    if (timeout_ms < 0)
        cv_.wait(lk, ready);
    else if (timeout_ms > 0)
        cv_.wait_for(lk, std::chrono::milliseconds(timeout_ms), ready);
    waiters_.fetch_sub(1, std::memory_order_relaxed);
    if (wakeups_ == seen) {
        waiting_--; // ended by an event or the timeout, not by wakeup()
    } else if (wakeups_ == seen + 1 && unseen_ > 0) {
        unseen_--; // ended by the last wakeup(): once all it ended are back, a call counts again
    }
    // (Ended by an older bump, wakeups_ moved on since: unseen_ belongs to the newer one.)
}

void PollQueue::wakeup() noexcept {
    {
        std::lock_guard<std::mutex> lk(wmu_);
        if (waiting_ > 0) {
            wakeups_++; // every current wait ends
            unseen_ = waiting_;
            waiting_ = 0;
        } else if (unseen_ == 0) {
            wakeup_pending_ = true; // for the next waiter; more calls before it merge
        }
        // else: waits this call would end are already ending: it merges into their wake-up.
    }
    cv_.notify_all();
}

} // namespace kvreg
