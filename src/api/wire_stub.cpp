// kvreg_wire.h without the `wire` feature: the same exported symbols, every call
// KVREG_ENOTSUP (kvreg_features() does not report KVREG_FEATURE_WIRE).
#include "kvreg_wire.h"

extern "C" {

KVREG_API int kvreg_wire_encoder_new(kvreg_wire_encoder **out, uint32_t) noexcept {
    if (out)
        *out = nullptr;
    return KVREG_ENOTSUP;
}
KVREG_API void kvreg_wire_encoder_free(kvreg_wire_encoder *) noexcept {}
KVREG_API int kvreg_wire_encoder_set(kvreg_wire_encoder *, uint32_t, uint64_t) noexcept {
    return KVREG_ENOTSUP;
}
KVREG_API int kvreg_wire_encoder_set_lora_name(kvreg_wire_encoder *, const char *) noexcept {
    return KVREG_ENOTSUP;
}
KVREG_API int kvreg_wire_encode(kvreg_wire_encoder *, const kvreg_event *, size_t, double,
                                size_t *, const uint8_t **, size_t *) noexcept {
    return KVREG_ENOTSUP;
}
KVREG_API int kvreg_wire_decoder_new(kvreg_wire_decoder **out, uint32_t) noexcept {
    if (out)
        *out = nullptr;
    return KVREG_ENOTSUP;
}
KVREG_API void kvreg_wire_decoder_free(kvreg_wire_decoder *) noexcept {}
KVREG_API int kvreg_wire_decode(kvreg_wire_decoder *, const void *, size_t,
                                const kvreg_wire_event **, size_t *, size_t *) noexcept {
    return KVREG_ENOTSUP;
}
KVREG_API const char *kvreg_wire_decoder_error(const kvreg_wire_decoder *) noexcept {
    return "libkvreg was built without wire formats (KVREG_FEATURE_WIRE)";
}
KVREG_API int kvreg_wire_decoder_stat(const kvreg_wire_decoder *, uint32_t, uint64_t *) noexcept {
    return KVREG_ENOTSUP;
}

KVREG_API int kvreg_wire_encoder_get(const kvreg_wire_encoder *, uint32_t, uint64_t *) noexcept {
    return KVREG_ENOTSUP;
}
KVREG_API int kvreg_wire_decoder_set(kvreg_wire_decoder *, uint32_t, uint64_t) noexcept {
    return KVREG_ENOTSUP;
}
KVREG_API int kvreg_wire_decoder_reencode(kvreg_wire_decoder *, const uint8_t **,
                                          size_t *) noexcept {
    return KVREG_ENOTSUP;
}
KVREG_API int kvreg_wire_decoder_event_ext(const kvreg_wire_decoder *, size_t,
                                           kvreg_wire_event_ext *) noexcept {
    return KVREG_ENOTSUP;
}

KVREG_API int kvreg_wire_encoder_set_string(kvreg_wire_encoder *, uint32_t, const char *) noexcept {
    return KVREG_ENOTSUP;
}
KVREG_API int kvreg_wire_encoder_get_string(const kvreg_wire_encoder *, uint32_t, char *, size_t,
                                            size_t *) noexcept {
    return KVREG_ENOTSUP;
}
KVREG_API int kvreg_wire_decoder_get(const kvreg_wire_decoder *, uint32_t, uint64_t *) noexcept {
    return KVREG_ENOTSUP;
}

} // extern "C"
