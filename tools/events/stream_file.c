/* Stream files, the reader (kvreg-events decode); the format is in stream_file.h, the writer
 * in tools/replay/wire_stream.c. */
#include "stream_file.h"

#include <string.h>

#include <kvreg.h>
#include <kvreg_wire.h>

#include "commands.h"

int stream_file_is(const uint8_t *p, size_t len)
{
    return len >= STREAM_FILE_MAGIC_LEN && memcmp(p, STREAM_FILE_MAGIC, STREAM_FILE_MAGIC_LEN) == 0;
}

int stream_file_decode(const char *path, const uint8_t *p, size_t len, uint32_t format,
                       uint32_t (*resolve)(uint32_t format, const uint8_t *p, size_t len))
{
    int status = EVENTS_EXIT_OK;
    size_t at = STREAM_FILE_MAGIC_LEN;
    for (unsigned long long record = 0; at < len; record++) {
        if (len - at < 4) {
            fprintf(stderr, "kvreg-events: %s: truncated stream file: payload %llu's length at "
                            "byte %zu is cut short\n", path, record, at);
            return EVENTS_EXIT_REJECTED;
        }
        const size_t n = (size_t)p[at] | (size_t)p[at + 1] << 8 | (size_t)p[at + 2] << 16 |
                         (size_t)p[at + 3] << 24;
        const size_t start = at + 4;
        if (len - start < n) {
            fprintf(stderr, "kvreg-events: %s: truncated stream file: payload %llu at byte %zu "
                            "is %zu bytes, the file has %zu more\n", path, record, start, n,
                    len - start);
            return EVENTS_EXIT_REJECTED;
        }
        const uint32_t fmt = resolve(format, p + start, n);
        kvreg_wire_decoder *dec = NULL;
        int rc = kvreg_wire_decoder_new(&dec, fmt);
        const kvreg_wire_event *ev = NULL;
        size_t n_ev = 0, off = 0;
        if (rc == KVREG_OK)
            rc = kvreg_wire_decode(dec, p + start, n, &ev, &n_ev, &off);
        if (rc == KVREG_OK) {
            const int dynamo = fmt == KVREG_WIRE_DYNAMO_JSON || fmt == KVREG_WIRE_DYNAMO_MSGPACK;
            for (size_t i = 0; i < n_ev; i++)
                events_print_event(&ev[i], dynamo, NULL);
        } else if (rc == KVREG_EPROTO) {
            fprintf(stderr, "kvreg-events: %s: payload %llu rejected at byte %zu of the file: "
                            "%s\n", path, record, start + off, kvreg_wire_decoder_error(dec));
            status = EVENTS_EXIT_REJECTED;
        } else {
            fprintf(stderr, "kvreg-events: %s: payload %llu: %s\n", path, record,
                    kvreg_strerror(rc));
            status = EVENTS_EXIT_REJECTED;
        }
        kvreg_wire_decoder_free(dec);
        at = start + n;
    }
    return status;
}
