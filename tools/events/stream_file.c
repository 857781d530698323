/* Stream files, the reader (kvreg-events decode); the format is in stream_file.h, the writer
 * in tools/replay/wire_stream.c. */
#include "stream_file.h"

#include <stdlib.h>
#include <string.h>

#include <kvreg.h>
#include <kvreg_wire.h>

#include "commands.h"

int stream_file_is(const uint8_t *p, size_t len)
{
    return len >= STREAM_FILE_MAGIC_LEN && memcmp(p, STREAM_FILE_MAGIC, STREAM_FILE_MAGIC_LEN) == 0;
}

size_t stream_read_up_to(FILE *f, uint8_t *p, size_t cap)
{
    size_t n = 0;
    while (n < cap) {
        const size_t got = fread(p + n, 1, cap - n, f);
        if (got == 0)
            break;
        n += got;
    }
    return n;
}

int stream_file_decode(const char *path, FILE *f, uint32_t format, int all,
                       uint32_t (*resolve)(uint32_t format, const uint8_t *p, size_t len))
{
    /* A record longer than the decoder's limit is rejected by the decoder from its first
     * limit + 1 bytes, the rest skipped: one record's buffer is at most limit + 1 bytes. */
    const size_t limit = KVREG_WIRE_DEC_DEFAULT_MAX_PAYLOAD;
    kvreg_wire_decoder *dec[KVREG_WIRE_SGLANG + 1] = {NULL};
    uint8_t *buf = NULL;
    size_t size = 0;
    int status = EVENTS_EXIT_OK;
    unsigned long long at = STREAM_FILE_MAGIC_LEN; /* the file offset of the next record */
    for (unsigned long long record = 0;; record++) {
        uint8_t lb[4];
        size_t got = stream_read_up_to(f, lb, sizeof lb);
        if (ferror(f))
            goto unreadable;
        if (got == 0)
            break; /* the end, right after a payload */
        if (got < sizeof lb) {
            fprintf(stderr, "kvreg-events: %s: truncated stream file: payload %llu's length at "
                            "byte %llu is cut short\n", path, record, at);
            status = EVENTS_EXIT_REJECTED;
            break;
        }
        const size_t n = (size_t)lb[0] | (size_t)lb[1] << 8 | (size_t)lb[2] << 16 |
                         (size_t)lb[3] << 24;
        const unsigned long long start = at + 4;
        const size_t take = n > limit ? limit + 1 : n;
        if (take > size) {
            uint8_t *bigger = realloc(buf, take);
            if (!bigger) {
                fprintf(stderr, "kvreg-events: %s: payload %llu: out of memory\n", path, record);
                status = EVENTS_EXIT_REJECTED;
                break;
            }
            buf = bigger, size = take;
        }
        got = stream_read_up_to(f, buf, take);
        if (ferror(f))
            goto unreadable;
        if (got < take) {
            fprintf(stderr, "kvreg-events: %s: truncated stream file: payload %llu at byte %llu "
                            "is %zu bytes, the file has %zu more\n", path, record, start, n, got);
            status = EVENTS_EXIT_REJECTED;
            break;
        }
        const uint32_t fmt = resolve(format, buf, take);
        int rc = fmt < sizeof dec / sizeof dec[0] ? KVREG_OK : KVREG_EINVAL;
        const kvreg_wire_event *ev = NULL;
        size_t n_ev = 0, off = 0;
        if (rc == KVREG_OK && !dec[fmt])
            rc = kvreg_wire_decoder_new(&dec[fmt], fmt);
        if (rc == KVREG_OK)
            rc = kvreg_wire_decode(dec[fmt], buf, take, &ev, &n_ev, &off);
        if (rc == KVREG_OK) {
            events_print_events(dec[fmt], ev, n_ev, fmt, all);
        } else if (rc == KVREG_EPROTO) {
            fprintf(stderr, "kvreg-events: %s: payload %llu rejected at byte %llu of the file: "
                            "%s\n", path, record, start + off, kvreg_wire_decoder_error(dec[fmt]));
            status = EVENTS_EXIT_REJECTED;
        } else {
            fprintf(stderr, "kvreg-events: %s: payload %llu: %s\n", path, record,
                    kvreg_strerror(rc));
            status = EVENTS_EXIT_REJECTED;
        }
        /* the rest of a record too long to decode: read past it (the next ones still count) */
        size_t skipped = 0;
        while (skipped < n - take) {
            const size_t want = n - take - skipped < size ? n - take - skipped : size;
            const size_t r = stream_read_up_to(f, buf, want);
            skipped += r;
            if (r < want)
                break;
        }
        if (ferror(f))
            goto unreadable;
        if (skipped < n - take) {
            fprintf(stderr, "kvreg-events: %s: truncated stream file: payload %llu at byte %llu "
                            "is %zu bytes, the file has %zu more\n", path, record, start, n,
                    take + skipped);
            status = EVENTS_EXIT_REJECTED;
            break;
        }
        at = start + n;
    }
    goto out;
unreadable:
    fprintf(stderr, "kvreg-events: %s: cannot read (at byte %llu)\n", path, at);
    status = EVENTS_EXIT_REJECTED;
out:
    for (size_t i = 0; i < sizeof dec / sizeof dec[0]; i++)
        kvreg_wire_decoder_free(dec[i]);
    free(buf);
    return status;
}
