// Bounds-checked MessagePack reading for the decoders.
//
// Hand-written rather than msgpack-c's unpacker on purpose: the decoders must name the byte
// offset of the first problem (msgpack-c reports only "parse error" / "insufficient bytes"
// for the whole buffer), stream through a payload without building an object tree (speed:
// a payload is mostly integers), and bound every count by the bytes left before trusting it
// (a 5-byte array header claiming 2^32 elements must not allocate anything).
//
// Every read checks the buffer end first; a failure records the offset and a reason and every
// later call fails too, so callers just stop at the first false.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace kvreg::wire {

enum class MpKind : uint8_t { Nil, Bool, Uint, Int, Float, Str, Bin, Array, Map, Ext };

// One value's head: scalars complete; for Str/Bin/Ext the body (in the buffer); for
// Array/Map the element / pair count (elements follow).
struct MpHead {
    MpKind kind;
    size_t off; // offset of the type byte
    union {
        uint64_t u;   // Uint; Bool as 0/1
        int64_t i;    // Int (negative only: non-negative values are Uint)
        double f;     // Float (float32 widened)
        size_t count; // Array, Map
        size_t len;   // Str, Bin, Ext: body length
    };
    const char *data; // Str, Bin, Ext body
};

class MpReader {
public:
    MpReader(const uint8_t *p, size_t len) noexcept : p_(p), len_(len) {}

    size_t pos() const noexcept { return pos_; }
    size_t len() const noexcept { return len_; }
    const uint8_t *data() const noexcept { return p_; }
    bool at_end() const noexcept { return pos_ == len_; }
    bool failed() const noexcept { return err_ != nullptr; }
    size_t error_offset() const noexcept { return err_off_; }
    const char *error() const noexcept { return err_ ? err_ : ""; }

    // Record the first problem; always returns false.
    bool fail(size_t off, const char *why) noexcept {
        if (!err_) {
            err_ = why;
            err_off_ = off > len_ ? len_ : off;
        }
        return false;
    }

    bool head(MpHead &h) noexcept {
        if (err_)
            return false;
        h.off = pos_;
        h.data = nullptr;
        if (pos_ >= len_)
            return fail(pos_, "truncated: a value is missing at the end of the payload");
        uint8_t b = p_[pos_];
        if (b <= 0x7f)
            return scalar(h, MpKind::Uint, 1, b);
        if (b >= 0xe0) {
            h.kind = MpKind::Int, h.i = static_cast<int8_t>(b), pos_++;
            return true;
        }
        if (b >= 0x80 && b <= 0x8f)
            return container(h, MpKind::Map, 1, b & 0x0f);
        if (b >= 0x90 && b <= 0x9f)
            return container(h, MpKind::Array, 1, b & 0x0f);
        if (b >= 0xa0 && b <= 0xbf)
            return body(h, MpKind::Str, 1, b & 0x1f);
        switch (b) {
        case 0xc0: h.kind = MpKind::Nil, pos_++; return true;
        case 0xc2: return scalar(h, MpKind::Bool, 1, 0);
        case 0xc3: return scalar(h, MpKind::Bool, 1, 1);
        case 0xc4: return sized(h, MpKind::Bin, 1);
        case 0xc5: return sized(h, MpKind::Bin, 2);
        case 0xc6: return sized(h, MpKind::Bin, 4);
        case 0xc7: return sized(h, MpKind::Ext, 1, 1);
        case 0xc8: return sized(h, MpKind::Ext, 2, 1);
        case 0xc9: return sized(h, MpKind::Ext, 4, 1);
        case 0xca: {
            uint64_t v;
            if (!be(1, 4, v))
                return false;
            uint32_t bits = static_cast<uint32_t>(v);
            float f;
            std::memcpy(&f, &bits, 4);
            h.kind = MpKind::Float, h.f = f, pos_ += 5;
            return true;
        }
        case 0xcb: {
            uint64_t v;
            if (!be(1, 8, v))
                return false;
            h.kind = MpKind::Float, std::memcpy(&h.f, &v, 8), pos_ += 9;
            return true;
        }
        case 0xcc: return uint_n(h, 1);
        case 0xcd: return uint_n(h, 2);
        case 0xce: return uint_n(h, 4);
        case 0xcf: return uint_n(h, 8);
        case 0xd0: return int_n(h, 1);
        case 0xd1: return int_n(h, 2);
        case 0xd2: return int_n(h, 4);
        case 0xd3: return int_n(h, 8);
        case 0xd4: return body(h, MpKind::Ext, 2, 1);
        case 0xd5: return body(h, MpKind::Ext, 2, 2);
        case 0xd6: return body(h, MpKind::Ext, 2, 4);
        case 0xd7: return body(h, MpKind::Ext, 2, 8);
        case 0xd8: return body(h, MpKind::Ext, 2, 16);
        case 0xd9: return sized(h, MpKind::Str, 1);
        case 0xda: return sized(h, MpKind::Str, 2);
        case 0xdb: return sized(h, MpKind::Str, 4);
        case 0xdc: return sized_container(h, MpKind::Array, 2);
        case 0xdd: return sized_container(h, MpKind::Array, 4);
        case 0xde: return sized_container(h, MpKind::Map, 2);
        case 0xdf: return sized_container(h, MpKind::Map, 4);
        default: return fail(pos_, "0xc1 is not a MessagePack type byte");
        }
    }

