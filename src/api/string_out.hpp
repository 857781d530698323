// How every _get_string hands a string out (kvreg.h, "One configuration pattern"): the length
// always, the bytes with their NUL only when they fit.
#pragma once

#include <cstring>

#include "kvreg.h"

namespace kvreg {

inline int string_out(const char *s, char *buf, size_t cap, size_t *len) noexcept {
    if (!len || (cap > 0 && !buf)) return KVREG_EINVAL;
    const size_t n = std::strlen(s);
    *len = n;
    if (cap < n + 1) return KVREG_ERANGE;
    std::memcpy(buf, s, n + 1);
    return KVREG_OK;
}

} // namespace kvreg
