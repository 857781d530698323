#include "wire_out.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <kvreg_wire.h>

#include "../events/stream_file.h"

static const struct {
    const char *name, *ext;
    uint32_t format;
} formats[] = {
    {"vllm", "msgpack", KVREG_WIRE_VLLM},
    {"vllm-legacy", "msgpack", KVREG_WIRE_VLLM_LEGACY},
    {"dynamo-json", "json", KVREG_WIRE_DYNAMO_JSON},
    {"dynamo-msgpack", "msgpack", KVREG_WIRE_DYNAMO_MSGPACK},
};
#define N_FORMATS (sizeof formats / sizeof formats[0])

int wire_out_format(const char *name, uint32_t *format)
{
    for (size_t i = 0; i < N_FORMATS; i++)
        if (strcmp(name, formats[i].name) == 0) {
            *format = formats[i].format;
            return 0;
        }
    return -1;
}

static const char *extension(uint32_t format)
{
    for (size_t i = 0; i < N_FORMATS; i++)
        if (formats[i].format == format)
            return formats[i].ext;
    return "bin";
}

int wire_out_open(wire_out *w, const char *path, int per_payload, const char *format_name,
                  event_sink *sink, const namer *nm)
{
    const char *dir = path;
    memset(w, 0, sizeof *w);
    hmap_init(&w->id_of_block_hash);
    w->dir = dir;
    w->per_payload = per_payload;
    w->format_name = format_name;
    w->sink = sink;
    w->nm = nm;
    if (wire_out_format(format_name, &w->format) != 0) {
        fprintf(stderr, "kvreg-replay: --wire: unknown format '%s'\n", format_name);
        return -1;
    }
    if (per_payload && mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "kvreg-replay: --wire-out-per-payload %s: %s\n", dir, strerror(errno));
        return -1;
    }
    if (!per_payload && !(w->stream = stream_file_create(path))) {
        const int e = errno;
        fprintf(stderr, "kvreg-replay: --wire-out %s: %s%s\n", path, strerror(e),
                e == EISDIR ? " (--wire-out writes one stream file; --wire-out-per-payload DIR "
                              "writes one file per payload)" : "");
        return -1;
    }
    int rc = kvreg_wire_encoder_new(&w->enc, w->format);
    if (rc == KVREG_OK)
        rc = kvreg_wire_encoder_set(w->enc, KVREG_WIRE_OPT_BLOCK_SIZE, nm->block_tokens);
    if (rc != KVREG_OK) {
        fprintf(stderr, "kvreg-replay: --wire: cannot make the encoder: %s\n",
                kvreg_strerror(rc));
        return -1;
    }
    return 0;
}

void wire_out_close(wire_out *w)
{
    if (w->stream)
        fclose(w->stream); /* every payload was flushed (and checked) when appended */
    kvreg_wire_encoder_free(w->enc);
    hmap_free(&w->id_of_block_hash);
    free(w->scratch_bh);
    free(w->scratch_sh);
    free(w->copy);
    free(w->tokens);
    memset(w, 0, sizeof *w);
}

int wire_out_note_request(wire_out *w, namer *nm, const replay_request *req)
{
    if (req->n_ids > w->scratch_cap) {
        uint64_t *bh = realloc(w->scratch_bh, req->n_ids * sizeof *bh);
        if (bh)
            w->scratch_bh = bh;
        uint64_t *sh = realloc(w->scratch_sh, req->n_ids * sizeof *sh);
        if (sh)
            w->scratch_sh = sh;
        if (!bh || !sh)
            return -1;
        w->scratch_cap = req->n_ids;
    }
    if (req->n_ids && namer_chain(nm, req->ids, req->n_ids, w->scratch_bh, w->scratch_sh) != 0)
        return -1;
    for (size_t i = 0; i < req->n_ids; i++) {
        int inserted;
        if (hmap_put(&w->id_of_block_hash, w->scratch_bh[i], req->ids[i], &inserted) != 0)
            return -1;
    }
    return 0;
}

static void wire_error(wire_out *w, const char *what, const char *detail)
{
    if (w->errors++ == 0)
        fprintf(stderr, "kvreg-replay: --wire-out: %s: %s\n", what, detail);
}

/* The events with each Register's tokens put back; NULL if out of memory. */
static const kvreg_event *with_tokens(wire_out *w, const kvreg_event *events, size_t n)
{
    const uint32_t bt = w->nm->block_tokens;
    if (n > w->copy_cap) {
        kvreg_event *c = realloc(w->copy, n * sizeof *c);
        if (c)
            w->copy = c;
        uint32_t *t = (size_t)bt > SIZE_MAX / sizeof *t / n ? NULL
                                                             : realloc(w->tokens, n * bt * sizeof *t);
        if (t)
            w->tokens = t;
        if (!c || !t)
            return NULL;
        w->copy_cap = n;
    }
    memcpy(w->copy, events, n * sizeof *events);
    for (size_t i = 0; i < n; i++) {
        kvreg_event *e = &w->copy[i];
        const uint64_t *id = e->kind == KVREG_EVENT_REGISTER && e->n_tokens == 0
                                 ? hmap_get(&w->id_of_block_hash, e->block_hash)
                                 : NULL;
        if (id) {
            namer_tokens(w->nm, *id, w->tokens + i * bt);
            e->tokens = w->tokens + i * bt;
            e->n_tokens = bt;
        }
    }
    return w->copy;
}

static void write_payload(wire_out *w, const uint8_t *p, size_t len)
{
    if (w->stream) {
        if (stream_file_append(w->stream, p, len) != 0)
            wire_error(w, w->dir, strerror(errno));
        else
            w->batches++;
        return;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/%08llu.%s", w->dir, (unsigned long long)w->batches,
             extension(w->format));
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, len, f) != len) {
        wire_error(w, path, strerror(errno));
        if (f)
            fclose(f);
        return;
    }
    if (fclose(f) != 0) {
        wire_error(w, path, strerror(errno));
        return;
    }
    w->batches++;
}

void wire_out_fn(const kvreg_event *events, size_t n_events, void *user_data)
{
    wire_out *w = user_data;
    event_sink_fn(events, n_events, w->sink);
    const kvreg_event *ev = with_tokens(w, events, n_events);
    if (!ev) {
        wire_error(w, "encode", "out of memory");
        return;
    }
    size_t done = 0;
    while (done < n_events) {
        const uint8_t *p;
        size_t len, used = 0;
        int rc = kvreg_wire_encode(w->enc, ev + done, n_events - done, -1.0, &used, &p, &len);
        if (rc == KVREG_OK) {
            write_payload(w, p, len);
            done += used;
        } else {
            /* an event the format cannot carry (it was counted): skip it, keep the rest */
            wire_error(w, "an event cannot be encoded", kvreg_strerror(rc));
            done++;
        }
    }
}
