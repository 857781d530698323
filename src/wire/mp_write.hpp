// MessagePack writing for the encoders: msgpack-c's packer over an sbuffer, with the few
// helpers the wire formats need. Every msgpack-c call can fail only when the sbuffer cannot
// grow; failures are remembered (ok()) instead of checked after each call, so the encoders
// read like the format they write and report KVREG_ENOMEM once at the end.
#pragma once

#include <msgpack.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace kvreg::wire {

class MpWriter {
public:
    MpWriter() noexcept {
        msgpack_sbuffer_init(&sb_);
        msgpack_packer_init(&pk_, &sb_, msgpack_sbuffer_write);
    }
    ~MpWriter() { msgpack_sbuffer_destroy(&sb_); }
    MpWriter(const MpWriter &) = delete;
    MpWriter &operator=(const MpWriter &) = delete;

    // Start a new payload, keeping the buffer's memory.
    void clear() noexcept {
        msgpack_sbuffer_clear(&sb_);
        failed_ = false;
    }
    bool ok() const noexcept { return !failed_; }
    const uint8_t *data() const noexcept { return reinterpret_cast<const uint8_t *>(sb_.data); }
    size_t size() const noexcept { return sb_.size; }

    void array(size_t n) noexcept { note(msgpack_pack_array(&pk_, n)); }
    void map(size_t n) noexcept { note(msgpack_pack_map(&pk_, n)); }
    void nil() noexcept { note(msgpack_pack_nil(&pk_)); }
    void f64(double v) noexcept { note(msgpack_pack_double(&pk_, v)); }
    // Smallest form, as msgspec writes ints.
    void uint(uint64_t v) noexcept { note(msgpack_pack_uint64(&pk_, v)); }
    void sint(int64_t v) noexcept { note(msgpack_pack_int64(&pk_, v)); }
    // Hashes: always the 9-byte 0xcf form, so that decoders which only accept 64-bit integer
    // types as hashes (llm-d) take every value, also the ones below 2^32.
    void hash(uint64_t v) noexcept { note(msgpack_pack_fix_uint64(&pk_, v)); }
    void str(const char *s) noexcept { str(s, std::strlen(s)); }
    void str(const char *s, size_t n) noexcept { note(msgpack_pack_str_with_body(&pk_, s, n)); }
    void str_or_nil(const char *s) noexcept {
        if (s)
            str(s);
        else
            nil();
    }
    // Raw bytes (JSON text shares the buffer with the msgpack encoders).
    void raw(const char *s, size_t n) noexcept { note(msgpack_sbuffer_write(&sb_, s, n)); }
    void raw(const char *s) noexcept { raw(s, std::strlen(s)); }

private:
    void note(int rc) noexcept {
        if (rc != 0)
            failed_ = true;
    }
    msgpack_sbuffer sb_;
    msgpack_packer pk_;
    bool failed_ = false;
};

} // namespace kvreg::wire
