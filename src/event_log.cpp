#include "event_log.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace kvreg {

// ------------------------------------------------------------------------------- EventLog

EventLog::~EventLog() {
    if (destroy_) destroy_(ud_);
}

void EventLog::set_initial_fn(kvreg_event_fn fn, void *ud, kvreg_destroy_fn destroy) noexcept {
    fn_ = fn;
    ud_ = ud;
    destroy_ = destroy;
}

int EventLog::set_fn(kvreg_event_fn fn, void *ud, kvreg_destroy_fn destroy) noexcept {
    if (poll_mode_) return KVREG_EINVAL;
    if (in_callback()) return KVREG_EBUSY; // would wait for itself
    kvreg_destroy_fn old_destroy;
    void *old_ud;
    {
        std::unique_lock<std::mutex> lk(fn_mu_);
        fn_idle_.wait(lk, [this] { return !calling_; });
        old_destroy = destroy_;
        old_ud = ud_;
        fn_ = fn;
        ud_ = ud;
        destroy_ = destroy;
    }
    if (old_destroy) old_destroy(old_ud);
    return KVREG_OK;
}

void EventLog::wait_turn(uint64_t id) noexcept {
    // Spin briefly (the thread ahead of us is usually just finishing a callback), then sleep.
    for (int i = 0; i < 4096; i++) {
        if (delivered_.load(std::memory_order_acquire) == id) return;
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
    std::unique_lock<std::mutex> lk(turn_mu_);
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    turn_cv_.wait(lk, [&] { return delivered_.load(std::memory_order_seq_cst) == id; });
    sleepers_.fetch_sub(1, std::memory_order_relaxed);
}

void EventLog::end_turn(uint64_t next) noexcept {
    delivered_.store(next, std::memory_order_seq_cst);
    // seq_cst on both sides: either the sleeper sees the new value before sleeping, or we see
    // its registration here and wake it (taking the mutex orders us after its predicate check).
    if (sleepers_.load(std::memory_order_seq_cst) > 0) {
        { std::lock_guard<std::mutex> lk(turn_mu_); }
        turn_cv_.notify_all();
    }
}

void EventLog::count(const kvreg_event *events, size_t n, bool dropped) noexcept {
    // Only the thread holding the turn writes these, so load + store is enough.
    uint64_t reg = 0;
    for (size_t i = 0; i < n; i++) reg += events[i].kind == KVREG_EVENT_REGISTER;
    registers_.store(registers_.load(std::memory_order_relaxed) + reg, std::memory_order_relaxed);
    removes_.store(removes_.load(std::memory_order_relaxed) + (n - reg), std::memory_order_relaxed);
    if (dropped) dropped_.store(dropped_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

void EventLog::dispatch(kvreg_event *events, size_t n, EventBatch *owner) noexcept {
    if (poll_mode_) {
        std::lock_guard<std::mutex> lk(queue_mu_);
        size_t i = 0;
        try {
            for (; i < n && queue_.size() - head_ < capacity_; i++) {
                const kvreg_event &e = events[i];
                queue_token_off_.push_back(queue_tokens_.size());
                try {
                    if (e.n_tokens) queue_tokens_.insert(queue_tokens_.end(), e.tokens, e.tokens + e.n_tokens);
                    queue_.push_back(e);
                } catch (...) {
                    queue_token_off_.pop_back();
                    throw;
                }
            }
        } catch (...) {
            // out of memory: like a full queue, the rest is dropped and counted
        }
        count(events, i, false);
        if (i < n) count(events + i, n - i, true);
        if (i > 0) queue_cv_.notify_all();
        return;
    }
    kvreg_event_fn fn;
    void *ud;
    {
        std::lock_guard<std::mutex> lk(fn_mu_);
        fn = fn_;
        ud = ud_;
        calling_ = fn != nullptr;
        if (fn) {
            delivering_batch_ = owner;
            deliverer_.store(std::this_thread::get_id(), std::memory_order_release);
        }
    }
    if (!fn) {
        count(events, n, true);
        return;
    }
    fn(events, n, ud);
    {
        std::lock_guard<std::mutex> lk(fn_mu_);
        calling_ = false;
        delivering_batch_ = nullptr;
        deliverer_.store(std::thread::id{}, std::memory_order_release);
    }
    fn_idle_.notify_all();
    count(events, n, false);
}

int EventLog::poll(kvreg_event *out, size_t cap, size_t *n_out) noexcept {
    if (!poll_mode_) return KVREG_EINVAL;
    std::lock_guard<std::mutex> lk(queue_mu_);
    const size_t n = std::min(cap, queue_.size() - head_);
    if (n == 0) {
        *n_out = 0;
        return KVREG_OK;
    }
    const size_t end = head_ + n;
    const size_t tok_begin = queue_token_off_[head_];
    const size_t tok_end = end < queue_.size() ? queue_token_off_[end] : queue_tokens_.size();
    try {
        polled_tokens_.resize(tok_end - tok_begin);
    } catch (...) {
        return KVREG_ENOMEM; // nothing consumed
    }
    if (tok_end > tok_begin)
        std::memcpy(polled_tokens_.data(), queue_tokens_.data() + tok_begin,
                    (tok_end - tok_begin) * sizeof(uint32_t));
    for (size_t i = 0; i < n; i++) {
        out[i] = queue_[head_ + i];
        out[i].tokens = out[i].n_tokens ? polled_tokens_.data() + (queue_token_off_[head_ + i] - tok_begin) : nullptr;
    }
    head_ = end;
    if (head_ == queue_.size()) {
        queue_.clear();
        queue_tokens_.clear();
        queue_token_off_.clear();
        head_ = 0;
    } else if (head_ >= 1024 && head_ * 2 >= queue_.size()) {
        // A lagging consumer: drop the consumed front once it is most of the buffer.
        const size_t tok_head = queue_token_off_[head_];
        queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(head_));
        queue_token_off_.erase(queue_token_off_.begin(), queue_token_off_.begin() + static_cast<std::ptrdiff_t>(head_));
        queue_tokens_.erase(queue_tokens_.begin(), queue_tokens_.begin() + static_cast<std::ptrdiff_t>(tok_head));
        for (auto &o : queue_token_off_) o -= tok_head;
        head_ = 0;
    }
    *n_out = n;
    return KVREG_OK;
}

int EventLog::poll_wait(kvreg_event *out, size_t cap, size_t *n, int timeout_ms) noexcept {
    if (!poll_mode_) return KVREG_EINVAL;
    {
        std::unique_lock<std::mutex> lk(queue_mu_);
        auto ready = [&] { return queue_.size() > head_ || wake_pending_; };
        if (timeout_ms < 0)
            queue_cv_.wait(lk, ready);
        else if (timeout_ms > 0)
            queue_cv_.wait_for(lk, std::chrono::milliseconds(timeout_ms), ready);
        wake_pending_ = false;
    }
    return poll(out, cap, n);
}

void EventLog::wakeup() noexcept {
    {
        std::lock_guard<std::mutex> lk(queue_mu_);
        wake_pending_ = true;
    }
    queue_cv_.notify_all();
}

int EventLog::flush() noexcept {
    if (in_callback()) return KVREG_EBUSY;
    const uint64_t target = next_id_.load(std::memory_order_acquire);
    while (delivered_.load(std::memory_order_acquire) < target) std::this_thread::yield();
    return KVREG_OK;
}

uint64_t EventLog::stat_queued() const noexcept {
    std::lock_guard<std::mutex> lk(queue_mu_);
    return queue_.size() - head_;
}

// ----------------------------------------------------------------------------- EventBatch

EventBatch::EventBatch(EventLog &log) noexcept
    : log_(log), is_nested_(log.in_callback()), outer_(is_nested_ ? log.delivering_batch_ : nullptr) {
    hold_sequencer();
}

size_t EventBatch::room() const noexcept {
    if (is_nested_) return outer_->nested_events_.capacity() - outer_->nested_events_.size();
    const size_t cap = heap_.empty() ? kInline : heap_.capacity();
    return std::min(cap, kMaxChunk) > n_ ? std::min(cap, kMaxChunk) - n_ : 0;
}

void EventBatch::prepare(size_t k) {
    if (is_nested_) {
        std::vector<kvreg_event> &v = outer_->nested_events_;
        if (v.capacity() - v.size() < k) v.reserve(std::max(v.size() + k, 2 * v.capacity()));
        return;
    }
    if (n_ + k > kMaxChunk) flush(); // bound the memory of huge calls: deliver in chunks
    hold_sequencer();                // (again, after a flush)
    if (n_ + k <= kInline && heap_.empty()) return;
    if (heap_.empty()) {
        // Moving from inline_ to heap_ (again, after a chunk was delivered: heap_ keeps its
        // capacity, so usually without allocating).
        if (heap_.capacity() < n_ + k) heap_.reserve(std::max(n_ + k, 2 * kInline)); // may throw
        heap_.assign(inline_, inline_ + n_);
    } else if (heap_.capacity() < n_ + k) {
        heap_.reserve(std::max(n_ + k, 2 * heap_.capacity())); // may throw; contents kept
    }
}

bool EventBatch::make_room() noexcept {
    if (room() > 0) return true;
    try {
        prepare(64); // grows (up to a chunk) so a pool's Removes stay in one callback
        if (room() > 0) return true;
    } catch (...) {
    }
    if (is_nested_) return false;
    flush(); // out of memory, or a full chunk: deliver, which empties the inline buffer
    hold_sequencer();
    return true;
}

void EventBatch::add(uint32_t kind, uint32_t pool, uint64_t seq, uint64_t block, uint64_t parent,
                     bool has_parent, const uint32_t *tokens, uint32_t n_tokens, bool copy) {
    kvreg_event e;
    std::memset(&e, 0, sizeof e);
    e.kind = kind;
    e.pool_id = pool;
    e.sequence_hash = seq;
    e.block_hash = block;
    e.has_parent = has_parent ? 1 : 0;
    e.parent_sequence_hash = has_parent ? parent : 0;
    e.n_tokens = tokens ? n_tokens : 0;
    e.tokens = e.n_tokens ? tokens : nullptr;
    if (e.n_tokens && (copy || is_nested_)) {
        std::vector<uint32_t> &arena = is_nested_ ? outer_->nested_copied_ : copied_;
        const size_t off = arena.size();
        arena.insert(arena.end(), tokens, tokens + n_tokens); // may throw: nothing taken yet
        e.tokens = nullptr;
        e.reserved[0] = off + 1;
    }
    e.event_id = log_.take_id(); // from here on the event must be delivered
    if (is_nested_) {
        outer_->nested_events_.push_back(e); // capacity reserved by prepare()
    } else if (heap_.empty()) {
        inline_[n_++] = e;
    } else {
        heap_.push_back(e);
        n_++;
    }
}

// Point copied events at their tokens (the arena no longer moves) and clear the marker.
static void resolve_copied(kvreg_event *ev, size_t n, const std::vector<uint32_t> &arena) noexcept {
    for (size_t i = 0; i < n; i++) {
        if (ev[i].reserved[0]) {
            ev[i].tokens = arena.data() + (ev[i].reserved[0] - 1);
            ev[i].reserved[0] = 0;
        }
    }
}

void EventBatch::deliver_runs(kvreg_event *ev, size_t n) noexcept {
    size_t i = 0;
    while (i < n) {
        size_t j = i + 1;
        while (j < n && ev[j].event_id == ev[j - 1].event_id + 1) j++;
        log_.wait_turn(ev[i].event_id);
        log_.dispatch(ev + i, j - i, this);
        log_.end_turn(ev[j - 1].event_id + 1);
        i = j;
    }
}

void EventBatch::deliver_nested() noexcept {
    // Events our callbacks caused have larger ids than everything this call recorded earlier,
    // and they may cause more: deliver them round by round.
    while (!nested_events_.empty()) {
        std::vector<kvreg_event> mine;
        std::vector<uint32_t> tokens;
        mine.swap(nested_events_);
        tokens.swap(nested_copied_);
        resolve_copied(mine.data(), mine.size(), tokens);
        deliver_runs(mine.data(), mine.size());
    }
}

void EventBatch::flush() noexcept {
    if (is_nested_ || n_ == 0) return; // nested events are delivered by the outer batch
    release_sequencer(); // never wait for our turn while other calls wait for the sequencer
    kvreg_event *ev = events();
    resolve_copied(ev, n_, copied_);
    deliver_runs(ev, n_);
    n_ = 0;
    heap_.clear();
    copied_.clear();
    deliver_nested();
}

} // namespace kvreg
