// The POLL-mode queue: events waiting for kvreg_registry_poll(), with copies of their tokens.
//
// One producer, any number of consumers, and no lock between them. The producer is the event
// log's delivery-role holder (one thread at a time; the role's acquire/release hands the
// producer's state from one holder to the next). Consumers serialise among themselves on
// take_mu_, which the producer never touches.
//
// ---------------------------------------------------------------------- the protocol
// Events live in a singly linked list of chunks, oldest (head_, the consumers') to newest
// (tail_, the producer's). A chunk is one allocation: a header, kChunk events, and a token
// arena; each queued event's `tokens` already points into its chunk's arena, so a consumer
// copies events out as they are, with one memcpy per chunk.
// Walk one push of a run of events, then the poll that takes them:
//
//  1. ROOM. The producer reads taken_ (what consumers took) and its own pushed_: the queue
//     holds at most pushed_ - taken_ events, so it pushes up to capacity minus that. (A take
//     running meanwhile only makes the room larger: the estimate errs towards dropping.)
//  2. FILL. Each event is written in place in tail_'s next free entry, its tokens copied into
//     the arena, none of it visible to consumers yet. A full chunk, or one whose arena cannot
//     take the event's tokens, is CLOSED: its final count is stored in `published` (release),
//     then a new chunk is linked as its `next` (release). A chunk is never written again once
//     `next` is set.
//  3. PUBLISH. tail_'s `published` is stored (release): the consumers can now read every event
//     below it. Then pushed_ (seq_cst), and if a consumer announced that it sleeps (waiters_),
//     the producer takes wmu_ and notifies (see wait_for_events).
//  4. TAKE. A consumer, under take_mu_, first frees the chunks the previous take retired (their
//     events were valid until now). From head_: it reads `next` (acquire), then `published`
//     (acquire), copies what it may of [head, published); a chunk it has emptied whose `next`
//     was set is closed for good (the final count was stored before `next`), so it is retired
//     to lent_ and the walk goes on at `next`. The tail chunk is never retired. Then taken_.
//  5. RECYCLE. A retired chunk, once its events are no longer lent, is offered to the producer
//     in spare_ (an atomic pointer: one exchange on each side); a second one is freed.
// Memory follows the queue's length: every chunk but the tail, the spare and the last take's
// holds queued events, and a chunk's arena is sized from the token count of the chunks before
// it (budget_), so a queue of 4-token events does not reserve room for 16-token ones.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>

#include "kvreg.h"

namespace kvreg {

class PollQueue {
public:
    explicit PollQueue(size_t capacity); // throws std::bad_alloc
    ~PollQueue();
    PollQueue(const PollQueue &) = delete;
    PollQueue &operator=(const PollQueue &) = delete;

    // Producer (one thread at a time): queue n events (tokens copied) until the queue holds
    // `capacity` events; returns how many were queued (the rest are dropped by the caller's
    // accounting). Out of memory counts as full. Each event is made by make(k, event), k = 0 ..
    // n-1, in place in the queue; its tokens need only live until make is called again.
    template <class Make> size_t push_each(size_t n, Make make) noexcept;
    // Move up to cap events into out; their tokens stay valid until the next take().
    // KVREG_EBUSY (nothing taken) when the queue is claimed and this is not its owner.
    int take(kvreg_event *out, size_t cap, size_t *n, bool owner) noexcept;
    // One consumer (a publisher) claims the queue: from then on only its takes (owner) take
    // anything; false if it is claimed already. Checked under take_mu_, so no other take is
    // running once claim() returns, and sleeping waiters are woken (their take then refuses).
    bool claim() noexcept;
    void unclaim() noexcept;
    bool claimed() const noexcept { return claimed_.load(std::memory_order_acquire); }
    // Sleep until an event is queued, wakeup() is called, or timeout_ms passes (-1: no limit).
    // Returns at once when events are queued (and then leaves a pending wakeup() pending).
    // wakeup() ends every wait sleeping now, or else the next wait; calls made before that
    // wait returns merge into it.
    void wait_for_events(int timeout_ms) noexcept;
    void wakeup() noexcept;
    size_t size() const noexcept {
        // seq_cst: a sleeping consumer's check pairs with the producer's store (notify_waiters).
        const uint64_t taken = taken_.load(std::memory_order_seq_cst);
        const uint64_t pushed = pushed_.load(std::memory_order_seq_cst);
        return pushed > taken ? static_cast<size_t>(pushed - taken) : 0; // a take can run ahead of pushed_
    }
    // Bytes held by chunks (queued events, the last take's, the spare; for tests of the bound).
    size_t bytes() const noexcept { return bytes_.load(std::memory_order_relaxed); }

private:
    static constexpr uint32_t kChunk = 256;          // events a chunk holds
    static constexpr uint32_t kFirstBudget = 16;     // tokens per event in the first chunk: a block
    static constexpr uint32_t kMaxBudget = 256;      // more per event gets a chunk of its own size
    // A consumer that finds the queue empty spins this many pauses (microseconds) before it
    // sleeps. A consumer draining as fast as it can used to sleep after nearly
    // every take, and the producer paid a futex wake for nearly every push, which the spin
    // avoids (kvreg-net-bench's register_release). Every kYieldEvery pauses it yields its CPU: with more threads
    // than CPUs (two workers and the consumer on 2 vCPUs, kvreg-bench disjoint --delivery poll)
    // a spinning consumer held a CPU the workers needed; yielding lets them run (bench/ab.py
    // compares the two).
    static constexpr unsigned kWaitSpins = 512;
    static constexpr unsigned kYieldEvery = 64;

