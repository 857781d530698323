// Lazy readers of a whole document (JSON text or MessagePack) for the Dynamo decoder, which
// reads the same RouterEvent shape from both.
//
// Why lazy: a parsed tree costs tens of bytes per value, and a value can be one input byte, so
// a tree-building parser's memory is a large multiple of a hostile payload (4 MiB of nested
// msgpack headers once cost 1 GiB). These readers allocate nothing: validate() checks the
// whole document first (syntax, the nesting limit, bytes after the end) with a fixed-size
// stack, then the decoder walks it by offset, reading only the values it needs. Work stays
// linear: the decoder reads each map once (all of its keys in one pass) and each array once.
//
// JSON is read by hand rather than with jansson: jansson's integers are long long, and it
// rejects every u64 above 2^63 ("too big integer"), which is half of all Dynamo block hashes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "wire/mp_read.hpp"

namespace kvreg::wire {

// One value of a validated document.
struct Val {
    enum Kind : uint8_t { Nil, Bool, Uint, Int, Float, Str, Array, Map, Other } kind = Nil;
    size_t off = 0;           // byte offset in the payload
    uint64_t u = 0;           // Uint, Bool
    int64_t i = 0;            // Int (negative)
    double f = 0;             // Float
    const char *s = nullptr;  // Str: the bytes as on the wire (JSON: between the quotes)
    size_t len = 0;           // Str: their length
    bool escaped = false;     // Str (JSON): holds escapes, compare / copy through unescape()
    size_t body = 0;          // Array, Map: offset of the first element (or the closing bracket)
    size_t count = 0;         // Array, Map (msgpack only): elements / pairs
};

// Position inside a container while iterating it.
struct Iter {
    size_t pos = 0;  // next element's offset
    size_t left = 0; // msgpack: values still to read (a map counts keys and values)
    bool map = false;
    bool key = true; // JSON map: the next value read is a key
};

// ---- MessagePack ---------------------------------------------------------------------------

class MpDoc {
public:
    MpDoc(const uint8_t *p, size_t len, unsigned max_depth) noexcept : p_(p), len_(len) {
        max_depth_ = max_depth;
    }

    // The whole payload is one value, nested at most max_depth, with nothing after it.
    bool validate(size_t &err_off, const char *&err) const noexcept {
        MpReader r(p_, len_);
        r.set_max_depth(max_depth_);
        if (r.skip(1) && !r.at_end())
            r.fail(r.pos(), "bytes after the end of the payload");
        if (!r.failed())
            return true;
        err_off = r.error_offset(), err = r.error();
        return false;
    }

    Val read(size_t off) const noexcept {
        MpReader r(p_, len_);
        r.seek(off);
        MpHead h;
        Val v;
        v.off = off;
        if (!r.head(h)) // cannot happen after validate(); an Other value reads as nothing
            return v.kind = Val::Other, v;
        switch (h.kind) {
        case MpKind::Nil: v.kind = Val::Nil; break;
        case MpKind::Bool: v.kind = Val::Bool, v.u = h.u; break;
        case MpKind::Uint: v.kind = Val::Uint, v.u = h.u; break;
        case MpKind::Int: v.kind = Val::Int, v.i = h.i; break;
        case MpKind::Float: v.kind = Val::Float, v.f = h.f; break;
        case MpKind::Str: v.kind = Val::Str, v.s = h.data, v.len = h.len; break;
        case MpKind::Array: v.kind = Val::Array, v.count = h.count, v.body = r.pos(); break;
        case MpKind::Map: v.kind = Val::Map, v.count = h.count, v.body = r.pos(); break;
        default: v.kind = Val::Other; break; // bin, ext: no Dynamo field has them
        }
        return v;
    }

    Iter begin(const Val &c) const noexcept {
        Iter it;
        it.pos = c.body, it.map = c.kind == Val::Map;
        it.left = it.map ? 2 * c.count : c.count;
        return it;
    }
    // The next element (for a map: key, value, key, ...); false at the end.
    bool next(Iter &it, Val &v) const noexcept {
        if (it.left == 0)
            return false;
        v = read(it.pos);
        MpReader r(p_, len_);
        r.seek(it.pos);
        r.set_max_depth(MpReader::kMaxDepthCap);
        r.skip(1); // validated: cannot fail
        it.pos = r.pos(), it.left--;
        return true;
    }

    bool is(const Val &v, const char *lit) const noexcept {
        size_t n = std::strlen(lit);
        return v.kind == Val::Str && v.len == n && std::memcmp(v.s, lit, n) == 0;
    }
    // The string's text (msgpack strings have no escapes) appended to out.
    void text(const Val &v, std::vector<char> &out) const {
        out.insert(out.end(), v.s, v.s + v.len);
    }
    // The offset just past value v (to keep a value's bytes as they are).
    size_t value_end(const Val &v) const noexcept {
        MpReader r(p_, len_);
        r.seek(v.off);
        r.set_max_depth(MpReader::kMaxDepthCap);
        r.skip(1); // validated: cannot fail
        return r.pos();
    }

private:
    const uint8_t *p_;
    size_t len_;
    unsigned max_depth_;
};

// ---- JSON ----------------------------------------------------------------------------------

class JsonDoc {
public:
    JsonDoc(const uint8_t *p, size_t len, unsigned max_depth) noexcept
        : p_(p), len_(len), max_depth_(max_depth > MpReader::kMaxDepthCap ? MpReader::kMaxDepthCap
                                                                          : max_depth) {}

    bool validate(size_t &err_off, const char *&err) const noexcept;
    Val read(size_t off) const noexcept;
    Iter begin(const Val &c) const noexcept {
        Iter it;
        it.pos = c.body, it.map = c.kind == Val::Map;
        return it;
    }
    bool next(Iter &it, Val &v) const noexcept;
    bool is(const Val &v, const char *lit) const noexcept;
    void text(const Val &v, std::vector<char> &out) const;
    size_t value_end(const Val &v) const noexcept { return end_of(v.off); }

private:
    size_t ws(size_t pos) const noexcept;
    // Scanners: the end of the value at pos, or SIZE_MAX with err_off/err set.
    size_t scan_string(size_t pos, bool *escaped, size_t &err_off, const char *&err) const noexcept;
    size_t scan_number(size_t pos, Val *out, size_t &err_off, const char *&err) const noexcept;
    size_t scan_scalar(size_t pos, size_t &err_off, const char *&err) const noexcept;
    size_t end_of(size_t pos) const noexcept; // of a validated value

    const uint8_t *p_;
    size_t len_;
    unsigned max_depth_;
};

} // namespace kvreg::wire
