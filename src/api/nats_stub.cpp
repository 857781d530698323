// kvreg_nats.h without libnats: the same symbols, each returning KVREG_ENOTSUP (or nothing),
// so programs link against either build and ask kvreg_nats_available().
#include "kvreg_nats.h"

extern "C" {

KVREG_API int kvreg_nats_available(void) noexcept { return 0; }
KVREG_API int kvreg_nats_publisher_new(kvreg_nats_publisher **, kvreg_registry *) noexcept { return KVREG_ENOTSUP; }
KVREG_API void kvreg_nats_publisher_free(kvreg_nats_publisher *) noexcept {}
KVREG_API int kvreg_nats_publisher_set(kvreg_nats_publisher *, uint32_t, uint64_t) noexcept { return KVREG_ENOTSUP; }
KVREG_API int kvreg_nats_publisher_set_string(kvreg_nats_publisher *, uint32_t, const char *) noexcept {
    return KVREG_ENOTSUP;
}
KVREG_API int kvreg_nats_publisher_get(const kvreg_nats_publisher *, uint32_t, uint64_t *) noexcept {
    return KVREG_ENOTSUP;
}
KVREG_API int kvreg_nats_publisher_get_string(const kvreg_nats_publisher *, uint32_t, char *, size_t,
                                              size_t *) noexcept {
    return KVREG_ENOTSUP;
}
KVREG_API int kvreg_nats_publisher_start(kvreg_nats_publisher *) noexcept { return KVREG_ENOTSUP; }
KVREG_API int kvreg_nats_publisher_stop(kvreg_nats_publisher *) noexcept { return KVREG_ENOTSUP; }
KVREG_API int kvreg_nats_publisher_stat(const kvreg_nats_publisher *, uint32_t, uint64_t *) noexcept {
    return KVREG_ENOTSUP;
}
KVREG_API int kvreg_nats_consumer_new(kvreg_nats_consumer **, kvreg_index *) noexcept { return KVREG_ENOTSUP; }
KVREG_API void kvreg_nats_consumer_free(kvreg_nats_consumer *) noexcept {}
KVREG_API int kvreg_nats_consumer_set(kvreg_nats_consumer *, uint32_t, uint64_t) noexcept { return KVREG_ENOTSUP; }
KVREG_API int kvreg_nats_consumer_set_string(kvreg_nats_consumer *, uint32_t, const char *) noexcept {
    return KVREG_ENOTSUP;
}
KVREG_API int kvreg_nats_consumer_get(const kvreg_nats_consumer *, uint32_t, uint64_t *) noexcept {
    return KVREG_ENOTSUP;
}
KVREG_API int kvreg_nats_consumer_get_string(const kvreg_nats_consumer *, uint32_t, char *, size_t,
                                             size_t *) noexcept {
    return KVREG_ENOTSUP;
}
KVREG_API int kvreg_nats_consumer_set_notice_fn(kvreg_nats_consumer *, kvreg_nats_notice_fn, void *) noexcept {
    return KVREG_ENOTSUP;
}
KVREG_API int kvreg_nats_consumer_set_notice_cb(kvreg_nats_consumer *, kvreg_nats_notice_fn, void *,
                                                kvreg_destroy_fn) noexcept {
    return KVREG_ENOTSUP;
}
KVREG_API int kvreg_nats_consumer_start(kvreg_nats_consumer *) noexcept { return KVREG_ENOTSUP; }
KVREG_API int kvreg_nats_consumer_run(kvreg_nats_consumer *, int) noexcept { return KVREG_ENOTSUP; }
KVREG_API int kvreg_nats_consumer_stop(kvreg_nats_consumer *) noexcept { return KVREG_ENOTSUP; }
KVREG_API int kvreg_nats_consumer_stat(const kvreg_nats_consumer *, uint32_t, uint64_t *) noexcept {
    return KVREG_ENOTSUP;
}
KVREG_API int kvreg_nats_consumer_worker(const kvreg_nats_consumer *, uint64_t, uint32_t, uint64_t *,
                                         uint64_t *) noexcept {
    return KVREG_ENOTSUP;
}
KVREG_API int kvreg_nats_consumer_snapshot(kvreg_nats_consumer *, uint64_t *) noexcept { return KVREG_ENOTSUP; }

} // extern "C"
