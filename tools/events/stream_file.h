/*
 * Stream files: the payloads of one run, in order, in one file (kvreg-replay --wire-out FILE
 * writes them, kvreg-events decode reads them). This is the one place the format is defined:
 *
 *   offset 0   8 bytes   magic and version: the ASCII characters "KVRGSTR1"
 *   then, per payload, in publication order:
 *              4 bytes   payload length L, unsigned, little-endian
 *              L bytes   the payload, exactly as a publisher would send it (a vLLM
 *                        KVEventBatch, Dynamo RouterEvents in JSON or msgpack, ...)
 *
 * The file ends right after the last payload; a file that ends inside a length or a payload
 * is truncated (the reader says so, with the byte offset). No index, no checksum: the file
 * is written front to back by one writer, and each payload is self-describing.
 */
#ifndef KVREG_EVENTS_STREAM_FILE_H
#define KVREG_EVENTS_STREAM_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define STREAM_FILE_MAGIC "KVRGSTR1"
#define STREAM_FILE_MAGIC_LEN 8
#define STREAM_FILE_MAX_PAYLOAD 0xFFFFFFFFu

/* Writer (tools/replay/wire_stream.c). Create PATH (truncating it) and write the magic: the FILE, or NULL with errno. */
FILE *stream_file_create(const char *path);
/* Append one payload and flush it: 0, or -1 with errno (EFBIG: longer than the format allows). */
int stream_file_append(FILE *f, const uint8_t *payload, size_t len);

/* Reader (stream_file.c). Does this buffer start with the magic? */
int stream_file_is(const uint8_t *p, size_t len);
/* Up to cap bytes of f into p (short only at the end of the input or on an error). */
size_t stream_read_up_to(FILE *f, uint8_t *p, size_t cap);
/* Decode every payload of a stream file, read from f, whose magic the caller has read, one
 * record at a time (a record is held in memory only up to the decoder's payload limit plus one
 * byte: a longer one is rejected as too large and the rest of it skipped), with FORMAT
 * (KVREG_WIRE_*, or the decoder's "dynamo auto" value, resolved per payload), and print one
 * JSON line per event, as `kvreg-events decode` does for single payloads (all: --all-fields).
 * A payload that does not decode gets one line on stderr (payload number, byte offset in the
 * file, reason) and the rest still decode. Returns 0, or 1 if any payload was rejected or the
 * file is truncated or unreadable. */
int stream_file_decode(const char *path, FILE *f, uint32_t format, int all,
                       uint32_t (*resolve)(uint32_t format, const uint8_t *p, size_t len));

#endif
