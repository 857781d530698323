// The registry's single ordered event stream.
//
// Ordering. Every event gets its event_id from one atomic counter while the shard lock of its
// hash is held. So per hash, ids follow the state changes (Register, Remove, Register ...), and
// anything that saw a hash registered (a child registration, a second pool) gets a later id than
// that hash's Register.
//
// Delivery. Each API call collects its events in an EventBatch on its own stack. When the call
// has released every lock, it waits until all smaller ids are delivered (a turnstile on
// `delivered_`), then hands its run of consecutive ids to the callback straight from its buffer
// (INLINE), or moves them into the bounded queue (POLL). So callbacks run one at a time, in id
// order, on the thread that caused the events, never under a lock, and one call's events arrive
// in one callback unless another thread's events fall between them. Events caused from inside a
// callback are parked in `nested_` and delivered by the same thread after the callback returns.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "kvreg.h"

namespace kvreg {

class EventBatch;

class EventLog {
public:
    EventLog(bool poll_mode, size_t poll_capacity) : poll_mode_(poll_mode), capacity_(poll_capacity) {}
    ~EventLog();
    EventLog(const EventLog &) = delete;
    EventLog &operator=(const EventLog &) = delete;

    void set_initial_fn(kvreg_event_fn fn, void *ud, kvreg_destroy_fn destroy) noexcept;
    int set_fn(kvreg_event_fn fn, void *ud, kvreg_destroy_fn destroy) noexcept;
    int poll(kvreg_event *out, size_t cap, size_t *n) noexcept;
    int poll_wait(kvreg_event *out, size_t cap, size_t *n, int timeout_ms) noexcept;
    void wakeup() noexcept;
    int flush() noexcept;
    bool poll_mode() const noexcept { return poll_mode_; }
    // True when the calling thread is inside this log's callback.
    bool in_callback() const noexcept { return deliverer_.load(std::memory_order_acquire) == std::this_thread::get_id(); }

    uint64_t stat_registers() const noexcept { return registers_.load(std::memory_order_relaxed); }
    uint64_t stat_removes() const noexcept { return removes_.load(std::memory_order_relaxed); }
    uint64_t stat_dropped() const noexcept {
        return dropped_.load(std::memory_order_relaxed) + lost_.load(std::memory_order_relaxed);
    }
    // An event that could not even be recorded (out of memory inside a callback while freeing a
    // pool): no id is taken, it is only counted.
    void count_lost() noexcept { lost_.fetch_add(1, std::memory_order_relaxed); }
    uint64_t stat_next_id() const noexcept { return next_id_.load(std::memory_order_relaxed); }
    uint64_t stat_queued() const noexcept;

private:
    friend class EventBatch;

    uint64_t take_id() noexcept { return next_id_.fetch_add(1, std::memory_order_relaxed); }
    void wait_turn(uint64_t id) noexcept;
    void end_turn(uint64_t next) noexcept;
    // Hand events (consecutive ids, our turn) to the callback or the queue.
    void dispatch(kvreg_event *events, size_t n, EventBatch *owner) noexcept;
    void count(const kvreg_event *events, size_t n, bool dropped) noexcept;

    const bool poll_mode_;
    const size_t capacity_;

    // The call sequencer: a call holds it while it changes state (never while it delivers or
    // waits), so one call's event ids are contiguous and two threads' calls do not interleave
    // their ids event by event (which made delivery ping-pong between them). Lock order:
    // seq_mu_, then a shard lock.
    std::mutex seq_mu_;
    alignas(64) std::atomic<uint64_t> next_id_{0};
    alignas(64) std::atomic<uint64_t> delivered_{0}; // every id below this is delivered
    std::atomic<uint32_t> sleepers_{0};               // threads asleep in wait_turn
    std::mutex turn_mu_;
    std::condition_variable turn_cv_;

    // Statistics: written only by the thread holding the turn, read by anyone.
    std::atomic<uint64_t> registers_{0}, removes_{0}, dropped_{0};
    std::atomic<uint64_t> lost_{0};