    struct alignas(64) Chunk {
        std::atomic<uint32_t> published{0}; // events [0, published) are readable (step 3)
        std::atomic<Chunk *> next{nullptr}; // set once, after the final `published` (step 2)
        uint32_t token_cap = 0;
        uint32_t tokens_used = 0; // the producer's
        uint32_t head = 0;        // the consumers': events before it were taken
        Chunk *lent_next = nullptr; // in lent_ (the consumers')

        kvreg_event *events() noexcept { return reinterpret_cast<kvreg_event *>(this + 1); }
        uint32_t *tokens() noexcept { return reinterpret_cast<uint32_t *>(events() + kChunk); }
        static size_t bytes_for(uint32_t token_cap) noexcept {
            return sizeof(Chunk) + kChunk * sizeof(kvreg_event) + size_t{token_cap} * sizeof(uint32_t);
        }
    };
    static_assert(sizeof(Chunk) % alignof(kvreg_event) == 0, "events follow the header");

    // The producer's new chunk with room for at least token_cap tokens: the spare if it fits,
    // else a fresh one; nullptr when out of memory.
    Chunk *new_chunk(uint32_t token_cap) noexcept;
    void free_chunk(Chunk *c) noexcept;
    // Step 2: close tail_ at `count` events and link a chunk with room for `need` tokens (0:
    // the budget's) after it. nullptr when out of memory: c stays the tail, its events
    // published, and the next push tries again.
    Chunk *close_and_open(Chunk *c, uint32_t count, uint32_t need) noexcept;
    void notify_waiters() noexcept;

    const size_t capacity_;
    std::atomic<size_t> bytes_{0};

    // The producer's side (step 1-3).
    alignas(64) Chunk *tail_ = nullptr;
    uint32_t budget_ = kFirstBudget; // tokens per event to give a new chunk's arena
    std::atomic<uint64_t> pushed_{0};

    // Between the two (step 5).
    alignas(64) std::atomic<Chunk *> spare_{nullptr};

    // The consumers' side (step 4), under take_mu_.
    alignas(64) std::mutex take_mu_;
    Chunk *head_ = nullptr;
    Chunk *lent_ = nullptr; // retired by the last take: its events are still handed out
    std::atomic<uint64_t> taken_{0};
    std::atomic<bool> claimed_{false}; // written under take_mu_

    // Sleeping consumers. wakeup() with waiters bumps wakeups_, which ends every current wait
    // (waiting_ counts the waits it has not ended yet); with none, it is kept in
    // wakeup_pending_ for the next waiter, so a wakeup is never lost. Wake-ups merge: one not
    // yet taken (pending, or ending sleepers that have not returned: unseen_) absorbs the
    // calls after it, so any number of calls end one wait, not one wait each (they were
    // counted, and after N calls the next N waits returned at once). waiters_ is waiting_ as
    // the producer reads it without the mutex.
    alignas(64) std::atomic<uint32_t> waiters_{0};
    std::mutex wmu_;
    std::condition_variable cv_;
    uint64_t wakeups_ = 0;
    uint32_t waiting_ = 0;
    uint32_t unseen_ = 0;         // waits ended by the last wakeups_ bump that have not returned
    bool wakeup_pending_ = false; // for the next wait
};

template <class Make> size_t PollQueue::push_each(size_t n, Make make) noexcept {
    // Step 1.
    const uint64_t pushed = pushed_.load(std::memory_order_relaxed); // ours
    const uint64_t taken = taken_.load(std::memory_order_acquire);
    const size_t queued = pushed > taken ? static_cast<size_t>(pushed - taken) : 0;
    const size_t todo = std::min(n, queued < capacity_ ? capacity_ - queued : size_t{0});
    // Step 2.
    Chunk *c = tail_;
    uint32_t count = c->published.load(std::memory_order_relaxed); // ours too
    size_t done = 0;
    while (done < todo) {
        if (count == kChunk) {
            Chunk *next = close_and_open(c, count, 0);
            if (!next) break;
            c = next;
            count = 0;
        }
        kvreg_event *e = &c->events()[count];
        make(done, *e);
        const uint32_t nt = e->tokens ? e->n_tokens : 0;
        if (nt > c->token_cap - c->tokens_used) {
            // Copied out first: once c is closed, a consumer may retire and free it.
            const kvreg_event made = *e; // its tokens still point where make() left them
            Chunk *next = close_and_open(c, count, nt);
            if (!next) break;
            next->events()[0] = made;
            c = next;
            count = 0;
            e = &c->events()[0];
        }
        if (nt) {
            uint32_t *to = c->tokens() + c->tokens_used;
            if (nt == kFirstBudget)
                std::memcpy(to, e->tokens, kFirstBudget * sizeof(uint32_t)); // inlined: the usual block
            else
                std::memcpy(to, e->tokens, size_t{nt} * sizeof(uint32_t));
            e->tokens = to;
            c->tokens_used += nt;
        } else {
            e->tokens = nullptr;
        }
        count++;
        done++;
    }
    // Step 3.
    tail_ = c;
    if (done == 0) return 0;
    c->published.store(count, std::memory_order_release);
    pushed_.store(pushed + done, std::memory_order_seq_cst);
    if (waiters_.load(std::memory_order_seq_cst) > 0) notify_waiters();
    return done;
}

} // namespace kvreg
