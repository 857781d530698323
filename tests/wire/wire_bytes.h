/* Test helper: payloads written by hand as text. Tokens separated by blanks: hex digits
 * (any even number: "cf", "1f2e3d4c") are bytes; "quoted text" is its bytes as they are
 * (the string header is written separately, by hand, as on the wire). */
#ifndef WIRE_BYTES_H
#define WIRE_BYTES_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static inline int wire_hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Returns the byte count (aborts on a malformed spec: the test itself is wrong). */
static inline size_t wire_bytes(const char *spec, uint8_t *out, size_t cap)
{
    size_t n = 0;
    const char *s = spec;
    while (*s) {
        if (*s == ' ' || *s == '\n' || *s == '\t') {
            s++;
        } else if (*s == '"') {
            s++;
            while (*s && *s != '"') {
                if (n >= cap)
                    abort();
                out[n++] = (uint8_t)*s++;
            }
            if (*s != '"')
                abort();
            s++;
        } else {
            int hi = wire_hex_digit(s[0]), lo = s[1] ? wire_hex_digit(s[1]) : -1;
            if (hi < 0 || lo < 0 || n >= cap)
                abort();
            out[n++] = (uint8_t)(hi << 4 | lo);
            s += 2;
        }
    }
    return n;
}

#endif
