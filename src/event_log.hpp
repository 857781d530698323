// The registry's single ordered event stream.
//
// Ordering: an event is appended while the shard lock of its hash is held, and the append
// assigns the next event_id under the log's mutex. So, per hash, events are in the order of the
// state changes (Register, Remove, Register ... never reordered), and anything that observed a
// hash registered (a child registration, a second pool) appends after that hash's Register.
//
// Delivery (INLINE): events are handed to the callback in event_id order, never under a lock,
// one callback at a time, on the thread whose call appended them. A thread that appended events
// waits for its turn (earlier events of other threads first), then delivers its own run of
// consecutive events in one call. Events appended from inside a callback are delivered by the
// same thread after the callback returns.
// Delivery (POLL): events wait in a bounded queue; a full queue drops and counts new events
// (their ids are skipped, so the consumer sees the gap).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "kvreg.h"

namespace kvreg {

struct EventData {
    uint64_t seq;
    uint64_t block;
    uint64_t parent;
    uint32_t kind;
    uint32_t pool;
    bool has_parent;
};

class EventLog {
public:
    EventLog(bool poll_mode, size_t poll_capacity) : poll_mode_(poll_mode), capacity_(poll_capacity) {}
    ~EventLog();
    EventLog(const EventLog &) = delete;
    EventLog &operator=(const EventLog &) = delete;

    void set_initial_fn(kvreg_event_fn fn, void *ud, kvreg_destroy_fn destroy) noexcept;

    // Append one event (caller holds the shard lock of e.seq). Throws std::bad_alloc with
    // nothing appended and no id consumed.
    void append(const EventData &e, const uint32_t *tokens, uint32_t n_tokens);
    // For paths that cannot fail (freeing a pool): if the event cannot be queued for lack of
    // memory it is counted as dropped and its id skipped, so consumers see the gap.
    void append_or_drop(const EventData &e, const uint32_t *tokens, uint32_t n_tokens) noexcept;

    // Deliver this thread's queued events (INLINE). Call with no registry lock held, after any
    // call that appended. Returns at once when called from inside this log's callback.
    void deliver_mine() noexcept;

    int set_fn(kvreg_event_fn fn, void *ud, kvreg_destroy_fn destroy) noexcept;
    int poll(kvreg_event *out, size_t cap, size_t *n) noexcept;

    // True when the calling thread is inside this log's callback.
    bool in_callback() const noexcept;

    uint64_t stat_registers() const noexcept;
    uint64_t stat_removes() const noexcept;
    uint64_t stat_dropped() const noexcept;
    uint64_t stat_queued() const noexcept;
    uint64_t stat_next_id() const noexcept;
    bool poll_mode() const noexcept { return poll_mode_; }

private:
    struct Queued {
        EventData data;
        uint64_t id;
        std::thread::id owner;
        size_t token_off; // into tokens_
        uint32_t n_tokens;
    };

    bool owns_queued_locked(std::thread::id me) const noexcept;
    void compact_locked() noexcept;

    const bool poll_mode_;
    const size_t capacity_;

    mutable std::mutex mu_;
    std::condition_variable turn_;
    std::vector<Queued> queue_;    // [head_, size) pending
    size_t head_ = 0;
    std::vector<uint32_t> tokens_; // token copies of pending events
    size_t tokens_head_ = 0;

    kvreg_event_fn fn_ = nullptr;
    void *ud_ = nullptr;
    kvreg_destroy_fn destroy_ = nullptr;
    bool delivering_ = false;
    std::thread::id deliverer_{};

    uint64_t next_id_ = 0;
    uint64_t registers_ = 0;
    uint64_t removes_ = 0;
    uint64_t dropped_ = 0;

    // Owned by the thread that is delivering (delivering_ == true): no lock needed.
    std::vector<kvreg_event> scratch_events_;
    std::vector<uint32_t> scratch_tokens_;
    // Tokens of the events returned by the last poll() (valid until the next poll).
    std::vector<uint32_t> polled_tokens_;
};

} // namespace kvreg
