// Status strings, the runtime version and the optional features built in.
#include "kvreg.h"

// Set by src/meson.build when the optional parts are built; absent means not built.
#ifndef KVREG_WITH_WIRE
#define KVREG_WITH_WIRE 0
#endif
#ifndef KVREG_WITH_ZMQ
#define KVREG_WITH_ZMQ 0
#endif

extern "C" {

KVREG_API const char *kvreg_strerror(int status) noexcept {
    switch (status) {
    case KVREG_OK: return "success";
    case KVREG_EINVAL: return "invalid argument";
    case KVREG_ENOMEM: return "out of memory";
    case KVREG_ERANGE: return "out of range or output too small";
    case KVREG_ESTATE: return "block or object in the wrong state (e.g. block not complete)";
    case KVREG_EEXIST: return "hash already registered in this pool";
    case KVREG_ENOENT: return "not found";
    case KVREG_ESTALE: return "stale handle: released, foreign, or pool freed";
    case KVREG_EBUSY: return "not allowed now (from inside an event callback, or the registry's events taken by a publisher)";
    case KVREG_EOVERFLOW: return "limit exceeded (a count such as references or pools, or an impossible size)";
    case KVREG_ENOTSUP: return "feature not built into this library (see kvreg_features)";
    case KVREG_EPROTO: return "malformed input or a failed peer: a payload or frame that does not decode, or a server that cannot be reached or refused";
    default: return "unknown error";
    }
}

KVREG_API unsigned kvreg_version_number(void) noexcept { return KVREG_VERSION_NUMBER; }

KVREG_API const char *kvreg_version_string(void) noexcept { return KVREG_VERSION_STRING; }

KVREG_API unsigned kvreg_features(void) noexcept {
    return (KVREG_WITH_WIRE ? KVREG_FEATURE_WIRE : 0u) | (KVREG_WITH_ZMQ ? KVREG_FEATURE_ZMQ : 0u);
}

} // extern "C"
