#include "event_log.hpp"

#include <algorithm>
#include <cstring>

namespace kvreg {

EventLog::~EventLog() {
    if (destroy_) destroy_(ud_);
}

void EventLog::set_initial_fn(kvreg_event_fn fn, void *ud, kvreg_destroy_fn destroy) noexcept {
    fn_ = fn;
    ud_ = ud;
    destroy_ = destroy;
}

void EventLog::append(const EventData &e, const uint32_t *tokens, uint32_t n_tokens) {
    std::lock_guard<std::mutex> lk(mu_);
    const bool deliverable = poll_mode_ ? (queue_.size() - head_) < capacity_ : fn_ != nullptr;
    if (deliverable) {
        // Strong guarantee: if either push throws, nothing was appended and no id consumed.
        const size_t off = tokens_.size();
        if (n_tokens) tokens_.insert(tokens_.end(), tokens, tokens + n_tokens);
        try {
            queue_.push_back(Queued{e, next_id_, std::this_thread::get_id(), off, n_tokens});
        } catch (...) {
            tokens_.resize(off);
            throw;
        }
    } else {
        dropped_++;
    }
    next_id_++;
    (e.kind == KVREG_EVENT_REGISTER ? registers_ : removes_)++;
}

void EventLog::append_or_drop(const EventData &e, const uint32_t *tokens, uint32_t n_tokens) noexcept {
    try {
        append(e, tokens, n_tokens);
    } catch (...) {
        std::lock_guard<std::mutex> lk(mu_);
        dropped_++;
        next_id_++;
        (e.kind == KVREG_EVENT_REGISTER ? registers_ : removes_)++;
    }
}

bool EventLog::owns_queued_locked(std::thread::id me) const noexcept {
    for (size_t i = head_; i < queue_.size(); i++)
        if (queue_[i].owner == me) return true;
    return false;
}

void EventLog::compact_locked() noexcept {
    if (head_ == queue_.size()) {
        queue_.clear();
        tokens_.clear();
        head_ = tokens_head_ = 0;
        return;
    }
    // A lagging poll consumer: drop the consumed front once it is most of the buffer.
    if (head_ >= 1024 && head_ * 2 >= queue_.size()) {
        queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(head_));
        head_ = 0;
        tokens_.erase(tokens_.begin(), tokens_.begin() + static_cast<std::ptrdiff_t>(tokens_head_));
        for (auto &q : queue_) q.token_off -= tokens_head_;
        tokens_head_ = 0;
    }
}

static void fill_event(kvreg_event *out, const EventData &d, uint64_t id, const uint32_t *tokens,
                       uint32_t n_tokens) noexcept {
    std::memset(out, 0, sizeof *out);
    out->kind = d.kind;
    out->pool_id = d.pool;
    out->event_id = id;
    out->sequence_hash = d.seq;
    out->block_hash = d.block;
    out->has_parent = d.has_parent ? 1 : 0;
    out->parent_sequence_hash = d.has_parent ? d.parent : 0;
    out->n_tokens = n_tokens;
    out->tokens = n_tokens ? tokens : nullptr;
}

