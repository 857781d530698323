// Whether bytes are UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing past U+10FFFF,
// no sequence cut short. For the names the encoders write as msgpack str (lora_name), which
// msgspec and Python consumers decode strictly: a name that is not UTF-8 made them refuse
// every batch carrying it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace kvreg::wire {

inline bool valid_utf8(std::string_view s) noexcept {
    const auto *p = reinterpret_cast<const unsigned char *>(s.data());
    const size_t n = s.size();
    for (size_t i = 0; i < n;) {
        const unsigned c = p[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t len;
        unsigned lo = 0x80, hi = 0xbf; // the second byte's range (the others: 80..bf)
        if (c >= 0xc2 && c <= 0xdf) {
            len = 2;
        } else if (c >= 0xe0 && c <= 0xef) {
            len = 3;
            if (c == 0xe0) lo = 0xa0;      // overlong
            else if (c == 0xed) hi = 0x9f; // surrogates
        } else if (c >= 0xf0 && c <= 0xf4) {
            len = 4;
            if (c == 0xf0) lo = 0x90;      // overlong
            else if (c == 0xf4) hi = 0x8f; // past U+10FFFF
        } else {
            return false; // a continuation byte first, 0xc0/0xc1 (overlong), or 0xf5..0xff
        }
        if (n - i < len || p[i + 1] < lo || p[i + 1] > hi) return false;
        for (size_t k = 2; k < len; k++)
            if (p[i + k] < 0x80 || p[i + k] > 0xbf) return false;
        i += len;
    }
    return true;
}

} // namespace kvreg::wire
