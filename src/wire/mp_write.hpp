// MessagePack writing for the encoders. The packing code is msgpack-c's own (its
// pack_template.h, the code behind msgpack_pack_*), instantiated here over a growable byte
// buffer that it appends to directly: the stock msgpack_packer calls its write callback through
// a function pointer for every value, which cost more than the rest of the encoder on a
// token-heavy stream (kvreg-bench --workload wire). Same bytes, same library.
//
// Failures (only when the buffer cannot grow) are remembered (ok()) instead of checked after
// each call, so the encoders read like the format they write and report KVREG_ENOMEM once.
#pragma once

#include <msgpack.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace kvreg::wire {

struct MpBuf {
    char *data = nullptr;
    size_t size = 0, cap = 0;
    bool failed = false;
};

// Out of line: the rare path.
int mp_buf_grow(MpBuf *b, size_t need) noexcept;

inline int mp_buf_append(MpBuf *b, const char *p, size_t n) noexcept {
    if (n > b->cap - b->size && mp_buf_grow(b, n) != 0)
        return -1;
    std::memcpy(b->data + b->size, p, n);
    b->size += n;
    return 0;
}

// kvreg_mp_uint64(MpBuf *, v), kvreg_mp_array(MpBuf *, n), ... : msgpack-c's packers. The
// template's timestamp packer calls msgpack_pack_ext* by name: these overloads send it here.
inline int kvreg_mp_ext(MpBuf *b, size_t l, int8_t type);
inline int kvreg_mp_ext_body(MpBuf *b, const void *p, size_t l);
inline int msgpack_pack_ext(MpBuf *b, size_t l, int8_t type) { return kvreg_mp_ext(b, l, type); }
inline int msgpack_pack_ext_body(MpBuf *b, const void *p, size_t l) {
    return kvreg_mp_ext_body(b, p, l);
}
#define msgpack_pack_inline_func(name) inline int kvreg_mp##name
#define msgpack_pack_inline_func_cint(name) inline int kvreg_mp##name
#define msgpack_pack_inline_func_fixint(name) inline int kvreg_mp_fix##name
#define msgpack_pack_user MpBuf *
#define msgpack_pack_append_buffer(user, buf, len)                                               \
    return mp_buf_append((user), reinterpret_cast<const char *>(buf), (len))
#include <msgpack/pack_template.h>

class MpWriter {
public:
    MpWriter() noexcept = default;
    ~MpWriter() { std::free(b_.data); }
    MpWriter(const MpWriter &) = delete;
    MpWriter &operator=(const MpWriter &) = delete;

    // Start a new payload, keeping the buffer's memory.
    void clear() noexcept {
        b_.size = 0;
        b_.failed = false;
    }
    bool ok() const noexcept { return !b_.failed; }
    const uint8_t *data() const noexcept { return reinterpret_cast<const uint8_t *>(b_.data); }
    size_t size() const noexcept { return b_.size; }

    void array(size_t n) noexcept { note(kvreg_mp_array(&b_, n)); }
    void map(size_t n) noexcept { note(kvreg_mp_map(&b_, n)); }
    void nil() noexcept { note(kvreg_mp_nil(&b_)); }
    void f64(double v) noexcept { note(kvreg_mp_double(&b_, v)); }
    // Smallest form, as msgspec writes ints.
    void uint(uint64_t v) noexcept { note(kvreg_mp_uint64(&b_, v)); }
    // n values, each as uint() writes it: room for the largest form is made once, then each
    // is written without a bounds check (token ids, most of a stored event's bytes).
    void uints(const uint32_t *v, size_t n) noexcept {
        if (b_.failed || n > (SIZE_MAX - b_.size) / 5) {
            b_.failed = true;
            return;
        }
        if (5 * n > b_.cap - b_.size && mp_buf_grow(&b_, 5 * n) != 0)
            return;
        unsigned char *out = reinterpret_cast<unsigned char *>(b_.data) + b_.size;
        for (size_t i = 0; i < n; i++) {
            const uint32_t x = v[i];
            if (x < 0x80) {
                *out++ = static_cast<unsigned char>(x);
            } else if (x < 0x100) {
                out[0] = 0xcc, out[1] = static_cast<unsigned char>(x), out += 2;
            } else if (x < 0x10000) {
                out[0] = 0xcd, out[1] = static_cast<unsigned char>(x >> 8), out[2] = static_cast<unsigned char>(x);
                out += 3;
            } else {
                out[0] = 0xce, out[1] = static_cast<unsigned char>(x >> 24);
                out[2] = static_cast<unsigned char>(x >> 16), out[3] = static_cast<unsigned char>(x >> 8);
                out[4] = static_cast<unsigned char>(x), out += 5;
            }
        }
        b_.size = static_cast<size_t>(out - reinterpret_cast<unsigned char *>(b_.data));
    }
    // Smallest form too: non-negative values as unsigned forms, as msgspec does.
    void sint(int64_t v) noexcept { note(kvreg_mp_int64(&b_, v)); }
    // Hashes: always the 9-byte 0xcf form, so that decoders which only accept 64-bit integer
    // types as hashes (llm-d) take every value, also the ones below 2^32.
    void hash(uint64_t v) noexcept { note(kvreg_mp_fix_uint64(&b_, v)); }
    void str(const char *s) noexcept { str(s, std::strlen(s)); }
    void str(const char *s, size_t n) noexcept {
        note(kvreg_mp_str(&b_, n));
        note(mp_buf_append(&b_, s, n));
    }
    // Raw bytes (JSON text shares the buffer with the msgpack encoders).
    void raw(const char *s, size_t n) noexcept { note(mp_buf_append(&b_, s, n)); }
    void raw(const char *s) noexcept { raw(s, std::strlen(s)); }

private:
    void note(int rc) noexcept {
        if (rc != 0)
            b_.failed = true;
    }
    MpBuf b_;
};

} // namespace kvreg::wire
