// Shared ownership of an event callback's user_data.
//
// A config can build several registries, and each keeps using the callback it was built with,
// so user_data has several owners: the config and every registry made from it. Each holds one
// reference; `destroy(user_data)` runs exactly once, when the last reference is dropped (the
// config freed or given another callback, each registry freed or given another callback).
#pragma once

#include <atomic>
#include <cstdint>
#include <utility>

#include "kvreg.h"

namespace kvreg {

struct CallbackData {
    kvreg_event_fn fn;
    void *user_data;
    kvreg_destroy_fn destroy;
    std::atomic<uint32_t> refs{1};
};

// A counted reference to CallbackData (nullptr: no callback). Not thread-safe itself: each
// owner guards its own CallbackRef; the count is atomic because owners live on different threads.
class CallbackRef {
public:
    CallbackRef() noexcept = default;
    // Throws std::bad_alloc (then destroy is not called: the caller still owns user_data).
    // Called once the call can no longer fail otherwise: with fn NULL the library takes
    // user_data all the same, and as nothing will call it, destroy runs now (it once never ran).
    static CallbackRef make(kvreg_event_fn fn, void *ud, kvreg_destroy_fn destroy) {
        CallbackRef r;
        if (fn)
            r.d_ = new CallbackData{fn, ud, destroy};
        else if (destroy)
            destroy(ud);
        return r;
    }
    CallbackRef(const CallbackRef &o) noexcept : d_(o.d_) {
        if (d_) d_->refs.fetch_add(1, std::memory_order_relaxed);
    }
    CallbackRef(CallbackRef &&o) noexcept : d_(std::exchange(o.d_, nullptr)) {}
    CallbackRef &operator=(CallbackRef o) noexcept {
        std::swap(d_, o.d_);
        return *this;
    }
    ~CallbackRef() { reset(); }

    void reset() noexcept {
        CallbackData *d = std::exchange(d_, nullptr);
        if (d && d->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            if (d->destroy) d->destroy(d->user_data);
            delete d;
        }
    }
    kvreg_event_fn fn() const noexcept { return d_ ? d_->fn : nullptr; }
    void *user_data() const noexcept { return d_ ? d_->user_data : nullptr; }

private:
    CallbackData *d_ = nullptr;
};

} // namespace kvreg