    // The next value when it is a non-negative integer in its usual forms (positive fixint,
    // uint 8/16/32/64) and lies wholly inside the payload: read it into v and return true.
    // Otherwise read nothing and return false, and the caller takes head(), with its checks
    // and error reports. Token ids and block hashes, most of a payload, take this path: one
    // branch on the type byte and one bounds check, where head() walks its whole dispatch.
    bool try_uint(uint64_t &v) noexcept {
        if (err_ || pos_ >= len_)
            return false;
        const uint8_t b = p_[pos_];
        if (b <= 0x7f) {
            v = b, pos_++;
            return true;
        }
        if (b < 0xcc || b > 0xcf)
            return false;
        const size_t n = size_t{1} << (b - 0xcc);
        if (len_ - pos_ < 1 + n)
            return false;
        const uint8_t *q = p_ + pos_ + 1;
        switch (n) {
        case 1: v = q[0]; break;
        case 2: v = uint64_t{q[0]} << 8 | q[1]; break;
        case 4: {
            uint32_t w;
            std::memcpy(&w, q, 4);
            v = __builtin_bswap32(w);
            break;
        }
        default: {
            uint64_t w;
            std::memcpy(&w, q, 8);
            v = __builtin_bswap64(w);
            break;
        }
        }
        pos_ += 1 + n;
        return true;
    }

    // Up to n values in a row that try_uint() reads and that fit 32 bits, into dst; returns
    // how many. Stops before the first value that is not such, which the caller then reads
    // with its checks and error reports. Token ids: one loop over the array instead of a
    // call per id through the caller's checks.
    size_t try_uints32(uint32_t *dst, size_t n) noexcept {
        size_t i = 0;
        while (i < n && !err_) {
            // While 5 bytes remain every form of a 32-bit value is whole, so the type byte
            // alone decides: a fixint, uint 32, 16 or 8 without try_uint()'s bounds check
            // and size dispatch (token ids were a fifth of a replica's decode and apply).
            const uint8_t *q = p_ + pos_;
            const uint8_t *const fast_end = len_ - pos_ >= 5 ? p_ + len_ - 4 : q;
            for (; i < n && q < fast_end; i++) {
                const uint8_t b = q[0];
                if (b <= 0x7f) {
                    dst[i] = b;
                    q += 1;
                } else if (b == 0xce) {
                    uint32_t w;
                    std::memcpy(&w, q + 1, 4);
                    dst[i] = __builtin_bswap32(w);
                    q += 5;
                } else if (b == 0xcd) {
                    dst[i] = uint32_t{q[1]} << 8 | q[2];
                    q += 3;
                } else if (b == 0xcc) {
                    dst[i] = q[1];
                    q += 2;
                } else {
                    break; // a uint 64, or not an integer: below
                }
            }
            pos_ = static_cast<size_t>(q - p_);
            if (i == n)
                break;
            // The last bytes, or a uint 64 that may hold a 32-bit value: one at a time.
            const size_t at = pos_;
            uint64_t v;
            if (!try_uint(v))
                break;
            if (v > UINT32_MAX) {
                pos_ = at;
                break;
            }
            dst[i++] = static_cast<uint32_t>(v);
        }
        return i;
    }

