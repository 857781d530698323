/*
 * wire_out: --wire FORMAT --wire-out FILE. Every batch of events the registry delivers (one
 * callback call) is encoded with libkvreg's wire encoder: the payloads an engine would
 * publish, appended in order to one stream file (format: tools/events/stream_file.h), or
 * with --wire-out-per-payload DIR written to DIR/NNNNNNNN.msgpack (or .json), numbered from
 * 00000000. (A long run makes tens of thousands of payloads: one file each only on request.)
 *
 * The replay registers blocks by hash only (the model has no real tokens), but vLLM payloads
 * must carry each block's tokens. The tokens of a block id are a pure function of the id
 * (naming.h), so wire_out learns hash -> id from each request before it runs
 * (wire_out_note_request) and puts the tokens back into Register events before encoding.
 */
#ifndef KVREG_REPLAY_WIRE_OUT_H
#define KVREG_REPLAY_WIRE_OUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <kvreg.h>

#include "events.h"
#include "hmap.h"
#include "naming.h"
#include "workload.h"

typedef struct wire_out {
    const char *dir;        /* the FILE or DIR; NULL: no wire output */
    int per_payload;        /* 1: DIR/NNNNNNNN.ext files; 0: one stream file */
    FILE *stream;           /* the stream file (per_payload 0) */
    uint32_t format;        /* KVREG_WIRE_* */
    const char *format_name;
    struct kvreg_wire_encoder *enc;
    event_sink *sink;       /* the counting / verifying consumer, called first */
    const namer *nm;
    hmap id_of_block_hash;  /* block_hash -> block id */
    uint64_t *scratch_bh, *scratch_sh;
    size_t scratch_cap;
    kvreg_event *copy;      /* events with tokens put back */
    uint32_t *tokens;
    size_t copy_cap;
    uint64_t batches;       /* files written */
    uint64_t errors;        /* encode or write failures (reported once, then counted) */
} wire_out;

/* "vllm", "vllm-legacy", "dynamo-json", "dynamo-msgpack" -> KVREG_WIRE_*; -1 if unknown. */
int wire_out_format(const char *name, uint32_t *format);

/* Create the stream FILE, or DIR if needed (per_payload), and the encoder. 0, or -1 after
 * printing why. */
int wire_out_open(wire_out *w, const char *path, int per_payload, const char *format_name,
                  event_sink *sink, const namer *nm);
void wire_out_close(wire_out *w);

/* Remember the block ids of a request (call before the model runs it). 0 or -1 (memory). */
int wire_out_note_request(wire_out *w, namer *nm, const replay_request *req);

/* The kvreg_event_fn when --wire-out is given; user_data is the wire_out. */
void wire_out_fn(const kvreg_event *events, size_t n_events, void *user_data);

#endif
