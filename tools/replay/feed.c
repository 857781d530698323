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

int feed_init(feed *f, uint64_t worker_id, kvreg_index *idx, feed_stats *st, uint32_t block_tokens,
              feed_tokens_fn tokens_of, void *tokens_ctx)
{
    int rc;
    memset(f, 0, sizeof *f);
    f->worker_id = worker_id;
    f->idx = idx;
    f->st = st;
    f->block_tokens = block_tokens;
    f->tokens_of = tokens_of;
    f->tokens_ctx = tokens_ctx;
    rc = kvreg_wire_encoder_new(&f->enc, KVREG_WIRE_VLLM);
    if (rc == KVREG_OK) /* as vLLM's consumers check it */
        rc = kvreg_wire_encoder_set(f->enc, KVREG_WIRE_OPT_BLOCK_SIZE, block_tokens);
    if (rc == KVREG_OK)
        rc = kvreg_wire_decoder_new(&f->dec, KVREG_WIRE_VLLM);
    return rc;
}

void feed_free(feed *f)
{
    kvreg_wire_encoder_free(f->enc);
    kvreg_wire_decoder_free(f->dec);
    free(f->pending);
    free(f->tokens);
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
        e->tokens = NULL;   /* borrowed (and absent: registered by hash); see attach_tokens */
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

/* Give every pending Register its block's tokens (into f->tokens, which then holds them all). */
static int attach_tokens(feed *f)
{
    size_t i, n_reg = 0, k = 0;
    for (i = 0; i < f->n; i++)
        n_reg += f->pending[i].kind == KVREG_EVENT_REGISTER;
    if (n_reg > f->tokens_cap) {
        uint32_t *t = realloc(f->tokens, n_reg * f->block_tokens * sizeof *t);
        if (!t) {
            fprintf(stderr, "kvreg-replay: out of memory\n");
            return -1;
        }
        f->tokens = t;
        f->tokens_cap = n_reg;
    }
    for (i = 0; i < f->n; i++) {
        kvreg_event *e = &f->pending[i];
        uint32_t *out;
        if (e->kind != KVREG_EVENT_REGISTER)
            continue;
        out = f->tokens + k++ * f->block_tokens;
        if (f->tokens_of(f->tokens_ctx, e->sequence_hash, out) != 0) {
            fprintf(stderr, "kvreg-replay: no tokens for block %016llx\n",
                    (unsigned long long)e->sequence_hash);
            return -1;
        }
        e->tokens = out;
        e->n_tokens = f->block_tokens;
    }
    return 0;
}

int feed_flush(feed *f)
{
    size_t done = 0;
    if (f->oom) {
        fprintf(stderr, "kvreg-replay: out of memory capturing events\n");
        return -1;
    }
    if (attach_tokens(f) != 0)
        return -1;
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
