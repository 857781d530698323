// The POLL-mode queue: events waiting for kvreg_registry_poll(), with copies of their tokens.
//
// Memory follows what is queued, never more than the capacity allows: events live in chunks of
// up to kChunk, a chunk is freed once the consumer has taken all of it and the next take() has
// begun (the events it handed out point at the chunk's tokens until then), and one spare chunk
// is kept to avoid churning the allocator at a steady trickle. Producers (the thread delivering
// events) push_each(); any number of consumers poll, sleep in wait_for_events() and are woken
// by push_each() or wakeup(). Thread-safe: one mutex, which a take() holds only to detach the
// chunks it takes (it copies their events out after letting go) and to copy the part of a chunk
// it takes when its cap ends inside one. A take that copied everything under the mutex held
// the producer up for the whole copy: up to 1,024 events, tens of microseconds, while the
// delivering thread (an engine's thread) slept on the mutex.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "event_copies.hpp"
#include "kvreg.h"

namespace kvreg {

class PollQueue {
public:
    explicit PollQueue(size_t capacity) : capacity_(capacity) {} // throws std::bad_alloc
    ~PollQueue() { free_chunks(std::move(lent_)); }
    PollQueue(const PollQueue &) = delete;
    PollQueue &operator=(const PollQueue &) = delete;

    // Queue n events (tokens copied) until the queue holds `capacity` events; returns how many
    // were queued (the rest are dropped by the caller's accounting). Out of memory counts as
    // full. Each event is made by make(k, event), k = 0 .. n-1, as it is copied in (the event
    // log expands its ring slots this way, with no copy of its own); its tokens need only live
    // until make is called again.
    template <class Make> size_t push_each(size_t n, Make make) noexcept;
    // Move up to cap events into out; their tokens stay valid until the next take().
    int take(kvreg_event *out, size_t cap, size_t *n) noexcept;
    // Sleep until an event is queued, wakeup() is called, or timeout_ms passes (-1: no limit).
    // Returns at once when events are queued (and then leaves a pending wakeup() pending).
    void wait_for_events(int timeout_ms) noexcept;
    void wakeup() noexcept;
    size_t size() const noexcept;
    // Bytes held by queued events and buffers (for tests of the memory bound).
    size_t bytes() const noexcept;

private:
    static constexpr size_t kChunk = 1024;
    struct Chunk {
        EventCopies q;   // reserved to kChunk events once
        size_t head = 0; // events before head were taken
        std::unique_ptr<Chunk> next; // in a list of detached chunks (a take's, or lent_)
    };
    std::unique_ptr<Chunk> new_chunk();
    // Free a list of chunks one by one (destroying the head alone would recurse through
    // `next`). Called without mu_.
    static void free_chunks(std::unique_ptr<Chunk> list) noexcept;

    // A consumer that finds the queue empty spins this many pauses (about 12 µs on the 2-core
    // VM) before it sleeps. A consumer draining as fast as it can used to sleep after nearly
    // every take, and the producer paid a futex wake for nearly every push: kvreg-net-bench's
    // register_release with such a consumer ran 2.7-3.3 M ops/s, and 4.2-5.9 M with the spin
    // (4 interleaved runs each). Pushes also wake only when a consumer waits (waiting_).
    static constexpr unsigned kWaitSpins = 512;

    const size_t capacity_;
    // size_ as last written under mu_, read without it by a spinning consumer.
    std::atomic<size_t> size_hint_{0};
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::deque<std::unique_ptr<Chunk>> chunks_;
    std::unique_ptr<Chunk> spare_;
    // Chunks that take() detached whole and whose events it handed out: they hold those events'
    // tokens, so they live until the next take() begins (kvreg.h: tokens are valid until the
    // next poll). A list through Chunk::next.
    std::unique_ptr<Chunk> lent_;
    size_t size_ = 0;
    // wakeup() with waiters bumps wakeups_, which ends every current wait (waiting_ counts the
    // waits it has not ended yet); with none, it is kept in pending_wakeups_ for a later waiter,
    // so a wakeup is never lost.
    uint64_t wakeups_ = 0;
    uint32_t waiting_ = 0;
    uint32_t pending_wakeups_ = 0;
    std::vector<uint32_t> taken_tokens_; // tokens of the last take()'s events
};

template <class Make> size_t PollQueue::push_each(size_t n, Make make) noexcept {
    size_t done = 0;
    bool notify = false;
    {
        std::lock_guard<std::mutex> lk(mu_);
        try {
            while (done < n && size_ < capacity_) {
                const bool fresh = chunks_.empty() || chunks_.back()->q.size() == kChunk;
                if (fresh) chunks_.push_back(new_chunk());
                EventCopies &q = chunks_.back()->q;
                q.push_made([&](kvreg_event &e) {
                    make(done, e);
                    // Room for a chunk of events like this one: growing the token array one
                    // doubling at a time copied it a dozen times per chunk.
                    if (fresh) q.tokens.reserve(kChunk * std::min<size_t>(e.n_tokens, 256));
                });
                size_++;
                done++;
            }
        } catch (...) {
            // out of memory: like a full queue
        }
        size_hint_.store(size_, std::memory_order_release);
        notify = done && waiting_ > 0;
    }
    if (notify) cv_.notify_all();
    return done;
}

} // namespace kvreg
