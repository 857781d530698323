// JsonDoc (doc.hpp): validate a JSON document with a fixed-size bracket stack, then read it by
// offset. Nothing here allocates except text(), which appends one string to the caller's
// buffer.
#include "wire/doc.hpp"

#include <cstdlib>

namespace kvreg::wire {
namespace {

int hex(uint8_t c) noexcept {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

// Four hex digits at p (bounds checked by the caller).
bool hex4(const uint8_t *p) noexcept {
    return hex(p[0]) >= 0 && hex(p[1]) >= 0 && hex(p[2]) >= 0 && hex(p[3]) >= 0;
}

// The code unit of the \uXXXX escape at s (validated: four hex digits follow "\u").
uint32_t code_unit(const char *s) noexcept {
    uint32_t cp = 0;
    for (size_t d = 2; d < 6; d++)
        cp = cp << 4 | static_cast<uint32_t>(hex(static_cast<uint8_t>(s[d])));
    return cp;
}
bool high_surrogate(uint32_t u) noexcept { return u >= 0xd800 && u <= 0xdbff; }
bool low_surrogate(uint32_t u) noexcept { return u >= 0xdc00 && u <= 0xdfff; }

// Calls put(byte) for each byte of the unescaped text (UTF-8) of a validated string body. A
// surrogate pair (validated: a high one is always followed by a low one) is one 4-byte
// sequence; until 0.6's last change each half became a 3-byte sequence of its own, which is
// not UTF-8, and re-encoding passed it on.
template <class Put> void unescape(const char *s, size_t len, Put put) {
    for (size_t k = 0; k < len;) {
        char c = s[k];
        if (c != '\\') {
            put(c), k++;
            continue;
        }
        char e = s[k + 1];
        switch (e) {
        case 'b': put('\b'); break;
        case 'f': put('\f'); break;
        case 'n': put('\n'); break;
        case 'r': put('\r'); break;
        case 't': put('\t'); break;
        case 'u': {
            uint32_t cp = code_unit(s + k);
            if (high_surrogate(cp)) {
                cp = 0x10000 + ((cp - 0xd800) << 10) + (code_unit(s + k + 6) - 0xdc00);
                put(static_cast<char>(0xf0 | (cp >> 18)));
                put(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
                put(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
                put(static_cast<char>(0x80 | (cp & 0x3f)));
                k += 12;
                continue;
            }
            if (cp < 0x80) {
                put(static_cast<char>(cp));
            } else if (cp < 0x800) {
                put(static_cast<char>(0xc0 | (cp >> 6)));
                put(static_cast<char>(0x80 | (cp & 0x3f)));
            } else {
                put(static_cast<char>(0xe0 | (cp >> 12)));
                put(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
                put(static_cast<char>(0x80 | (cp & 0x3f)));
            }
            k += 6;
            continue;
        }
        default: put(e); break; // " \ /
        }
        k += 2;
    }
}

} // namespace

size_t JsonDoc::ws(size_t pos) const noexcept {
    while (pos < len_ && (p_[pos] == ' ' || p_[pos] == '\t' || p_[pos] == '\n' || p_[pos] == '\r'))
        pos++;
    return pos;
}

size_t JsonDoc::scan_string(size_t pos, bool *escaped, size_t &err_off,
                            const char *&err) const noexcept {
    auto fail = [&](size_t off, const char *why) {
        err_off = off, err = why;
        return SIZE_MAX;
    };
    pos++; // the opening quote
    for (;;) {
        if (pos >= len_)
            return fail(pos, "truncated: an unterminated JSON string");
        uint8_t c = p_[pos];
        if (c == '"')
            return pos + 1;
        if (c < 0x20)
            return fail(pos, "a control character inside a JSON string");
        if (c != '\\') {
            pos++;
            continue;
        }
        if (escaped)
            *escaped = true;
        if (len_ - pos < 2)
            return fail(pos, "truncated: an escape at the end of the payload");
        uint8_t e = p_[pos + 1];
        if (e && std::strchr("\"\\/bfnrt", e)) {
            pos += 2;
        } else if (e == 'u') {
            if (len_ - pos < 6)
                return fail(pos, "truncated: a \\u escape at the end of the payload");
            if (!hex4(p_ + pos + 2))
                return fail(pos, "a bad \\u escape");
            // UTF-16 surrogates come in pairs (serde_json refuses a lone one too).
            const uint32_t u = code_unit(reinterpret_cast<const char *>(p_ + pos));
            if (low_surrogate(u))
                return fail(pos, "a lone low surrogate in a \\u escape");
            if (high_surrogate(u)) {
                if (len_ - pos < 12 || p_[pos + 6] != '\\' || p_[pos + 7] != 'u')
                    return fail(pos, "a high surrogate not followed by a low one");
                if (!hex4(p_ + pos + 8))
                    return fail(pos + 6, "a bad \\u escape");
                if (!low_surrogate(code_unit(reinterpret_cast<const char *>(p_ + pos + 6))))
                    return fail(pos, "a high surrogate not followed by a low one");
                pos += 6;
            }
            pos += 6;
        } else {
            return fail(pos, "an unknown escape in a JSON string");
        }
    }
}

size_t JsonDoc::scan_number(size_t pos, Val *out, size_t &err_off,
                            const char *&err) const noexcept {
    auto fail = [&](size_t off, const char *why) {
        err_off = off, err = why;
        return SIZE_MAX;
    };
    const size_t off = pos;
    bool neg = false;
    if (pos < len_ && p_[pos] == '-')
        neg = true, pos++;
    const size_t digits = pos;
    uint64_t v = 0;
    bool overflow = false;
    while (pos < len_ && p_[pos] >= '0' && p_[pos] <= '9') {
        unsigned d = p_[pos] - '0';
        if (v > (UINT64_MAX - d) / 10)
            overflow = true;
        v = v * 10 + d;
        pos++;
    }
    if (pos == digits)
        return fail(off, "not a JSON value");
    // RFC 8259's grammar: no leading zero, digits after '.', digits in the exponent (serde_json
    // and Python's json refuse "01" or "1."; strtod alone took them).
    if (p_[digits] == '0' && pos > digits + 1)
        return fail(off, "a JSON number with a leading zero");
    const auto digits_from = [&](size_t at) {
        size_t q = at;
        while (q < len_ && p_[q] >= '0' && p_[q] <= '9') q++;
        return q;
    };
    bool is_float = false;
    if (pos < len_ && p_[pos] == '.') {
        const size_t end = digits_from(pos + 1);
        if (end == pos + 1)
            return fail(off, "a malformed JSON number");
        pos = end, is_float = true;
    }
    if (pos < len_ && (p_[pos] == 'e' || p_[pos] == 'E')) {
        size_t at = pos + 1;
        if (at < len_ && (p_[at] == '+' || p_[at] == '-'))
            at++;
        const size_t end = digits_from(at);
        if (end == at)
            return fail(off, "a malformed JSON number");
        pos = end, is_float = true;
    }
    if (is_float) {
        // strtod needs a NUL-terminated copy; a number longer than this is not one we read
        char buf[128];
        const size_t n = pos - off;
        if (n >= sizeof buf)
            return fail(off, "a JSON number longer than 127 characters");
        std::memcpy(buf, p_ + off, n);
        buf[n] = '\0';
        char *end = nullptr;
        double d = std::strtod(buf, &end);
        if (end != buf + n)
            return fail(off, "a malformed JSON number");
        if (out)
            out->kind = Val::Float, out->f = d;
        return pos;
    }
    if (overflow || (neg && v > static_cast<uint64_t>(INT64_MAX) + 1))
        return fail(off, "an integer out of the 64-bit range");
    if (out) {
        if (neg && v != 0)
            out->kind = Val::Int, out->i = static_cast<int64_t>(0 - v);
        else
            out->kind = Val::Uint, out->u = v;
    }
    return pos;
}

// A string, number or literal at pos (not a container).
size_t JsonDoc::scan_scalar(size_t pos, size_t &err_off, const char *&err) const noexcept {
    if (pos >= len_) {
        err_off = pos, err = "truncated: a JSON value is missing at the end";
        return SIZE_MAX;
    }
    uint8_t c = p_[pos];
    if (c == '"')
        return scan_string(pos, nullptr, err_off, err);
    const char *lit = c == 'n' ? "null" : c == 't' ? "true" : c == 'f' ? "false" : nullptr;
    if (lit) {
        size_t n = std::strlen(lit);
        if (len_ - pos < n || std::memcmp(p_ + pos, lit, n) != 0) {
            err_off = pos, err = "not a JSON value";
            return SIZE_MAX;
        }
        return pos + n;
    }
    return scan_number(pos, nullptr, err_off, err);
}

bool JsonDoc::validate(size_t &err_off, const char *&err) const noexcept {
    bool is_map[MpReader::kMaxDepthCap + 1]; // per open container: object (else array)
    unsigned top = 0;                        // open containers
    size_t pos = ws(0);
    auto fail = [&](size_t off, const char *why) {
        err_off = off > len_ ? len_ : off, err = why;
        return false;
    };
    // a key and its ':' inside an object, at pos
    auto key = [&]() {
        pos = ws(pos);
        if (pos >= len_ || p_[pos] != '"')
            return fail(pos, "a JSON object key must be a string");
        size_t e = scan_string(pos, nullptr, err_off, err);
        if (e == SIZE_MAX)
            return false;
        pos = ws(e);
        if (pos >= len_ || p_[pos] != ':')
            return fail(pos, "':' expected after a JSON object key");
        pos = ws(pos + 1);
        return true;
    };
    for (;;) {
        // a value at pos
        pos = ws(pos);
        if (pos < len_ && (p_[pos] == '[' || p_[pos] == '{')) {
            if (top + 1 > max_depth_)
                return fail(pos, "nested deeper than the decoder's max_depth");
            bool m = p_[pos] == '{';
            is_map[top++] = m;
            pos = ws(pos + 1);
            if (pos < len_ && p_[pos] == (m ? '}' : ']')) {
                pos++, top--;
            } else {
                if (m && !key())
                    return false;
                continue; // the first element
            }
        } else {
            size_t e = scan_scalar(pos, err_off, err);
            if (e == SIZE_MAX)
                return false;
            pos = e;
        }
        // after a value: close containers, or a ',' and the next element
        for (;;) {
            pos = ws(pos);
            if (top == 0) {
                if (pos != len_)
                    return fail(pos, "bytes after the end of the JSON document");
                return true;
            }
            if (pos >= len_)
                return fail(pos, "truncated: an unterminated JSON array or object");
            const bool m = is_map[top - 1];
            if (p_[pos] == (m ? '}' : ']')) {
                pos++, top--;
                continue;
            }
            if (p_[pos] != ',')
                return fail(pos, "',' or the closing bracket expected");
            pos++;
            if (m && !key())
                return false;
            break;
        }
    }
}

Val JsonDoc::read(size_t pos) const noexcept {
    pos = ws(pos);
    Val v;
    v.off = pos;
    size_t eo;
    const char *e;
    switch (p_[pos]) {
    case 'n': v.kind = Val::Nil; break;
    case 't': v.kind = Val::Bool, v.u = 1; break;
    case 'f': v.kind = Val::Bool; break;
    case '[': v.kind = Val::Array, v.body = pos + 1; break;
    case '{': v.kind = Val::Map, v.body = pos + 1; break;
    case '"': {
        size_t end = scan_string(pos, &v.escaped, eo, e);
        v.kind = Val::Str, v.s = reinterpret_cast<const char *>(p_ + pos + 1), v.len = end - pos - 2;
        break;
    }
    default: scan_number(pos, &v, eo, e); break;
    }
    return v;
}

// End of a validated value at pos (whitespace before it allowed).
size_t JsonDoc::end_of(size_t pos) const noexcept {
    pos = ws(pos);
    size_t eo;
    const char *e;
    if (p_[pos] != '[' && p_[pos] != '{')
        return scan_scalar(pos, eo, e);
    // brackets inside strings do not count; validated, so depth only needs counting
    size_t depth = 0;
    for (;;) {
        uint8_t c = p_[pos];
        if (c == '"') {
            pos = scan_string(pos, nullptr, eo, e);
            continue;
        }
        pos++;
        if (c == '[' || c == '{')
            depth++;
        else if ((c == ']' || c == '}') && --depth == 0)
            return pos;
    }
}

bool JsonDoc::next(Iter &it, Val &v) const noexcept {
    size_t pos = ws(it.pos);
    if (p_[pos] == ']' || p_[pos] == '}')
        return false;
    if (p_[pos] == ',' || p_[pos] == ':')
        pos = ws(pos + 1);
    v = read(pos);
    it.pos = end_of(pos);
    it.key = !it.key;
    return true;
}

bool JsonDoc::is(const Val &v, const char *lit) const noexcept {
    if (v.kind != Val::Str)
        return false;
    const size_t n = std::strlen(lit);
    if (!v.escaped)
        return v.len == n && std::memcmp(v.s, lit, n) == 0;
    size_t k = 0;
    bool same = true;
    unescape(v.s, v.len, [&](char c) {
        if (k >= n || lit[k] != c)
            same = false;
        k++;
    });
    return same && k == n;
}

void JsonDoc::text(const Val &v, std::vector<char> &out) const {
    if (!v.escaped) {
        out.insert(out.end(), v.s, v.s + v.len);
        return;
    }
    out.reserve(out.size() + v.len); // unescaped text is never longer
    unescape(v.s, v.len, [&](char c) { out.push_back(c); });
}

} // namespace kvreg::wire
