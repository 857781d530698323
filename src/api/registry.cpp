// C entry points for kvreg_registry.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>

#include "api/guard.hpp"
#include "api/internal.hpp"
#include "core/snapshot.hpp"

extern "C" {

KVREG_API int kvreg_registry_new(kvreg_registry **out, const kvreg_config *cfg) noexcept {
    if (!out) return KVREG_EINVAL;
    const kvreg::Options defaults;
    const kvreg::Options &opt = cfg ? kvreg::options_of(cfg) : defaults;
    if (opt.poll_mode && opt.callback.fn()) return KVREG_EINVAL; // a callback makes no sense in POLL mode
    KVREG_GUARD_BEGIN
    *out = new kvreg_registry(opt);
    return KVREG_OK;
    } catch (const std::length_error &) {
        return KVREG_EINVAL; // KVREG_OPT_RESERVE_BLOCKS more than these shards hold
    KVREG_GUARD_END
}

KVREG_API void kvreg_registry_free(kvreg_registry *reg) noexcept {
    if (reg && reg->log.in_callback()) {
        // The callback's caller is a frame of this registry: freeing it now would return into
        // freed memory. Fail loudly instead of corrupting memory silently.
        std::fputs("libkvreg: kvreg_registry_free called from the registry's own event callback; aborting\n",
                   stderr);
        std::abort();
    }
    delete reg;
}

KVREG_API int kvreg_registry_set_event_fn(kvreg_registry *reg, kvreg_event_fn fn, void *user_data,
                                          kvreg_destroy_fn destroy) noexcept {
    if (!reg) return KVREG_EINVAL;
    // Refusals come before the reference is made: on failure the caller keeps user_data.
    if (reg->log.poll_mode()) return KVREG_EINVAL;
    if (reg->log.in_callback()) return KVREG_EBUSY;
    KVREG_GUARD_BEGIN
    return reg->log.set_fn(kvreg::CallbackRef::make(fn, user_data, destroy));
    KVREG_GUARD_END
}

KVREG_API int kvreg_registry_poll(kvreg_registry *reg, kvreg_event *out, size_t cap,
                                  size_t *n_events) noexcept {
    if (!reg || !n_events || (!out && cap > 0)) return KVREG_EINVAL;
    return reg->log.poll(out, cap, n_events);
}

KVREG_API int kvreg_registry_poll_wait(kvreg_registry *reg, kvreg_event *out, size_t cap,
                                       size_t *n_events, int timeout_ms) noexcept {
    if (!reg || !n_events || (!out && cap > 0) || timeout_ms < -1) return KVREG_EINVAL;
    return reg->log.poll_wait(out, cap, n_events, timeout_ms);
}

KVREG_API int kvreg_registry_wakeup(kvreg_registry *reg) noexcept {
    if (!reg) return KVREG_EINVAL;
    reg->log.wakeup();
    return KVREG_OK;
}

KVREG_API int kvreg_registry_flush(kvreg_registry *reg) noexcept {
    if (!reg) return KVREG_EINVAL;
    return reg->log.flush();
}

KVREG_API int kvreg_registry_clear(kvreg_registry *reg) noexcept {
    if (!reg) return KVREG_EINVAL;
    return reg->clear();
}

KVREG_API int kvreg_registry_snapshot(kvreg_registry *reg, kvreg_snapshot **out) noexcept {
    if (!reg || !out) return KVREG_EINVAL;
    KVREG_GUARD_BEGIN
    std::unique_ptr<kvreg_snapshot> snap(new kvreg_snapshot());
    reg->snapshot(snap->events, &snap->position);
    kvreg::order_parents_first(snap->events); // outside the locks
    *out = snap.release();
    return KVREG_OK;
    KVREG_GUARD_END
}

KVREG_API void kvreg_snapshot_free(kvreg_snapshot *snap) noexcept { delete snap; }

KVREG_API uint64_t kvreg_snapshot_position(const kvreg_snapshot *snap) noexcept {
    return snap ? snap->position : 0;
}

KVREG_API int kvreg_snapshot_events(const kvreg_snapshot *snap, const kvreg_event **events,
                                    size_t *n_events) noexcept {
    if (!snap || !events || !n_events) return KVREG_EINVAL;
    *events = snap->events.events.data(); // NULL or not when empty: n_events says
    *n_events = snap->events.size();
    return KVREG_OK;
}

KVREG_API int kvreg_registry_contains(const kvreg_registry *reg, uint64_t sequence_hash,
                                      int *present) noexcept {
    if (!reg || !present) return KVREG_EINVAL;
    // Queries lock shards; the registry is logically const to the caller.
    *present = const_cast<kvreg_registry *>(reg)->contains(sequence_hash) ? 1 : 0;
    return KVREG_OK;
}

KVREG_API int kvreg_registry_stat(const kvreg_registry *creg, uint32_t stat, uint64_t *value) noexcept {
    if (!creg || !value) return KVREG_EINVAL;
    kvreg_registry *reg = const_cast<kvreg_registry *>(creg);
    switch (stat) {
    case KVREG_STAT_HASHES: *value = reg->hash_count(); return KVREG_OK;
    case KVREG_STAT_POOLS: *value = reg->live_pools(); return KVREG_OK;
    case KVREG_STAT_EVENTS_REGISTER: *value = reg->log.stat_registers(); return KVREG_OK;
    case KVREG_STAT_EVENTS_REMOVE: *value = reg->log.stat_removes(); return KVREG_OK;
    case KVREG_STAT_EVENTS_DROPPED: *value = reg->log.stat_dropped(); return KVREG_OK;
    case KVREG_STAT_EVENTS_QUEUED: *value = reg->log.stat_queued(); return KVREG_OK;
    case KVREG_STAT_NEXT_EVENT_ID: *value = reg->log.stat_next_id(); return KVREG_OK;
    case KVREG_STAT_TOKEN_BYTES: *value = reg->token_bytes(); return KVREG_OK;
    case KVREG_STAT_EVENTS_CLEARED: *value = reg->log.stat_cleared(); return KVREG_OK;
    default: return KVREG_EINVAL;
    }
}

} // extern "C"

extern "C" KVREG_API int kvreg_registry_get(const kvreg_registry *reg, uint32_t option, uint64_t *value) noexcept {
    return reg ? kvreg::option_value(reg->settings, option, value) : KVREG_EINVAL;
}
