// C entry points for kvreg_config: options as (key, u64) pairs so adding one never breaks ABI.
#include "api/guard.hpp"
#include "api/internal.hpp"

struct kvreg_config {
    kvreg::Options opt;
};

namespace kvreg {
const Options &options_of(const kvreg_config *c) noexcept { return c->opt; }
} // namespace kvreg

extern "C" {

KVREG_API int kvreg_config_new(kvreg_config **out) noexcept {
    if (!out) return KVREG_EINVAL;
    KVREG_GUARD_BEGIN
    *out = new kvreg_config();
    return KVREG_OK;
    KVREG_GUARD_END
}

KVREG_API void kvreg_config_free(kvreg_config *cfg) noexcept { delete cfg; }

KVREG_API int kvreg_config_set(kvreg_config *cfg, uint32_t option, uint64_t value) noexcept {
    if (!cfg) return KVREG_EINVAL;
    kvreg::Options &o = cfg->opt;
    switch (option) {
    case KVREG_OPT_DELIVERY:
        if (value != KVREG_DELIVERY_INLINE && value != KVREG_DELIVERY_POLL) return KVREG_EINVAL;
        o.poll_mode = value == KVREG_DELIVERY_POLL;
        return KVREG_OK;
    case KVREG_OPT_KEEP_TOKENS:
        if (value > 1) return KVREG_EINVAL;
        o.keep_tokens = value == 1;
        return KVREG_OK;
    case KVREG_OPT_POLL_CAPACITY:
        // Checked against size_t too: on a 32-bit target 2^32 would wrap to 0.
        if (value < 1 || value > (UINT64_C(1) << 32) || value > SIZE_MAX) return KVREG_EINVAL;
        o.poll_capacity = value;
        return KVREG_OK;
    case KVREG_OPT_SHARDS:
        if (value < 1 || value > 4096 || (value & (value - 1)) != 0) return KVREG_EINVAL;
        o.shards = static_cast<uint32_t>(value);
        return KVREG_OK;
    case KVREG_OPT_RESERVE_BLOCKS:
        // The most any shard count holds; kvreg_registry_new checks it against this config's.
        if (value > uint64_t{4096} * kvreg::RecordSlab::kCapacity) return KVREG_EINVAL;
        o.reserve_blocks = value;
        return KVREG_OK;
    case KVREG_OPT_EVENT_MODE:
        if (value != KVREG_EVENTS_GLOBAL && value != KVREG_EVENTS_PER_TIER) return KVREG_EINVAL;
        o.per_tier_events = value == KVREG_EVENTS_PER_TIER;
        return KVREG_OK;
    default:
        return KVREG_EINVAL;
    }
}

KVREG_API int kvreg_config_set_event_fn(kvreg_config *cfg, kvreg_event_fn fn, void *user_data,
                                        kvreg_destroy_fn destroy) noexcept {
    if (!cfg) return KVREG_EINVAL;
    KVREG_GUARD_BEGIN
    // The config and every registry built from it share user_data: destroy runs once, when
    // the last of them lets go (callback.hpp).
    cfg->opt.callback = kvreg::CallbackRef::make(fn, user_data, destroy);
    return KVREG_OK;
    KVREG_GUARD_END
}

} // extern "C"

namespace kvreg {
// Shared by kvreg_config_get and kvreg_registry_get: an Options as the KVREG_OPT_* values.
int option_value(const Options &o, uint32_t option, uint64_t *value) noexcept {
    if (!value) return KVREG_EINVAL;
    switch (option) {
    case KVREG_OPT_DELIVERY: *value = o.poll_mode ? KVREG_DELIVERY_POLL : KVREG_DELIVERY_INLINE; return KVREG_OK;
    case KVREG_OPT_KEEP_TOKENS: *value = o.keep_tokens ? 1 : 0; return KVREG_OK;
    case KVREG_OPT_POLL_CAPACITY: *value = o.poll_capacity; return KVREG_OK;
    case KVREG_OPT_SHARDS: *value = o.shards; return KVREG_OK;
    case KVREG_OPT_RESERVE_BLOCKS: *value = o.reserve_blocks; return KVREG_OK;
    case KVREG_OPT_EVENT_MODE:
        *value = o.per_tier_events ? KVREG_EVENTS_PER_TIER : KVREG_EVENTS_GLOBAL;
        return KVREG_OK;
    default: return KVREG_EINVAL;
    }
}
} // namespace kvreg

extern "C" KVREG_API int kvreg_config_get(const kvreg_config *cfg, uint32_t option, uint64_t *value) noexcept {
    return cfg ? kvreg::option_value(cfg->opt, option, value) : KVREG_EINVAL;
}
