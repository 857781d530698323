// The registry's single ordered event stream: ids, the event ring, and delivery.
//
// ---------------------------------------------------------------------------- the protocol
// Walk one kvreg_release() that drops a hash's last reference, on thread P:
//
//  1. CREDIT. Under the hash's shard lock, P's EventBatch takes a ring credit (take_credit()).
//     There are `ring size` credits; a credit is held from before an event's id is taken until
//     the event has left the ring (its run was copied out for delivery). If none is free, P unlocks, waits for one
//     (wait_credit(): it delivers itself if nobody is delivering, else sleeps) and retries
//     the release from the start. A call that emits no event never takes a credit, so it
//     never waits for anyone's callback.
//  2. ID. Still under the shard lock, add() takes event_id X = next_id_++ and writes the event
//     into ring slot X % size, then publishes it: stamp[X % size] = X + 1 (release). Taking
//     the id under the lock that serialises the hash is what orders the hash's events
//     (Register, Remove, Register ...) and a parent's Register before its child's. The credit
//     guarantees the slot is free: fewer than `size` ids are ever outstanding.
//  3. DELIVER. After its locks are released, P calls deliver(): it tries to become the
//     deliverer (role_ 0 -> 1). If another thread H holds the role, P returns at once: H
//     delivers P's events before it lets go (see 4). Otherwise P, as deliverer, hands the
//     longest published run starting at the cursor (<= KVREG_EVENTS_PER_CALL events): it
//     copies the run (events and tokens) out of the ring, frees those credits at once (so
//     producers go on while a slow callback runs), hands the copy to the callback, advances
//     delivered_, and repeats until no event is left. (POLL mode: the queue copies the run
//     straight out of the ring, then the credits are freed.) A run ends at an id that
//     is taken but not yet published (its owner is inside a shard lock, a few stores away):
//     the owner delivers it after its locks (or finds us still delivering; step 4 covers the
//     race). Waiting there instead made 2 threads sharing prefixes slower (`kvreg-bench
//     --workload threads`): the wait cost more than the shorter runs it saved.
//  4. LET GO. The deliverer stores role_ = 0, fences, and looks at the cursor's slot again; if
//     it was published meanwhile it tries to take the role back. A publisher fences after its
//     stamps and before it reads role_. So either the publisher sees role_ == 0 and delivers,
//     or the deliverer sees the stamp: no event is left behind (the store-buffering pattern
//     with a seq_cst fence on each side).
//  5. HAND OVER. Step 3 alone lets other threads keep a deliverer busy for ever: as long as
//     they publish as fast as its callback consumes, it never finds the ring empty and its own
//     call never returns (a slow Python callback did this for up to two minutes). So a deliverer owes
//     only the events taken before it took the role, plus kHandoffSlack more: past that it
//     raises handoff_ to kHandoffWanted and keeps delivering. The next publisher whose
//     deliver() finds the role taken and kHandoffWanted raised commits to take over (CAS to
//     kSuccessorWaiting) and sleeps on role_. At its next run boundary (at most one callback
//     call later) the deliverer sees the successor, stores role_ = kHandedOff, wakes it and
//     returns; nobody else can take a handed-off role (try_take_role wants kIdle), so the
//     successor owns it and everything published is delivered by it (steps 3-5 again). A
//     deliverer that empties the ring first withdraws the offer (CAS kHandoffWanted -> kNoHandoff);
//     if it loses that race to a successor, it hands over instead. handoff_ is kNoHandoff whenever
//     nobody holds the role. So a publisher waits for a callback only when it takes over a
//     delivery that already ran past its debt, and then for one callback call.
//
//  6. SWAP. kvreg_registry_set_event_fn must not wait for an idle role: under steady load step 5
//     passes the role from publisher to publisher and it is never idle. So the setter leaves
//     the new callback in pending_cb_ and raises swap_ to kSwapWanted; whoever holds the role
//     installs it at its next run boundary (between two callback calls, so the old callback
//     is not running), leaves the old one in pending_cb_, and sets kSwapDone. A holder that
//     lets go with the swap still wanted moves it to kSwapRoleFree instead, and the setter
//     takes the idle role and installs it itself. The setter raises kSwapWanted, fences, then
//     tries the role; release_role() stores kIdle, fences, then looks at swap_ (step 4's
//     pattern): either the setter finds the role idle or the holder sees the swap. So the
//     setter waits for at most the callback call in progress.
//
// Whole-registry operations (kvreg_registry_clear, kvreg_registry_snapshot) take every shard
// lock in index order, so while they hold them no id is being taken or published: the Cleared
// event's id, or a snapshot's position (next_id_ read under all the locks), is a clean cut of
// the stream. They are the only code that holds two shard locks at once.
//
// Re-entrancy: the deliverer's callback may call back into the registry. Those calls take ids
// and publish like anyone's, and their deliver() sees that this thread holds the role (state
// CALLING) and returns; the deliverer's loop delivers their events after the callback returns
// (waiting, if need be, for ids other threads took in between: nested_end_), so they are
// delivered by the same thread, as kvreg.h promises.
// If such a call finds no free credit (other threads filled the ring while the callback runs),
// waiting would wait for itself: instead it SPILLs, moving published events that follow the
// run being delivered (which is already a copy) out of the ring into an unbounded side queue in
// id order; the oldest slots are freed and their credits go to the nested call. The deliverer's loop always empties the side queue before reading the ring again.
//
// States of the delivery role (role_), one sentinel per concept:
//   kIdle      nobody is delivering;
//   kDraining  a thread is moving published events out of the ring (outside any callback);
//   kCalling   that thread is inside the user's callback (calls it makes are nested);
//   kHandedOff the deliverer left the role to the committed successor (step 5), who takes it.
// States of a callback swap (swap_; step 6):
//   kNoSwap       no setter is waiting;
//   kSwapWanted   pending_cb_ holds the new callback: the role holder installs it;
//   kSwapDone     installed; pending_cb_ holds the old callback, for the setter to drop;
//   kSwapRoleFree the holder let go of the role with the swap still wanted: the setter takes it.
// States of the hand-over offer (handoff_):
//   kNoHandoff        the deliverer still owes events (or nobody delivers);
//   kHandoffWanted    the deliverer has paid its debt: the next publisher should take over;
//   kSuccessorWaiting a publisher committed to take over and sleeps until kHandedOff.
// ---------------------------------------------------------------------------------------
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "events/callback.hpp"
#include "events/event_copies.hpp"
#include "kvreg.h"
#include "events/poll_queue.hpp"

