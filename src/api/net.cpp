// C entry points of kvreg_net.h. Without libzmq (KVREG_WITH_ZMQ unset) the same symbols exist
// and return KVREG_ENOTSUP, so programs link against either build.
#include "kvreg_net.h"

#include "api/guard.hpp"

#if defined(KVREG_WITH_ZMQ) && KVREG_WITH_ZMQ
#include "api/internal.hpp"
#include "api/string_out.hpp"
#include "api/user_data.hpp"
#include "net/endpoint.hpp"
#include "net/publisher.hpp"
#include "net/subscriber.hpp"

struct kvreg_publisher {
    // new() took the registry's events (KVREG_EBUSY if a publisher had them); declared before
    // impl, so they are given back after impl stopped polling them.
    explicit kvreg_publisher(kvreg_registry *reg) : events(reg), impl(reg) {}
    kvreg::TakenEvents events;
    kvreg::net::Publisher impl;
};
struct kvreg_subscriber {
    // Declared before impl so that they are destroyed after it: no callback can run then.
    kvreg::OwnedUserData batch_ud, notice_ud;
    kvreg::net::Subscriber impl;
};

extern "C" {

KVREG_API int kvreg_net_offset_endpoint(const char *endpoint, uint32_t rank, char *buf, size_t cap,
                                        size_t *len) noexcept {
    if (!endpoint || (!buf && cap > 0)) return KVREG_EINVAL;
    KVREG_GUARD_BEGIN
    std::string out;
    if (!kvreg::net::offset_endpoint(endpoint, rank, out)) return KVREG_EINVAL;
    return kvreg::net::copy_out(out, buf, cap, len);
    KVREG_GUARD_END
}

KVREG_API int kvreg_publisher_new(kvreg_publisher **out, kvreg_registry *reg) noexcept {
    if (!out || !reg || !reg->log.poll_mode()) return KVREG_EINVAL;
    if (!reg->log.take_events()) return KVREG_EBUSY;
    kvreg::TakenEvents taken(reg); // given back if what follows throws
    KVREG_GUARD_BEGIN
    *out = new kvreg_publisher(taken.release());
    return KVREG_OK;
    KVREG_GUARD_END
}

KVREG_API void kvreg_publisher_free(kvreg_publisher *pub) noexcept { delete pub; }

KVREG_API int kvreg_publisher_set(kvreg_publisher *pub, uint32_t option, uint64_t value) noexcept {
    return pub ? pub->impl.set(option, value) : KVREG_EINVAL;
}

KVREG_API int kvreg_publisher_set_string(kvreg_publisher *pub, uint32_t option, const char *value) noexcept {
    if (!pub) return KVREG_EINVAL;
    KVREG_GUARD_BEGIN
    return pub->impl.set_string(option, value);
    KVREG_GUARD_END
}

KVREG_API int kvreg_publisher_get(const kvreg_publisher *pub, uint32_t option, uint64_t *value) noexcept {
    if (!pub || !value) return KVREG_EINVAL;
    return pub->impl.get(option, value);
}

KVREG_API int kvreg_publisher_get_string(const kvreg_publisher *pub, uint32_t option, char *buf, size_t cap,
                                         size_t *len) noexcept {
    if (!pub || !len || (cap > 0 && !buf)) return KVREG_EINVAL;
    KVREG_GUARD_BEGIN
    std::string s;
    const int rc = pub->impl.get_string(option, s);
    return rc == KVREG_OK ? kvreg::string_out(s.c_str(), buf, cap, len) : rc;
    KVREG_GUARD_END
}

KVREG_API int kvreg_publisher_start(kvreg_publisher *pub) noexcept {
    if (!pub) return KVREG_EINVAL;
    KVREG_GUARD_BEGIN
    return pub->impl.start();
    KVREG_GUARD_END
}

KVREG_API int kvreg_publisher_endpoint(const kvreg_publisher *pub, uint32_t which, char *buf, size_t cap,
                                       size_t *len) noexcept {
    if (!pub || (!buf && cap > 0)) return KVREG_EINVAL;
    return pub->impl.endpoint(which, buf, cap, len);
}

KVREG_API int kvreg_publisher_stop(kvreg_publisher *pub) noexcept {
    return pub ? pub->impl.stop() : KVREG_EINVAL;
}

KVREG_API int kvreg_publisher_stat(const kvreg_publisher *pub, uint32_t stat, uint64_t *value) noexcept {
    if (!pub || !value) return KVREG_EINVAL;
    return pub->impl.stat(stat, value);
}

KVREG_API int kvreg_subscriber_new(kvreg_subscriber **out) noexcept {
    if (!out) return KVREG_EINVAL;
    KVREG_GUARD_BEGIN
    auto *sub = new kvreg_subscriber();
    const int rc = sub->impl.init();
    if (rc != KVREG_OK) {
        delete sub;
        return rc;
    }
    *out = sub;
    return KVREG_OK;
    KVREG_GUARD_END
}

KVREG_API void kvreg_subscriber_free(kvreg_subscriber *sub) noexcept { delete sub; }

KVREG_API int kvreg_subscriber_set(kvreg_subscriber *sub, uint32_t option, uint64_t value) noexcept {
    return sub ? sub->impl.set(option, value) : KVREG_EINVAL;
}

KVREG_API int kvreg_subscriber_set_string(kvreg_subscriber *sub, uint32_t option, const char *value) noexcept {
    if (!sub) return KVREG_EINVAL;
    KVREG_GUARD_BEGIN
    return sub->impl.set_string(option, value);
    KVREG_GUARD_END
}

KVREG_API int kvreg_subscriber_get(const kvreg_subscriber *sub, uint32_t option, uint64_t *value) noexcept {
    if (!sub || !value) return KVREG_EINVAL;
    return sub->impl.get(option, value);
}

KVREG_API int kvreg_subscriber_get_string(const kvreg_subscriber *sub, uint32_t option, char *buf, size_t cap,
                                          size_t *len) noexcept {
    if (!sub || !len || (cap > 0 && !buf)) return KVREG_EINVAL;
    KVREG_GUARD_BEGIN
    std::string s;
    const int rc = sub->impl.get_string(option, s);
    return rc == KVREG_OK ? kvreg::string_out(s.c_str(), buf, cap, len) : rc;
    KVREG_GUARD_END
}

KVREG_API int kvreg_subscriber_add(kvreg_subscriber *sub, const char *endpoint, const char *replay_endpoint,
                                   uint32_t *index) noexcept {
    if (!sub) return KVREG_EINVAL;
    KVREG_GUARD_BEGIN
    return sub->impl.add(endpoint, replay_endpoint, index);
    KVREG_GUARD_END
}

KVREG_API int kvreg_subscriber_endpoint(const kvreg_subscriber *sub, uint32_t index, char *buf, size_t cap,
                                        size_t *len) noexcept {
    if (!sub || (!buf && cap > 0)) return KVREG_EINVAL;
    return sub->impl.endpoint(index, buf, cap, len);
}

KVREG_API int kvreg_subscriber_set_batch_cb(kvreg_subscriber *sub, kvreg_subscriber_batch_fn fn,
                                            void *user_data, kvreg_destroy_fn destroy) noexcept {
    if (!sub) return KVREG_EINVAL;
    const int rc = sub->impl.set_batch_fn(fn, user_data);
    if (rc == KVREG_OK) sub->batch_ud.reset(user_data, destroy); // else the caller keeps it
    return rc;
}

KVREG_API int kvreg_subscriber_set_notice_cb(kvreg_subscriber *sub, kvreg_subscriber_notice_fn fn,
                                             void *user_data, kvreg_destroy_fn destroy) noexcept {
    if (!sub) return KVREG_EINVAL;
    const int rc = sub->impl.set_notice_fn(fn, user_data);
    if (rc == KVREG_OK) sub->notice_ud.reset(user_data, destroy);
    return rc;
}

KVREG_API int kvreg_subscriber_set_batch_fn(kvreg_subscriber *sub, kvreg_subscriber_batch_fn fn,
                                            void *user_data) noexcept {
    return kvreg_subscriber_set_batch_cb(sub, fn, user_data, nullptr);
}

KVREG_API int kvreg_subscriber_set_notice_fn(kvreg_subscriber *sub, kvreg_subscriber_notice_fn fn,
                                             void *user_data) noexcept {
    return kvreg_subscriber_set_notice_cb(sub, fn, user_data, nullptr);
}

KVREG_API int kvreg_subscriber_run(kvreg_subscriber *sub, int timeout_ms) noexcept {
    if (!sub) return KVREG_EINVAL;
    KVREG_GUARD_BEGIN
    return sub->impl.run(timeout_ms);
    KVREG_GUARD_END
}

KVREG_API int kvreg_subscriber_stop(kvreg_subscriber *sub) noexcept {
    if (!sub) return KVREG_EINVAL;
    sub->impl.stop();
    return KVREG_OK;
}

KVREG_API int kvreg_subscriber_stat(const kvreg_subscriber *sub, uint32_t stat, uint64_t *value) noexcept {
    if (!sub || !value) return KVREG_EINVAL;
    return sub->impl.stat(stat, value);
}

KVREG_API int kvreg_subscriber_instance(const kvreg_subscriber *sub, uint32_t publisher, const char *topic,
                                        uint64_t *instance) noexcept {
    if (!sub || !topic || !instance) return KVREG_EINVAL;
    KVREG_GUARD_BEGIN
    return sub->impl.instance(publisher, topic, instance);
    KVREG_GUARD_END
}

} // extern "C"

