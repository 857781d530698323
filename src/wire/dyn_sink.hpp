// Writing Dynamo's RouterEvent shape as JSON (serde_json's compact form) or as MessagePack
// maps with field names (rmp_serde::to_vec_named), from one description of it: the encoder
// (encode_dynamo.cpp) and the re-encoder (reencode_dynamo.cpp) share it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "wire/mp_write.hpp"

namespace kvreg::wire {

// The two outputs differ only in how a key, an integer or a container is spelt; this small
// sink keeps one description of the RouterEvent for both.
class Sink {
public:
    Sink(MpWriter &w, bool json) : w_(w), json_(json) {}

    void begin_map(size_t n) {
        if (json_)
            w_.raw("{", 1), first_ = true;
        else
            w_.map(n);
    }
    void end_map() {
        if (json_)
            w_.raw("}", 1), first_ = false;
    }
    void begin_array(size_t n) {
        if (json_)
            w_.raw("[", 1), first_ = true;
        else
            w_.array(n);
    }
    void end_array() {
        if (json_)
            w_.raw("]", 1), first_ = false;
    }
    // An element of an array (JSON needs the comma).
    void element() {
        if (json_ && !first_)
            w_.raw(",", 1);
        first_ = false;
    }
    void key(const char *k) {
        if (json_) {
            element();
            w_.raw("\"", 1), w_.raw(k), w_.raw("\":", 2);
            first_ = true; // the value follows without a comma
        } else {
            w_.str(k);
        }
    }
    void u64(uint64_t v, bool is_hash) {
        if (json_) {
            char buf[24];
            char *p = buf + sizeof buf;
            do {
                *--p = static_cast<char>('0' + v % 10);
                v /= 10;
            } while (v);
            w_.raw(p, static_cast<size_t>(buf + sizeof buf - p));
            first_ = false;
        } else if (is_hash) {
            w_.hash(v);
        } else {
            w_.uint(v);
        }
    }
    void string(const char *s) { // constant names only: no escaping needed
        if (json_)
            w_.raw("\"", 1), w_.raw(s), w_.raw("\"", 1), first_ = false;
        else
            w_.str(s);
    }
    void nil() {
        if (json_)
            w_.raw("null", 4), first_ = false;
        else
            w_.nil();
    }

    // Any string, escaped as serde_json escapes (", \\ and control characters; the rest,
    // UTF-8 included, as it is), or as a msgpack str.
    void text(const char *s, size_t n) {
        if (!json_) {
            w_.str(s, n);
            return;
        }
        static const char hex[] = "0123456789abcdef";
        w_.raw("\"", 1);
        size_t run = 0; // bytes copied as they are, in one go
        for (size_t i = 0; i < n; i++) {
            const auto c = static_cast<unsigned char>(s[i]);
            if (c >= 0x20 && c != '"' && c != '\\')
                continue;
            w_.raw(s + run, i - run);
            run = i + 1;
            char esc[6] = {'\\', 0, 0, 0, 0, 0};
            size_t len = 2;
            switch (c) {
            case '"': esc[1] = '"'; break;
            case '\\': esc[1] = '\\'; break;
            case '\b': esc[1] = 'b'; break;
            case '\f': esc[1] = 'f'; break;
            case '\n': esc[1] = 'n'; break;
            case '\r': esc[1] = 'r'; break;
            case '\t': esc[1] = 't'; break;
            default:
                esc[1] = 'u', esc[2] = '0', esc[3] = '0', esc[4] = hex[c >> 4],
                esc[5] = hex[c & 15], len = 6;
            }
            w_.raw(esc, len);
        }
        w_.raw(s + run, n - run);
        w_.raw("\"", 1);
        first_ = false;
    }
    // A value's bytes as they came (same format as this sink writes).
    void value_bytes(const char *p, size_t n) {
        w_.raw(p, n);
        first_ = false;
    }

private:
    MpWriter &w_;
    bool json_;
    bool first_ = true;
};


} // namespace kvreg::wire