namespace kvreg {

class EventLog {
public:
    // Events a registry can have in flight (taken, not yet delivered). A power of two.
    static constexpr size_t kRingSize = 4096;
    static constexpr size_t kRun = KVREG_EVENTS_PER_CALL; // most events in one callback call

    EventLog(bool poll_mode, size_t poll_capacity, CallbackRef cb);
    ~EventLog();
    EventLog(const EventLog &) = delete;
    EventLog &operator=(const EventLog &) = delete;

    int set_fn(CallbackRef cb) noexcept; // KVREG_EBUSY from a callback, EINVAL in POLL mode
    // POLL mode: a publisher takes the events for itself (take_events: false if one already
    // has); then poll()/poll_wait() refuse with KVREG_EBUSY, and it reads them with
    // owner_poll_wait(). Another poller would take some of its events and, by polling, free
    // the tokens of the ones it holds.
    bool take_events() noexcept { return queue_.claim(); }
    void give_back_events() noexcept { queue_.unclaim(); }
    int owner_poll_wait(kvreg_event *out, size_t cap, size_t *n, int timeout_ms) noexcept;
    int poll(kvreg_event *out, size_t cap, size_t *n) noexcept;
    int poll_wait(kvreg_event *out, size_t cap, size_t *n, int timeout_ms) noexcept;
    void wakeup() noexcept;
    int flush() noexcept;
    bool poll_mode() const noexcept { return poll_mode_; }
    // True when the calling thread is inside this log's callback.
    bool in_callback() const noexcept {
        return role_.load(std::memory_order_acquire) == kCalling &&
               holder_.load(std::memory_order_relaxed) == std::this_thread::get_id();
    }

