#include "events/event_log.hpp"
#include "util/cpu_relax.hpp"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <new>

namespace kvreg {

// ------------------------------------------------------------------------------- EventLog

EventLog::EventLog(bool poll_mode, size_t poll_capacity, CallbackRef cb)
    : poll_mode_(poll_mode), slots_(new Slot[kRingSize]()),
      token_arena_(new uint32_t[kRingSize * kArenaTokens]), cb_(std::move(cb)), queue_(poll_capacity) {
    run_events_.reset(new kvreg_event[kRun]);
    // Room for a full run of usual blocks (up to kInlineTokens tokens each), so the first
    // callback does not allocate (KVREG_OPT_RESERVE_BLOCKS promises registering does not).
    run_token_cap_ = kRun * kInlineTokens;
    run_tokens_.reset(new uint32_t[run_token_cap_]);
    for (size_t i = 0; i < kRingSize; i++) {
        slots_[i].tokens = token_arena_.get() + i * kArenaTokens;
        slots_[i].token_cap = kArenaTokens;
    }
}

EventLog::~EventLog() = default; // cb_ drops its reference: destroy runs if it was the last

uint32_t EventLog::take_credits(uint32_t want) noexcept {
    int64_t c = credits_.load(std::memory_order_relaxed);
    while (c > 0) {
        const int64_t t = std::min<int64_t>(c, want);
        if (credits_.compare_exchange_weak(c, c - t, std::memory_order_acquire, std::memory_order_relaxed))
            return static_cast<uint32_t>(t);
    }
    return 0;
}

void EventLog::give_credits(uint64_t n) noexcept {
    credits_.fetch_add(static_cast<int64_t>(n), std::memory_order_seq_cst);
    if (credit_waiters_.load(std::memory_order_seq_cst) > 0) credits_.notify_all();
}

void EventLog::advance_delivered(uint64_t to) noexcept {
    delivered_.store(to, std::memory_order_seq_cst);
    if (flush_waiters_.load(std::memory_order_seq_cst) > 0) delivered_.notify_all();
}

bool EventLog::try_take_role() noexcept {
    uint32_t idle = kIdle;
    if (role_.load(std::memory_order_relaxed) != kIdle ||
        !role_.compare_exchange_strong(idle, kDraining, std::memory_order_acquire, std::memory_order_relaxed))
        return false;
    holder_.store(std::this_thread::get_id(), std::memory_order_relaxed);
    return true;
}

void EventLog::release_role() noexcept {
    holder_.store(std::thread::id{}, std::memory_order_relaxed);
    role_.store(kIdle, std::memory_order_release);
    std::atomic_thread_fence(std::memory_order_seq_cst); // step 4: pairs with deliver()'s fence
    if (role_waiters_.load(std::memory_order_relaxed) > 0) role_.notify_all();
    // Step 6: a setter waiting for us to install its callback takes the idle role instead.
    // (The CAS fails if another thread took the role meanwhile and installed it.)
    uint32_t wanted = kSwapWanted;
    if (swap_.load(std::memory_order_relaxed) == kSwapWanted &&
        swap_.compare_exchange_strong(wanted, kSwapRoleFree, std::memory_order_acq_rel, std::memory_order_relaxed))
        swap_.notify_all();
}

void EventLog::install_pending_fn() noexcept {
    std::swap(cb_, pending_cb_); // pending_cb_ now holds the old callback, for the setter to drop
    swap_.store(kSwapDone, std::memory_order_release);
    swap_.notify_all();
}

void EventLog::deliver() noexcept {
    std::atomic_thread_fence(std::memory_order_seq_cst); // our stamps before our look at role_
    for (;;) {
        // Another thread delivers our events (or we are nested), unless it asks to be relieved.
        if (!try_take_role() && !take_over()) return;
        if (deliver_as_holder(next_id_.load(std::memory_order_acquire))) return; // handed over
        const uint64_t cursor = ring_cursor_;
        release_role();
        if (!published(cursor)) return; // nothing came in while we were letting go
    }
}

bool EventLog::take_over() noexcept {
    if (handoff_.load(std::memory_order_relaxed) != kHandoffWanted) return false;
    if (holder_.load(std::memory_order_relaxed) == std::this_thread::get_id()) return false; // nested
    uint32_t wanted = kHandoffWanted;
    if (!handoff_.compare_exchange_strong(wanted, kSuccessorWaiting, std::memory_order_acq_rel,
                                          std::memory_order_relaxed))
        return false; // withdrawn, or another publisher committed first
    // Committed: the deliverer hands over at its next run boundary. Only hand_over() moves
    // role_ to kHandedOff, and only for us.
    for (;;) {
        role_waiters_.fetch_add(1, std::memory_order_seq_cst);
        const uint32_t r = role_.load(std::memory_order_seq_cst);
        if (r != kHandedOff) role_.wait(r, std::memory_order_seq_cst);
        role_waiters_.fetch_sub(1, std::memory_order_relaxed);
        if (role_.load(std::memory_order_acquire) == kHandedOff) break;
    }
    holder_.store(std::this_thread::get_id(), std::memory_order_relaxed);
    role_.store(kDraining, std::memory_order_relaxed);
    return true;
}

void EventLog::hand_over() noexcept {
    handoff_.store(kNoHandoff, std::memory_order_relaxed); // published by the release below
    holder_.store(std::thread::id{}, std::memory_order_relaxed);
    role_.store(kHandedOff, std::memory_order_release);
    role_.notify_all(); // the successor sleeps (or is about to): always wake
}

void EventLog::queue_run(uint64_t start, size_t n) noexcept {
    uint64_t reg = 0, cleared = 0;
    for (size_t k = 0; k < n; k++) {
        const uint8_t kind = slots_[(start + k) & kMask].kind;
        reg += kind == KVREG_EVENT_REGISTER;
        cleared += kind == KVREG_EVENT_CLEARED;
    }
    const size_t queued = queue_.push_each(
        n, [this, start](size_t k, kvreg_event &e) noexcept { slots_[(start + k) & kMask].expand(start + k, e); });
    tally(n, reg, cleared, n - queued);
}

void EventLog::dispatch(const kvreg_event *ev, size_t n) noexcept {
    uint64_t reg = 0, cleared = 0;
    for (size_t i = 0; i < n; i++) {
        reg += ev[i].kind == KVREG_EVENT_REGISTER;
        cleared += ev[i].kind == KVREG_EVENT_CLEARED;
    }
    uint64_t dropped = 0;
    if (kvreg_event_fn fn = cb_.fn()) {
        role_.store(kCalling, std::memory_order_release);
        fn(ev, n, cb_.user_data());
        role_.store(kDraining, std::memory_order_relaxed);
    } else {
        dropped = n; // no callback
    }
    tally(n, reg, cleared, dropped);
}

void EventLog::tally(uint64_t n, uint64_t reg, uint64_t cleared, uint64_t dropped) noexcept {
    // Only the role holder writes these: load + store is enough.
    auto bump = [](std::atomic<uint64_t> &a, uint64_t by) {
        a.store(a.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
    };
    bump(registers_, reg);
    bump(removes_, n - reg - cleared);
    bump(cleared_, cleared);
    bump(dropped_, dropped);
}

bool EventLog::deliver_as_holder(uint64_t owed) noexcept {
    LocalRun local; // left uninitialised: copy_run writes what it hands out
    for (;;) {
        // Step 6: a run boundary, so the old callback is not running.
        if (swap_.load(std::memory_order_acquire) == kSwapWanted) install_pending_fn();
        if (!spilled_.empty()) {
            // Spilled events come before everything still in the ring.
            EventCopies s = std::move(spilled_.front());
            spilled_.pop_front();
            s.token_ptrs();
            dispatch(s.events.data(), s.size());
            advance_delivered(s.events.back().event_id + 1);
            continue;
        }
        // Step 5: past our debt (and past every event our callbacks caused, which this thread
        // promised to deliver), hand over to a committed successor, or ask for one.
        if (ring_cursor_ >= owed + kHandoffSlack && ring_cursor_ >= nested_end_) {
            const uint32_t h = handoff_.load(std::memory_order_acquire);
            if (h == kSuccessorWaiting) {
                hand_over();
                return true;
            }
            if (h == kNoHandoff) handoff_.store(kHandoffWanted, std::memory_order_release); // only we move it from kNoHandoff
        }
        const uint64_t start = ring_cursor_;
        // The run: the published events from the cursor, up to the first id not yet published
        // (step 3).
        size_t n = 0;
        while (n < kRun && published(start + n)) n++;
        if (n == 0) {
            if (start >= nested_end_) {
                // Nothing left: withdraw the offer, unless a successor committed already.
                uint32_t h = kHandoffWanted;
                if (handoff_.load(std::memory_order_relaxed) == kNoHandoff ||
                    handoff_.compare_exchange_strong(h, kNoHandoff, std::memory_order_acq_rel,
                                                     std::memory_order_acquire))
                    return false;
                hand_over(); // h == kSuccessorWaiting
                return true;
            }
            // Events our callback caused are still ahead, behind an id another thread is
            // publishing right now (it holds a shard lock): wait for it, so that they are
            // delivered by this thread, as promised.
            wait_published(start);
            continue;
        }
        ring_cursor_ = start + n; // before the callback: a nested spill starts after this run
        if (poll_mode_) {
            // No callback to wait for: the queue copies the run straight out of the ring.
            queue_run(start, n);
            ring_free_.store(start + n, std::memory_order_release);
            give_credits(n);
            advance_delivered(start + n);
        } else if (const kvreg_event *run = copy_run(start, n, local)) {
            // The run's slots are free while the callback runs: producers keep going, and a
            // nested spill frees exactly the oldest slots (the credit count stays exact).
            ring_free_.store(start + n, std::memory_order_release);
            give_credits(n);
            dispatch(run, n);
            advance_delivered(start + n);
        } else {
            // Out of memory for the run's tokens: deliver from the ring, one event per call
            // (slots are not contiguous events), keeping the slots until the callbacks return
            // (spill refuses meanwhile).
            run_in_ring_ = true;
            for (size_t k = 0; k < n; k++) {
                kvreg_event e;
                slots_[(start + k) & kMask].expand(start + k, e);
                dispatch(&e, 1);
            }
            run_in_ring_ = false;
            advance_delivered(start + n);
            ring_free_.store(start + n, std::memory_order_release);
            give_credits(n);
        }
    }
}

const kvreg_event *EventLog::copy_run(uint64_t start, size_t n, LocalRun &local) noexcept {
    size_t total = 0;
    for (size_t k = 0; k < n; k++) total += slots_[(start + k) & kMask].n_tokens;
    kvreg_event *events = run_events_.get();
    uint32_t *tok = run_tokens_.get();
    if (n <= kLocalRun && total <= kLocalRun * kInlineTokens) {
        events = local.events;
        tok = local.tokens;
    } else if (total > run_token_cap_) {
        const size_t cap = std::max(total, 2 * run_token_cap_);
        uint32_t *grown = new (std::nothrow) uint32_t[cap];
        if (!grown) return nullptr;
        run_tokens_.reset(grown);
        run_token_cap_ = cap;
        tok = grown;
    }
    for (size_t k = 0; k < n; k++) {
        kvreg_event &e = events[k];
        slots_[(start + k) & kMask].expand(start + k, e);
        if (e.n_tokens) {
            copy_tokens(tok, e.tokens, e.n_tokens);
            e.tokens = tok;
            tok += e.n_tokens;
        }
    }
    return events;
}

void EventLog::wait_published(uint64_t id) const noexcept {
    for (unsigned spins = 0; !published(id); spins++) {
        if (spins < 64)
            cpu_relax();
        else
            std::this_thread::yield();
    }
}

int64_t EventLog::spill(uint32_t want) noexcept {
    if (run_in_ring_) return -1; // the run in the callback still holds its slots
    uint32_t freed = 0;
    try {
        while (freed < want && ring_cursor_ != next_id_.load(std::memory_order_acquire)) {
            const uint64_t id = ring_cursor_;
            // Taken, so its owner is inside its shard lock, about to publish: wait for it.
            wait_published(id);
            if (spilled_.empty() || spilled_.back().size() == kRun) {
                spilled_.emplace_back();
                spilled_.back().reserve(kRun);
            }
            kvreg_event e;
            slots_[id & kMask].expand(id, e);
            spilled_.back().push(e);
            ring_cursor_ = id + 1;
            freed++;
        }
    } catch (...) {
        if (!spilled_.empty() && spilled_.back().events.empty()) spilled_.pop_back();
        if (freed == 0) return -1;
    }
    ring_free_.store(ring_cursor_, std::memory_order_release);
    // The freed credits go straight to the caller: another thread cannot take them first.
    return freed;
}

int EventLog::set_fn(CallbackRef cb) noexcept {
    if (poll_mode_) return KVREG_EINVAL;
    if (in_callback()) return KVREG_EBUSY; // would wait for itself
    CallbackRef old;
    {
        std::lock_guard<std::mutex> one_setter(set_mu_);
        pending_cb_ = std::move(cb);
        swap_.store(kSwapWanted, std::memory_order_seq_cst); // step 6
        bool holding = false;
        for (;;) {
            std::atomic_thread_fence(std::memory_order_seq_cst); // pairs with release_role()'s
            if (try_take_role()) {
                holding = true;
                break;
            }
            uint32_t s = swap_.load(std::memory_order_acquire);
            if (s == kSwapDone) break;
            if (s == kSwapRoleFree) {
                // Ask again and try the role again, unless a holder installed it meanwhile: a
                // thread letting go can move kSwapWanted to kSwapRoleFree late, while the next
                // holder is installing; a plain store here then overwrote that install's
                // kSwapDone, and the callback was swapped back (a review found it).
                swap_.compare_exchange_strong(s, kSwapWanted, std::memory_order_seq_cst, std::memory_order_acquire);
                continue;
            }
            swap_.wait(kSwapWanted, std::memory_order_acquire);
        }
        // Holding the role, nobody else can install it: do it here, unless the holder before
        // us did it just before it let go (kSwapWanted or kSwapRoleFree: not installed yet).
        if (holding && swap_.load(std::memory_order_acquire) != kSwapDone) std::swap(cb_, pending_cb_);
        swap_.store(kNoSwap, std::memory_order_relaxed); // before release_role(): it looks at swap_
        old = std::move(pending_cb_);
        if (holding) {
            release_role();
            deliver(); // publishers who found us holding the role left their events to us
        }
    }
    old.reset(); // the old callback's reference: destroy runs here if nobody else shares it
    return KVREG_OK;
}

int EventLog::flush() noexcept {
    if (in_callback()) return KVREG_EBUSY;
    const uint64_t target = next_id_.load(std::memory_order_seq_cst);
    for (;;) {
        deliver(); // help: deliver what is published if nobody else is
        if (delivered_.load(std::memory_order_acquire) >= target) return KVREG_OK;
        // Someone is delivering, or an id before target is still being published by its
        // owner, who delivers it when its call ends. Sleep until delivered_ moves.
        flush_waiters_.fetch_add(1, std::memory_order_seq_cst);
        const uint64_t d = delivered_.load(std::memory_order_seq_cst);
        if (d < target) delivered_.wait(d, std::memory_order_acquire);
        flush_waiters_.fetch_sub(1, std::memory_order_relaxed);
    }
}

int EventLog::poll(kvreg_event *out, size_t cap, size_t *n) noexcept {
    if (!poll_mode_) return KVREG_EINVAL;
    return queue_.take(out, cap, n, false);
}

int EventLog::poll_wait(kvreg_event *out, size_t cap, size_t *n, int timeout_ms) noexcept {
    if (poll_mode_ && queue_.claimed()) return KVREG_EBUSY; // do not sleep for nothing
    return wait_and_take(out, cap, n, timeout_ms, false); // EBUSY if a publisher claims meanwhile
}

int EventLog::owner_poll_wait(kvreg_event *out, size_t cap, size_t *n, int timeout_ms) noexcept {
    return wait_and_take(out, cap, n, timeout_ms, true);
}

int EventLog::wait_and_take(kvreg_event *out, size_t cap, size_t *n, int timeout_ms, bool owner) noexcept {
    if (!poll_mode_) return KVREG_EINVAL;
    if (timeout_ms != 0) queue_.wait_for_events(timeout_ms); // returns at once when events are queued
    return queue_.take(out, cap, n, owner);
}

void EventLog::wakeup() noexcept { queue_.wakeup(); }

// ----------------------------------------------------------------------------- EventBatch

EventBatch::EventBatch(EventLog &log, size_t expected) noexcept
    : log_(log), nested_(log.in_callback()),
      want_(static_cast<uint32_t>(std::clamp<size_t>(expected, 1, 64))) {}

EventBatch::~EventBatch() {
    if (credits_) log_.give_credits(credits_);
    credits_ = 0;
    flush();
}

bool EventBatch::take_credit() noexcept {
    if (credits_ == 0) credits_ = log_.take_credits(want_);
    return credits_ != 0;
}

bool EventBatch::wait_credit() noexcept {
    for (;;) {
        if (take_credit()) return true;
        if (nested_) {
            // Inside the callback: only this thread frees ring slots, so do not sleep.
            const int64_t got = log_.spill(want_);
            if (got < 0) return false;
            if (got > 0) {
                credits_ = static_cast<uint32_t>(got);
                return true;
            }
            std::this_thread::yield(); // other threads hold the credits; they publish or return them
            continue;
        }
        published_ = false;
        log_.deliver(); // ours and others': frees credits if nobody else is delivering
        if (take_credit()) return true;
        log_.credit_waiters_.fetch_add(1, std::memory_order_seq_cst);
        const int64_t c = log_.credits_.load(std::memory_order_seq_cst);
        if (c <= 0) log_.credits_.wait(c, std::memory_order_acquire);
        log_.credit_waiters_.fetch_sub(1, std::memory_order_relaxed);
    }
}

void EventBatch::add_as(uint64_t id, uint32_t kind, uint32_t pool, uint32_t medium, uint64_t seq, uint64_t block,
                        uint64_t parent, bool has_parent, const uint32_t *tokens, uint32_t n_tokens) noexcept {
    const size_t i = id & EventLog::kMask;
    EventLog::Slot &slot = log_.slots_[i];
#ifndef NDEBUG
    // The credit we hold means the slot's previous event, one lap back, has left the ring
    // (ring_free_ advances before the credits of a run are given back). Checked in debug
    // builds; the acquire load also hands ThreadSanitizer that ordering directly.
    assert(id < EventLog::kRingSize ||
           log_.ring_free_.load(std::memory_order_acquire) > id - EventLog::kRingSize);
#endif
    if (!tokens) n_tokens = 0;
    if (n_tokens > EventLog::kInlineTokens && n_tokens > slot.token_cap) {
        if (spare_cap_ >= n_tokens) {
            slot.big = std::move(spare_);
            slot.tokens = slot.big.get();
            slot.token_cap = spare_cap_;
            spare_cap_ = 0;
        } else {
            n_tokens = 0; // see reserve_tokens(): the event goes out without its tokens
        }
    }
    if (n_tokens)
        EventLog::copy_tokens(n_tokens <= EventLog::kInlineTokens ? slot.inline_tokens : slot.tokens, tokens, n_tokens);
    slot.kind = static_cast<uint8_t>(kind);
    slot.pool_id = pool;
    slot.sequence_hash = seq;
    slot.block_hash = block;
    slot.parent_sequence_hash = has_parent ? parent : 0;
    slot.has_parent = has_parent ? 1 : 0;
    slot.n_tokens = n_tokens;
    slot.medium = static_cast<uint8_t>(medium);
    slot.stamp.store(id + 1, std::memory_order_release); // published
    published_ = true;
    if (nested_) log_.nested_end_ = id + 1; // this thread holds the role: see deliver_as_holder
}

bool EventBatch::reserve_tokens(uint32_t n) noexcept {
    if (n <= EventLog::kArenaTokens || spare_cap_ >= n) return true;
    spare_.reset(new (std::nothrow) uint32_t[n]);
    spare_cap_ = spare_ ? n : 0;
    return spare_ != nullptr;
}

void EventBatch::flush() noexcept {
    if (nested_ || !published_) return; // nested: the delivering loop picks our events up
    published_ = false;
    log_.deliver();
}

} // namespace kvreg
