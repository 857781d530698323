#include "feed.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int feed_init(feed *f, uint64_t worker_id, kvreg_index *idx, feed_stats *st)
{
    int rc;
    memset(f, 0, sizeof *f);
    f->worker_id = worker_id;
    f->idx = idx;
    f->st = st;
    rc = kvreg_wire_encoder_new(&f->enc, KVREG_WIRE_VLLM);
    if (rc == KVREG_OK)
        rc = kvreg_wire_decoder_new(&f->dec, KVREG_WIRE_VLLM);
    return rc;
}

void feed_free(feed *f)
{
    kvreg_wire_encoder_free(f->enc);
    kvreg_wire_decoder_free(f->dec);
    free(f->pending);
    memset(f, 0, sizeof *f);
}

void feed_capture(const kvreg_event *events, size_t n_events, void *user_data)
{
    feed *f = user_data;
    size_t i;
    if (f->n + n_events > f->cap) {
        size_t cap = f->cap ? f->cap : 256;
        kvreg_event *p;
        while (cap < f->n + n_events)
            cap *= 2;
        p = realloc(f->pending, cap * sizeof *p);
        if (!p) {
            f->oom = 1;
            return;
        }
        f->pending = p;
        f->cap = cap;
    }
    for (i = 0; i < n_events; i++) {
        kvreg_event *e = &f->pending[f->n++];
        *e = events[i];
        f->st->registers += e->kind == KVREG_EVENT_REGISTER;
        f->st->removes += e->kind == KVREG_EVENT_REMOVE;
        e->tokens = NULL;   /* borrowed, and not needed: the hashes are router hashes */
        e->n_tokens = 0;
    }
}

static int apply(feed *f, const kvreg_wire_event *events, size_t n)
{
    kvreg_index_apply_info info;
    double t0 = now_s();
    int rc = kvreg_index_apply(f->idx, f->worker_id, 0, f->seq++, events, n, &info);
    f->st->apply_s += now_s() - t0;
    if (rc != KVREG_OK) {
        fprintf(stderr, "kvreg-replay: index apply (worker %llu): %s\n",
                (unsigned long long)f->worker_id, kvreg_strerror(rc));
        return -1;
    }
    f->st->wire_events += n;
    f->st->flagged += info.flags & ~(uint32_t)KVREG_INDEX_F_NEW_WORKER ? 1 : 0;
    return 0;
}

#if REPLAY_WIRE_DIRECT /* TEMPORARY until the wire formats land on main: no bytes */
int kvreg_wire_encoder_new(kvreg_wire_encoder **out, uint32_t format) { (void)format; *out = NULL; return KVREG_OK; }
int kvreg_wire_decoder_new(kvreg_wire_decoder **out, uint32_t format) { (void)format; *out = NULL; return KVREG_OK; }
void kvreg_wire_encoder_free(kvreg_wire_encoder *enc) { (void)enc; }
void kvreg_wire_decoder_free(kvreg_wire_decoder *dec) { (void)dec; }
const char *kvreg_wire_decoder_error(const kvreg_wire_decoder *dec) { (void)dec; return ""; }
static const kvreg_event *direct_events;
static size_t direct_n;
int kvreg_wire_encode(kvreg_wire_encoder *enc, const kvreg_event *events, size_t n, double ts,
                      size_t *n_consumed, const uint8_t **payload, size_t *payload_len)
{ (void)enc; (void)ts; direct_events = events; direct_n = n < 1024 ? n : 1024; *n_consumed = direct_n; *payload = (const uint8_t *)""; *payload_len = 1; return 0; }
int kvreg_wire_decode(kvreg_wire_decoder *dec, const void *payload, size_t len,
                      const kvreg_wire_event **events, size_t *n_events, size_t *error_offset)
{
    static kvreg_wire_event out[1024];
    static uint64_t hashes[1024];
    size_t i;
    (void)dec; (void)payload; (void)len; (void)error_offset;
    for (i = 0; i < direct_n; i++) {
        memset(&out[i], 0, sizeof out[i]);
        hashes[i] = direct_events[i].sequence_hash;
        out[i].type = direct_events[i].kind;
        out[i].medium = direct_events[i].medium;
        out[i].block_hashes = &hashes[i];
        out[i].n_block_hashes = 1;
    }
    *events = out; *n_events = direct_n; return 0;
}
#endif

int feed_flush(feed *f)
{
    size_t done = 0;
    if (f->oom) {
        fprintf(stderr, "kvreg-replay: out of memory capturing events\n");
        return -1;
    }
    f->st->events += f->n;
    while (done < f->n) {
        const uint8_t *payload;
        const kvreg_wire_event *decoded;
        size_t consumed = 0, len = 0, n_decoded = 0, where = 0;
        double t0 = now_s(), t1;
        int rc = kvreg_wire_encode(f->enc, f->pending + done, f->n - done, 0.0, &consumed,
                                   &payload, &len);
        t1 = now_s();
        f->st->encode_s += t1 - t0;
        if (rc != KVREG_OK || consumed == 0) {
            fprintf(stderr, "kvreg-replay: vLLM encoder: %s\n", kvreg_strerror(rc));
            return -1;
        }
        rc = kvreg_wire_decode(f->dec, payload, len, &decoded, &n_decoded, &where);
        f->st->decode_s += now_s() - t1;
        if (rc != KVREG_OK) {
            fprintf(stderr, "kvreg-replay: vLLM decoder at byte %zu: %s (%s)\n", where,
                    kvreg_strerror(rc), kvreg_wire_decoder_error(f->dec));
            return -1;
        }
        f->st->payloads++;
        f->st->payload_bytes += len;
        if (apply(f, decoded, n_decoded) != 0)
            return -1;
        done += consumed;
    }
    f->n = 0;
    return 0;
}