    // Skip one whole value, nested containers included. `level` is the nesting level the
    // value has if it is a container (the payload's outermost container is level 1): a
    // container deeper than max_depth() fails the payload. Iterative (a fixed stack of
    // counts of values still to skip per level), so no nesting can exhaust the C++ stack.
    bool skip(unsigned level) noexcept {
        uint64_t pending[kMaxDepthCap + 2];
        unsigned top = 0;
        pending[0] = 1;
        MpHead h;
        for (;;) {
            while (pending[top] == 0) {
                if (top == 0)
                    return true;
                top--;
            }
            if (!head(h))
                return false;
            pending[top]--;
            if (h.kind == MpKind::Array || h.kind == MpKind::Map) {
                if (level + top > max_depth_)
                    return fail(h.off, "nested deeper than the decoder's max_depth");
                pending[++top] = h.kind == MpKind::Map ? 2 * static_cast<uint64_t>(h.count)
                                                       : h.count;
            }
        }
    }

    // Containers nested deeper than this fail (KVREG_WIRE_DEC_OPT_MAX_DEPTH).
    static constexpr unsigned kMaxDepthCap = 64;
    unsigned max_depth() const noexcept { return max_depth_; }
    void set_max_depth(unsigned d) noexcept { max_depth_ = d > kMaxDepthCap ? kMaxDepthCap : d; }
    // Fail when a container at `level` is deeper than allowed (callers that walk containers
    // themselves rather than through skip()).
    bool check_depth(const MpHead &h, unsigned level) noexcept {
        if (level > max_depth_)
            return fail(h.off, "nested deeper than the decoder's max_depth");
        return true;
    }

    // Rewind to an earlier position (a second pass over a map). Only after success.
    void seek(size_t pos) noexcept { pos_ = pos; }

private:
    bool be(size_t skip, size_t n, uint64_t &v) noexcept {
        if (len_ - pos_ < skip + n)
            return fail(pos_, "truncated: a number runs past the end of the payload");
        v = 0;
        for (size_t k = 0; k < n; k++)
            v = (v << 8) | p_[pos_ + skip + k];
        return true;
    }
    bool scalar(MpHead &h, MpKind k, size_t width, uint64_t v) noexcept {
        h.kind = k, h.u = v, pos_ += width;
        return true;
    }
    bool uint_n(MpHead &h, size_t n) noexcept {
        uint64_t v;
        if (!be(1, n, v))
            return false;
        h.kind = MpKind::Uint, h.u = v, pos_ += 1 + n;
        return true;
    }
    bool int_n(MpHead &h, size_t n) noexcept {
        uint64_t v;
        if (!be(1, n, v))
            return false;
        // sign-extend the n-byte two's complement value
        unsigned shift = static_cast<unsigned>(64 - 8 * n);
        int64_t s = static_cast<int64_t>(v << shift) >> shift;
        if (s >= 0)
            h.kind = MpKind::Uint, h.u = static_cast<uint64_t>(s);
        else
            h.kind = MpKind::Int, h.i = s;
        pos_ += 1 + n;
        return true;
    }
    // Body of `len` bytes after a head of `hdr` bytes (Ext adds its 1-byte type to hdr).
    bool body(MpHead &h, MpKind k, size_t hdr, size_t len) noexcept {
        if (len_ - pos_ < hdr || len_ - pos_ - hdr < len)
            return fail(pos_, "truncated: a string, bytes or ext value runs past the end");
        h.kind = k, h.len = len, h.data = reinterpret_cast<const char *>(p_ + pos_ + hdr);
        pos_ += hdr + len;
        return true;
    }
    bool sized(MpHead &h, MpKind k, size_t n, size_t ext_type = 0) noexcept {
        uint64_t len;
        if (!be(1, n, len))
            return false;
        return body(h, k, 1 + n + ext_type, static_cast<size_t>(len));
    }
    bool container(MpHead &h, MpKind k, size_t hdr, uint64_t count) noexcept {
        // every element takes at least one byte: a count beyond the bytes left is a lie
        uint64_t min_bytes = k == MpKind::Map ? 2 * count : count;
        if (min_bytes > len_ - pos_ - hdr)
            return fail(pos_, "truncated: an array or map has more elements than bytes left");
        h.kind = k, h.count = static_cast<size_t>(count), pos_ += hdr;
        return true;
    }
    bool sized_container(MpHead &h, MpKind k, size_t n) noexcept {
        uint64_t count;
        if (!be(1, n, count))
            return false;
        return container(h, k, 1 + n, count);
    }

    const uint8_t *p_;
    size_t len_;
    size_t pos_ = 0;
    const char *err_ = nullptr;
    size_t err_off_ = 0;
    unsigned max_depth_ = 32;
};

} // namespace kvreg::wire