    uint64_t stat_registers() const noexcept { return registers_.load(std::memory_order_relaxed); }
    uint64_t stat_removes() const noexcept { return removes_.load(std::memory_order_relaxed); }
    uint64_t stat_cleared() const noexcept { return cleared_.load(std::memory_order_relaxed); }
    uint64_t stat_dropped() const noexcept {
        return dropped_.load(std::memory_order_relaxed) + lost_.load(std::memory_order_relaxed);
    }
    // An event that could not even be recorded (a nested kvreg_pool_free out of memory): no id
    // is taken, it is only counted.
    void count_lost() noexcept { lost_.fetch_add(1, std::memory_order_relaxed); }
    uint64_t stat_next_id() const noexcept { return next_id_.load(std::memory_order_relaxed); }
    uint64_t stat_queued() const noexcept { return queue_.size(); }
    size_t queue_bytes() const noexcept { return queue_.bytes(); }

private:
    friend class EventBatch;
    enum Role : uint32_t { kIdle = 0, kDraining = 1, kCalling = 2, kHandedOff = 3 };
    enum Handoff : uint32_t { kNoHandoff = 0, kHandoffWanted = 1, kSuccessorWaiting = 2 };
    enum Swap : uint32_t { kNoSwap = 0, kSwapWanted = 1, kSwapDone = 2, kSwapRoleFree = 3 };
    // Events a deliverer delivers for others beyond what it owed before it asks to be relieved
    // (step 5): enough that runs stay long and the role does not bounce between producers of
    // a fast callback, few enough that a call's own latency stays bounded.
    static constexpr uint64_t kHandoffSlack = kRun;

    // A slot keeps up to kInlineTokens tokens in itself, so the usual block (16 tokens) costs
    // no cache line beyond the slot's two; up to kArenaTokens in its part of one arena
    // allocated with the ring (untouched until a block that size comes), so the usual block
    // sizes never allocate on the event path; more in a buffer of its own, allocated by the
    // call before it takes the id (EventBatch::reserve_tokens). With every token in the
    // arena, a 16-token event cost a third cache line, written by the producer and read by
    // the deliverer (often on the other core); inline, every threaded and one-thread workload
    // of kvreg-bench runs faster.
    static constexpr uint32_t kInlineTokens = 16;
    static constexpr uint32_t kArenaTokens = 64;
    // Copy n tokens. The usual block (kInlineTokens) takes a fixed-size memcpy the compiler
    // inlines: as a library call for every event, the copies into and out of the ring were a
    // visible share of kvreg-bench register_release.
    static void copy_tokens(uint32_t *to, const uint32_t *from, uint32_t n) noexcept {
        if (n == kInlineTokens)
            std::memcpy(to, from, kInlineTokens * sizeof(uint32_t));
        else
            std::memcpy(to, from, size_t{n} * sizeof(uint32_t));
    }
    // One ring slot: its stamp (id + 1 once published), its event in compact form (expanded
    // into a kvreg_event when it leaves the ring) and its tokens, on two cache lines of its
    // own, so producers writing neighbouring ids on different cores do not share lines.
    struct alignas(128) Slot {
        std::atomic<uint64_t> stamp{0}; // no id + 1 is 0: never published
        uint64_t sequence_hash = 0, block_hash = 0, parent_sequence_hash = 0;
        uint32_t pool_id = 0, n_tokens = 0;
        uint8_t kind = 0, medium = 0, has_parent = 0;
        uint32_t token_cap = 0;     // of `tokens`: the arena's part, or big's
        uint32_t *tokens = nullptr; // for more than kInlineTokens
        std::unique_ptr<uint32_t[]> big;
        uint32_t inline_tokens[kInlineTokens];

        const uint32_t *token_data() const noexcept {
            return n_tokens == 0 ? nullptr : n_tokens <= kInlineTokens ? inline_tokens : tokens;
        }
        // The event as the callback sees it; its tokens still point into this slot.
        void expand(uint64_t id, kvreg_event &e) const noexcept {
            e.kind = kind;
            e.pool_id = pool_id;
            e.event_id = id;
            e.sequence_hash = sequence_hash;
            e.block_hash = block_hash;
            e.parent_sequence_hash = parent_sequence_hash;
            e.has_parent = has_parent;
            e.n_tokens = n_tokens;
            e.tokens = token_data();
            e.medium = medium;
            e.reserved32 = 0;
            e.reserved[0] = e.reserved[1] = e.reserved[2] = 0;
        }
    };
    static_assert(sizeof(Slot) == 128, "a slot is two cache lines");