void EventLog::deliver_mine() noexcept {
    if (poll_mode_) return;
    const std::thread::id me = std::this_thread::get_id();
    std::unique_lock<std::mutex> lk(mu_);
    if (delivering_ && deliverer_ == me) return; // nested: the outer delivery loop takes them
    while (owns_queued_locked(me)) {
        if (delivering_ || queue_[head_].owner != me) {
            turn_.wait(lk); // an earlier event belongs to another thread: let it go first
            continue;
        }
        delivering_ = true;
        deliverer_ = me;
        size_t end = head_;
        while (end < queue_.size() && queue_[end].owner == me) end++;
        size_t n = end - head_;
        const size_t tok_begin = queue_[head_].token_off;
        const size_t tok_end = end < queue_.size() ? queue_[end].token_off : tokens_.size();
        bool whole_run = true;
        try {
            // The scratch buffers belong to the delivering thread; their capacity is kept, so
            // steady-state delivery allocates nothing.
            scratch_events_.resize(n);
            scratch_tokens_.resize(tok_end - tok_begin);
        } catch (...) {
            whole_run = false;
        }
        kvreg_event single;
        const kvreg_event *events = scratch_events_.data();
        if (whole_run) {
            if (tok_end > tok_begin)
                std::memcpy(scratch_tokens_.data(), tokens_.data() + tok_begin,
                            (tok_end - tok_begin) * sizeof(uint32_t));
            for (size_t i = 0; i < n; i++) {
                const Queued &q = queue_[head_ + i];
                fill_event(&scratch_events_[i], q.data, q.id,
                           scratch_tokens_.data() + (q.token_off - tok_begin), q.n_tokens);
            }
        } else {
            // Out of memory for the scratch copy: deliver one event, without its tokens
            // ("not known"), rather than lose or reorder it.
            n = 1;
            fill_event(&single, queue_[head_].data, queue_[head_].id, nullptr, 0);
            events = &single;
        }
        const kvreg_event_fn fn = fn_;
        void *const ud = ud_;
        head_ += n;
        tokens_head_ = head_ < queue_.size() ? queue_[head_].token_off : tokens_.size();
        if (!fn) dropped_ += n; // the callback was cleared after these were appended
        compact_locked();
        lk.unlock();
        if (fn) fn(events, n, ud);
        lk.lock();
        delivering_ = false;
        turn_.notify_all();
    }
}

int EventLog::set_fn(kvreg_event_fn fn, void *ud, kvreg_destroy_fn destroy) noexcept {
    if (poll_mode_) return KVREG_EINVAL;
    const std::thread::id me = std::this_thread::get_id();
    kvreg_destroy_fn old_destroy;
    void *old_ud;
    {
        std::unique_lock<std::mutex> lk(mu_);
        if (delivering_ && deliverer_ == me) return KVREG_EBUSY;
        turn_.wait(lk, [this] { return !delivering_; });
        old_destroy = destroy_;
        old_ud = ud_;
        fn_ = fn;
        ud_ = ud;
        destroy_ = destroy;
    }
    if (old_destroy) old_destroy(old_ud);
    return KVREG_OK;
}

bool EventLog::in_callback() const noexcept {
    std::lock_guard<std::mutex> lk(mu_);
    return delivering_ && deliverer_ == std::this_thread::get_id();
}

int EventLog::poll(kvreg_event *out, size_t cap, size_t *n_out) noexcept {
    if (!poll_mode_) return KVREG_EINVAL;
    std::lock_guard<std::mutex> lk(mu_);
    const size_t n = std::min(cap, queue_.size() - head_);
    if (n == 0) {
        *n_out = 0;
        return KVREG_OK;
    }
    const size_t end = head_ + n;
    const size_t tok_begin = queue_[head_].token_off;
    const size_t tok_end = end < queue_.size() ? queue_[end].token_off : tokens_.size();
    try {
        polled_tokens_.resize(tok_end - tok_begin);
    } catch (...) {
        return KVREG_ENOMEM; // nothing consumed
    }
    if (tok_end > tok_begin)
        std::memcpy(polled_tokens_.data(), tokens_.data() + tok_begin,
                    (tok_end - tok_begin) * sizeof(uint32_t));
    for (size_t i = 0; i < n; i++) {
        const Queued &q = queue_[head_ + i];
        fill_event(&out[i], q.data, q.id, polled_tokens_.data() + (q.token_off - tok_begin), q.n_tokens);
    }
    head_ = end;
    tokens_head_ = tok_end;
    compact_locked();
    *n_out = n;
    return KVREG_OK;
}

uint64_t EventLog::stat_registers() const noexcept { std::lock_guard<std::mutex> lk(mu_); return registers_; }
uint64_t EventLog::stat_removes() const noexcept { std::lock_guard<std::mutex> lk(mu_); return removes_; }
uint64_t EventLog::stat_dropped() const noexcept { std::lock_guard<std::mutex> lk(mu_); return dropped_; }
uint64_t EventLog::stat_queued() const noexcept { std::lock_guard<std::mutex> lk(mu_); return queue_.size() - head_; }
uint64_t EventLog::stat_next_id() const noexcept { std::lock_guard<std::mutex> lk(mu_); return next_id_; }

} // namespace kvreg