#else // !KVREG_WITH_ZMQ

struct kvreg_publisher {};
struct kvreg_subscriber {};

extern "C" {

KVREG_API int kvreg_net_offset_endpoint(const char *, uint32_t, char *, size_t, size_t *) noexcept {
    return KVREG_ENOTSUP;
}
KVREG_API int kvreg_publisher_new(kvreg_publisher **, kvreg_registry *) noexcept { return KVREG_ENOTSUP; }
KVREG_API void kvreg_publisher_free(kvreg_publisher *) noexcept {}
KVREG_API int kvreg_publisher_set(kvreg_publisher *, uint32_t, uint64_t) noexcept { return KVREG_ENOTSUP; }
KVREG_API int kvreg_publisher_set_string(kvreg_publisher *, uint32_t, const char *) noexcept {
    return KVREG_ENOTSUP;
}
KVREG_API int kvreg_publisher_get(const kvreg_publisher *, uint32_t, uint64_t *) noexcept { return KVREG_ENOTSUP; }
KVREG_API int kvreg_publisher_get_string(const kvreg_publisher *, uint32_t, char *, size_t, size_t *) noexcept {
    return KVREG_ENOTSUP;
}
KVREG_API int kvreg_publisher_start(kvreg_publisher *) noexcept { return KVREG_ENOTSUP; }
KVREG_API int kvreg_publisher_endpoint(const kvreg_publisher *, uint32_t, char *, size_t, size_t *) noexcept {
    return KVREG_ENOTSUP;
}
KVREG_API int kvreg_publisher_stop(kvreg_publisher *) noexcept { return KVREG_ENOTSUP; }
KVREG_API int kvreg_publisher_stat(const kvreg_publisher *, uint32_t, uint64_t *) noexcept {
    return KVREG_ENOTSUP;
}
KVREG_API int kvreg_subscriber_new(kvreg_subscriber **) noexcept { return KVREG_ENOTSUP; }
KVREG_API void kvreg_subscriber_free(kvreg_subscriber *) noexcept {}
KVREG_API int kvreg_subscriber_set(kvreg_subscriber *, uint32_t, uint64_t) noexcept { return KVREG_ENOTSUP; }
KVREG_API int kvreg_subscriber_set_string(kvreg_subscriber *, uint32_t, const char *) noexcept {
    return KVREG_ENOTSUP;
}
KVREG_API int kvreg_subscriber_get(const kvreg_subscriber *, uint32_t, uint64_t *) noexcept { return KVREG_ENOTSUP; }
KVREG_API int kvreg_subscriber_get_string(const kvreg_subscriber *, uint32_t, char *, size_t, size_t *) noexcept {
    return KVREG_ENOTSUP;
}
KVREG_API int kvreg_subscriber_add(kvreg_subscriber *, const char *, const char *, uint32_t *) noexcept {
    return KVREG_ENOTSUP;
}
KVREG_API int kvreg_subscriber_endpoint(const kvreg_subscriber *, uint32_t, char *, size_t, size_t *) noexcept {
    return KVREG_ENOTSUP;
}
KVREG_API int kvreg_subscriber_set_batch_fn(kvreg_subscriber *, kvreg_sub_batch_fn, void *) noexcept {
    return KVREG_ENOTSUP;
}
KVREG_API int kvreg_subscriber_set_batch_cb(kvreg_subscriber *, kvreg_subscriber_batch_fn, void *,
                                            kvreg_destroy_fn) noexcept {
    return KVREG_ENOTSUP;
}
KVREG_API int kvreg_subscriber_set_notice_cb(kvreg_subscriber *, kvreg_subscriber_notice_fn, void *,
                                             kvreg_destroy_fn) noexcept {
    return KVREG_ENOTSUP;
}
KVREG_API int kvreg_subscriber_set_notice_fn(kvreg_subscriber *, kvreg_sub_notice_fn, void *) noexcept {
    return KVREG_ENOTSUP;
}
KVREG_API int kvreg_subscriber_run(kvreg_subscriber *, int) noexcept { return KVREG_ENOTSUP; }
KVREG_API int kvreg_subscriber_stop(kvreg_subscriber *) noexcept { return KVREG_ENOTSUP; }
KVREG_API int kvreg_subscriber_stat(const kvreg_subscriber *, uint32_t, uint64_t *) noexcept {
    return KVREG_ENOTSUP;
}
KVREG_API int kvreg_subscriber_instance(const kvreg_subscriber *, uint32_t, const char *, uint64_t *) noexcept {
    return KVREG_ENOTSUP;
}

} // extern "C"

#endif