    // Credits (step 1). take: non-blocking, up to `want`, returns how many.
    uint32_t take_credits(uint32_t want) noexcept;
    void give_credits(uint64_t n) noexcept;
    // Step 3/4: deliver everything published, unless another thread is delivering or we are
    // inside the callback. Returns with the role released.
    void deliver() noexcept;
    bool try_take_role() noexcept;
    void release_role() noexcept;
    // Step 5, publisher side: if the deliverer asks to be relieved, commit to take over and
    // sleep until it hands the role over. True: this thread now holds the role.
    bool take_over() noexcept;
    // Step 5, deliverer side: leave the role to the committed successor.
    void hand_over() noexcept;
    // Step 6, holder side: install the callback a setter left in pending_cb_.
    void install_pending_fn() noexcept;
    // poll_wait() and owner_poll_wait(): sleep until events come (bounded), then take them.
    int wait_and_take(kvreg_event *out, size_t cap, size_t *n, int timeout_ms, bool owner) noexcept;
    // Delivers until nothing is left (false: the caller still holds the role and lets go, step
    // 4) or until it handed the role over (true). `owed`: ids below it are this thread's debt.
    bool deliver_as_holder(uint64_t owed) noexcept;
    // INLINE mode: hand events to the callback (POLL mode queues runs with queue_run, and has
    // no callback to make nested calls that spill).
    void dispatch(const kvreg_event *ev, size_t n) noexcept;
    // POLL mode: queue ring events [start, start + n), expanded one by one as the queue copies them.
    void queue_run(uint64_t start, size_t n) noexcept;
    void tally(uint64_t n, uint64_t reg, uint64_t cleared, uint64_t dropped) noexcept; // statistics
    // A short run is copied onto the deliverer's own stack, not into run_events_: the role
    // moves between threads, and the shared buffer's lines moved with it (a run of 13 usual
    // events writes 31 of them), read and written by one core, then the other.
    static constexpr size_t kLocalRun = 64;
    struct LocalRun {
        kvreg_event events[kLocalRun];
        uint32_t tokens[kLocalRun * kInlineTokens];
    };
    // Copy ring events [start, start + n) and their tokens into `local` if they fit, else into
    // run_events_; returns the copy, nullptr if out of memory (nothing copied).
    const kvreg_event *copy_run(uint64_t start, size_t n, LocalRun &local) noexcept;
    // Nested, out of credits: move published events after the current run out of the ring.
    // Returns the credits freed (kept by the caller), 0 if none could be (out of memory).
    // -1: out of memory.
    int64_t spill(uint32_t want) noexcept;
    void advance_delivered(uint64_t to) noexcept;
    // Wait for an id that is taken (its owner is inside a shard lock, about to publish).
    void wait_published(uint64_t id) const noexcept;
    bool published(uint64_t id) const noexcept {
        return slots_[id & kMask].stamp.load(std::memory_order_acquire) == id + 1;
    }

    static constexpr uint64_t kMask = kRingSize - 1;
    const bool poll_mode_;

    alignas(64) std::atomic<uint64_t> next_id_{0};
    alignas(64) std::atomic<int64_t> credits_{static_cast<int64_t>(kRingSize)};
    std::atomic<uint32_t> credit_waiters_{0};
    alignas(64) std::atomic<uint32_t> role_{kIdle};
    std::atomic<std::thread::id> holder_{};
    std::atomic<uint32_t> role_waiters_{0};
    std::atomic<uint32_t> handoff_{kNoHandoff};
    alignas(64) std::atomic<uint64_t> delivered_{0}; // every id below this is delivered
    std::atomic<uint32_t> flush_waiters_{0};

    // The ring (step 2).
    std::unique_ptr<Slot[]> slots_;
    std::unique_ptr<uint32_t[]> token_arena_;