    // The callback. fn_mu_ guards fn_/ud_/destroy_/calling_; it is never held during a call.
    mutable std::mutex fn_mu_;
    std::condition_variable fn_idle_;
    kvreg_event_fn fn_ = nullptr;
    void *ud_ = nullptr;
    kvreg_destroy_fn destroy_ = nullptr;
    bool calling_ = false;
    std::atomic<std::thread::id> deliverer_{};

    // The batch whose events the callback is handling right now (set by the thread holding
    // the turn, read only by that thread): calls made from inside the callback put their
    // events into that batch, which delivers them after its current run, on the same thread.
    EventBatch *delivering_batch_ = nullptr;

    // POLL queue, [head_, size) pending; tokens copied in. Guarded by queue_mu_.
    mutable std::mutex queue_mu_;
    std::vector<kvreg_event> queue_;
    std::vector<uint32_t> queue_tokens_;
    std::vector<size_t> queue_token_off_;
    size_t head_ = 0;
    std::vector<uint32_t> polled_tokens_; // tokens of the last poll's events
    std::condition_variable queue_cv_;    // signalled when events are queued or on wakeup()
    bool wake_pending_ = false;
};

// The events of one API call. Lives on the caller's stack; delivers on flush()/destruction.
class EventBatch {
public:
    explicit EventBatch(EventLog &log) noexcept;
    ~EventBatch() {
        flush();
        release_sequencer();
    }
    EventBatch(const EventBatch &) = delete;
    EventBatch &operator=(const EventBatch &) = delete;

    // Before taking a shard lock for up to k events: make room (may deliver what is buffered,
    // or grow; throws std::bad_alloc with nothing changed). No lock may be held.
    void prepare(size_t k);
    // Room already made for this many events without allocating.
    size_t room() const noexcept;
    // Ensure room() > 0 by delivering (outside callbacks) or growing (inside); false only when
    // inside a callback and out of memory. No lock may be held.
    bool make_room() noexcept;
    // Under the shard lock: record one event and assign its id. Never throws after prepare(),
    // except when copying tokens (copy = true), which may throw std::bad_alloc before the id is
    // taken. Without copy, tokens must stay valid until flush() (the caller's own input does).
    void add(uint32_t kind, uint32_t pool, uint64_t seq, uint64_t block, uint64_t parent, bool has_parent,
             const uint32_t *tokens, uint32_t n_tokens, bool copy);
    // Deliver everything buffered (waits for earlier events of other threads). No lock held.
    void flush() noexcept;

private:
    static constexpr size_t kInline = 128;    // events held without allocating
    static constexpr size_t kMaxChunk = KVREG_EVENTS_PER_CALL; // larger calls deliver in chunks

    void deliver_runs(kvreg_event *ev, size_t n) noexcept;
    void deliver_nested() noexcept;
    void hold_sequencer() noexcept {
        if (!holds_seq_ && !is_nested_) {
            // Calls hold it for microseconds: spin a little before sleeping in the kernel.
            for (int i = 0; i < 2000 && !holds_seq_; i++) {
                holds_seq_ = log_.seq_mu_.try_lock();
#if defined(__x86_64__) || defined(__i386__)
                if (!holds_seq_) __builtin_ia32_pause();
#endif
            }
            if (!holds_seq_) log_.seq_mu_.lock();
            holds_seq_ = true;
        }
    }
    void release_sequencer() noexcept {
        if (holds_seq_) {
            log_.seq_mu_.unlock();
            holds_seq_ = false;
        }
    }

    EventLog &log_;
    const bool is_nested_; // constructed inside this log's callback
    size_t n_ = 0;
    kvreg_event *events() noexcept { return heap_.empty() ? inline_ : heap_.data(); }

    EventBatch *const outer_; // nested: the batch being delivered on this thread, else null
    // Calls inside a callback do not take the sequencer: their events wait for the outer call.
    bool holds_seq_ = false;
    std::vector<kvreg_event> heap_; // all events once a call outgrows inline_
    std::vector<uint32_t> copied_;  // copied tokens; an event's reserved[0] holds offset + 1
    // Events that calls made from our callbacks caused (ids later than all of ours), with
    // their copied tokens (reserved[0] = offset + 1 into nested_copied_).
    std::vector<kvreg_event> nested_events_;
    std::vector<uint32_t> nested_copied_;
    kvreg_event inline_[kInline];
};

} // namespace kvreg
