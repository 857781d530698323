// C entry points of kvreg_nats.h, built with libnats (see nats_stub.cpp for the build without).
#include "kvreg_nats.h"

#include "api/guard.hpp"
#include "api/user_data.hpp"
#include "api/internal.hpp"
#include "api/string_out.hpp"
#include "nats/consumer.hpp"
#include "nats/publisher.hpp"

struct kvreg_nats_publisher {
    // new() took the registry's events (KVREG_EBUSY if a publisher had them); declared before
    // impl, so they are given back after impl stopped polling them.
    explicit kvreg_nats_publisher(kvreg_registry *reg) : events(reg), impl(reg) {}
    kvreg::TakenEvents events;
    kvreg::nats::Publisher impl;
};
struct kvreg_nats_consumer {
    explicit kvreg_nats_consumer(kvreg_index *idx) : impl(idx) {}
    kvreg::OwnedUserData notice_ud; // before impl: destroyed after it, when no callback runs
    kvreg::nats::Consumer impl;
};

extern "C" {

KVREG_API int kvreg_nats_available(void) noexcept { return 1; }

KVREG_API int kvreg_nats_publisher_new(kvreg_nats_publisher **out, kvreg_registry *reg) noexcept {
    if (!out || !reg || !reg->log.poll_mode()) return KVREG_EINVAL;
    if (!reg->log.take_events()) return KVREG_EBUSY;
    kvreg::TakenEvents taken(reg); // given back if what follows throws
    KVREG_GUARD_BEGIN
    *out = new kvreg_nats_publisher(taken.release());
    return KVREG_OK;
    KVREG_GUARD_END
}
KVREG_API void kvreg_nats_publisher_free(kvreg_nats_publisher *pub) noexcept { delete pub; }
KVREG_API int kvreg_nats_publisher_set(kvreg_nats_publisher *pub, uint32_t option, uint64_t value) noexcept {
    return pub ? pub->impl.set(option, value) : KVREG_EINVAL;
}
KVREG_API int kvreg_nats_publisher_set_string(kvreg_nats_publisher *pub, uint32_t option,
                                              const char *value) noexcept {
    if (!pub) return KVREG_EINVAL;
    KVREG_GUARD_BEGIN
    return pub->impl.set_string(option, value);
    KVREG_GUARD_END
}
KVREG_API int kvreg_nats_publisher_get(const kvreg_nats_publisher *pub, uint32_t option,
                                       uint64_t *value) noexcept {
    if (!pub || !value) return KVREG_EINVAL;
    return pub->impl.get(option, value);
}
KVREG_API int kvreg_nats_publisher_get_string(const kvreg_nats_publisher *pub, uint32_t option, char *buf,
                                              size_t cap, size_t *len) noexcept {
    if (!pub || !len || (cap > 0 && !buf)) return KVREG_EINVAL;
    KVREG_GUARD_BEGIN
    std::string s;
    const int rc = pub->impl.get_string(option, s);
    return rc == KVREG_OK ? kvreg::string_out(s.c_str(), buf, cap, len) : rc;
    KVREG_GUARD_END
}
KVREG_API int kvreg_nats_publisher_start(kvreg_nats_publisher *pub) noexcept {
    if (!pub) return KVREG_EINVAL;
    KVREG_GUARD_BEGIN
    return pub->impl.start();
    KVREG_GUARD_END
}
KVREG_API int kvreg_nats_publisher_stop(kvreg_nats_publisher *pub) noexcept {
    return pub ? pub->impl.stop() : KVREG_EINVAL;
}
KVREG_API int kvreg_nats_publisher_stat(const kvreg_nats_publisher *pub, uint32_t stat,
                                        uint64_t *value) noexcept {
    if (!pub || !value) return KVREG_EINVAL;
    return pub->impl.stat(stat, value);
}

KVREG_API int kvreg_nats_consumer_new(kvreg_nats_consumer **out, kvreg_index *idx) noexcept {
    if (!out || !idx) return KVREG_EINVAL;
    KVREG_GUARD_BEGIN
    *out = new kvreg_nats_consumer(idx);
    return KVREG_OK;
    KVREG_GUARD_END
}
KVREG_API void kvreg_nats_consumer_free(kvreg_nats_consumer *con) noexcept { delete con; }
KVREG_API int kvreg_nats_consumer_set(kvreg_nats_consumer *con, uint32_t option, uint64_t value) noexcept {
    return con ? con->impl.set(option, value) : KVREG_EINVAL;
}
KVREG_API int kvreg_nats_consumer_set_string(kvreg_nats_consumer *con, uint32_t option,
                                             const char *value) noexcept {
    if (!con) return KVREG_EINVAL;
    KVREG_GUARD_BEGIN
    return con->impl.set_string(option, value);
    KVREG_GUARD_END
}
KVREG_API int kvreg_nats_consumer_get(const kvreg_nats_consumer *con, uint32_t option,
                                      uint64_t *value) noexcept {
    if (!con || !value) return KVREG_EINVAL;
    return con->impl.get(option, value);
}
KVREG_API int kvreg_nats_consumer_get_string(const kvreg_nats_consumer *con, uint32_t option, char *buf,
                                             size_t cap, size_t *len) noexcept {
    if (!con || !len || (cap > 0 && !buf)) return KVREG_EINVAL;
    KVREG_GUARD_BEGIN
    std::string s;
    const int rc = con->impl.get_string(option, s);
    return rc == KVREG_OK ? kvreg::string_out(s.c_str(), buf, cap, len) : rc;
    KVREG_GUARD_END
}
KVREG_API int kvreg_nats_consumer_set_notice_fn(kvreg_nats_consumer *con, kvreg_nats_notice_fn fn,
                                                void *user_data) noexcept {
    return kvreg_nats_consumer_set_notice_cb(con, fn, user_data, nullptr);
}
KVREG_API int kvreg_nats_consumer_set_notice_cb(kvreg_nats_consumer *con, kvreg_nats_notice_fn fn,
                                                void *user_data, kvreg_destroy_fn destroy) noexcept {
    if (!con) return KVREG_EINVAL;
    const int rc = con->impl.set_notice_fn(fn, user_data);
    if (rc == KVREG_OK) con->notice_ud.reset(user_data, destroy); // else the caller keeps it
    return rc;
}
KVREG_API int kvreg_nats_consumer_start(kvreg_nats_consumer *con) noexcept {
    if (!con) return KVREG_EINVAL;
    KVREG_GUARD_BEGIN
    return con->impl.start();
    KVREG_GUARD_END
}
KVREG_API int kvreg_nats_consumer_run(kvreg_nats_consumer *con, int timeout_ms) noexcept {
    if (!con) return KVREG_EINVAL;
    KVREG_GUARD_BEGIN
    return con->impl.run(timeout_ms);
    KVREG_GUARD_END
}
KVREG_API int kvreg_nats_consumer_stop(kvreg_nats_consumer *con) noexcept {
    return con ? con->impl.stop() : KVREG_EINVAL;
}
KVREG_API int kvreg_nats_consumer_stat(const kvreg_nats_consumer *con, uint32_t stat,
                                       uint64_t *value) noexcept {
    if (!con || !value) return KVREG_EINVAL;
    return con->impl.stat(stat, value);
}
KVREG_API int kvreg_nats_consumer_worker(const kvreg_nats_consumer *con, uint64_t worker_id,
                                         uint32_t dp_rank, uint64_t *instance,
                                         uint64_t *next_seq) noexcept {
    if (!con) return KVREG_EINVAL;
    return con->impl.worker(worker_id, dp_rank, instance, next_seq);
}
KVREG_API int kvreg_nats_consumer_snapshot(kvreg_nats_consumer *con, uint64_t *out_seq) noexcept {
    if (!con) return KVREG_EINVAL;
    KVREG_GUARD_BEGIN
    return con->impl.snapshot(out_seq);
    KVREG_GUARD_END
}

} // extern "C"