    // Owned by the role holder: the next id to take out of the ring, the run being delivered
    // (copied out of the ring with its tokens), and spilled events.
    uint64_t ring_cursor_ = 0;
    // The run, copied out: kRun events and their tokens, in buffers kept from run to run, so the
    // steady state allocates nothing and a copy is an event and a memcpy of its tokens (three
    // vector appends per event cost register_release measurably more).
    std::unique_ptr<kvreg_event[]> run_events_;
    std::unique_ptr<uint32_t[]> run_tokens_;
    size_t run_token_cap_ = 0;
    uint64_t nested_end_ = 0;  // ids below this include every event our callbacks caused
    bool run_in_ring_ = false; // delivering straight from the ring (out of memory for a copy)
    alignas(64) std::atomic<uint64_t> ring_free_{0}; // ids below this have left the ring (debug check)
    std::deque<EventCopies> spilled_; // chunks of at most kRun

    // The callback; replaced only by a thread holding the role, read only by the holder.
    CallbackRef cb_;
    // Step 6: one setter at a time; pending_cb_ belongs to the setter, except while swap_ is
    // kSwapWanted, when it belongs to the role holder.
    std::mutex set_mu_;
    alignas(64) std::atomic<uint32_t> swap_{kNoSwap};
    CallbackRef pending_cb_;

    // Statistics: written only by the role holder, read by anyone.
    std::atomic<uint64_t> registers_{0}, removes_{0}, cleared_{0}, dropped_{0};
    std::atomic<uint64_t> lost_{0};

    PollQueue queue_;
};

// The events of one API call: the credits it holds and whether it runs inside the callback.
// Lives on the caller's stack; delivers on destruction.
class EventBatch {
public:
    // expected: how many events the call may emit (a hint for taking credits in bulk).
    explicit EventBatch(EventLog &log, size_t expected = 1) noexcept;
    ~EventBatch();
    EventBatch(const EventBatch &) = delete;
    EventBatch &operator=(const EventBatch &) = delete;

    // Under a shard lock, before add(): hold a credit for one event. Never blocks; false when
    // the ring is full (then unlock, wait_credit(), and retry the operation).
    bool take_credit() noexcept;
    // With no lock held: block until take_credit() can succeed. False only inside a callback
    // when spilling needs memory that cannot be had.
    bool wait_credit() noexcept;
    // Before add() of an event with n tokens (under the lock is fine): make sure its tokens
    // fit wherever its id lands. False when out of memory (nothing changed).
    bool reserve_tokens(uint32_t n) noexcept;
    // Under the shard lock, after take_credit() and reserve_tokens(): take the event's id and
    // publish it, its tokens copied into the ring. If reserve_tokens() was skipped or failed
    // (kvreg_pool_free out of memory), an event that needs a big buffer goes out without tokens.
    // `medium` is the KVREG_MEDIUM_* of `pool` (0 with pool 0, the Cleared event).
    void add(uint32_t kind, uint32_t pool, uint32_t medium, uint64_t seq, uint64_t block, uint64_t parent,
             bool has_parent, const uint32_t *tokens, uint32_t n_tokens) noexcept {
        add_as(take_id(), kind, pool, medium, seq, block, parent, has_parent, tokens, n_tokens);
    }
    // add() in two steps, for callers that take the id before their own stores under the same
    // lock: the id's locked add then does not wait for those stores to drain. Once taken, the
    // id must be published with add_as() before the lock is released.
    uint64_t take_id() noexcept {
        credits_--;
        return log_.next_id_.fetch_add(1, std::memory_order_relaxed);
    }
    void add_as(uint64_t id, uint32_t kind, uint32_t pool, uint32_t medium, uint64_t seq, uint64_t block,
                uint64_t parent, bool has_parent, const uint32_t *tokens, uint32_t n_tokens) noexcept;
    // Deliver what this call published so far (no lock held). Called by the destructor.
    void flush() noexcept;

private:
    EventLog &log_;
    const bool nested_;
    uint32_t credits_ = 0;  // held, not yet used
    std::unique_ptr<uint32_t[]> spare_; // a big token buffer for a slot, from reserve_tokens()
    uint32_t spare_cap_ = 0;
    uint32_t want_;         // credits to take at once
    bool published_ = false;
};

} // namespace kvreg
