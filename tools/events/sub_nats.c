/*
 * kvreg-events sub --nats URL: print a JetStream stream's KV-event batches (as libkvreg's NATS
 * publisher writes them, docs/nats.md) as JSON lines, like `sub` does for ZeroMQ: each event
 * with the message's subject, the Kvreg-Batch header's worker, dp rank, instance, seq and
 * format, and the stream sequence. It reads through an ordered consumer (ephemeral, nothing
 * acknowledged, no durable left behind), from the stream's first message. A message without a
 * valid Kvreg-Batch header is decoded with --format (default vllm) and printed with null
 * worker and seq; one that does not decode is reported on stderr and skipped.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <kvreg.h>
#include <kvreg_wire.h>

#include "commands.h"

#if EVENTS_HAVE_NATS
#include <nats/nats.h>
#endif

void events_sub_nats_usage(FILE *f)
{
    fprintf(f,
            "usage: kvreg-events sub --nats URL [--stream S] [--subject SUBJ] [--count N]\n"
            "                        [--timeout S] [--format vllm|vllm-legacy|dynamo-json|dynamo-msgpack]\n"
            "\n"
            "Read JetStream stream S (default KVREG_EVENTS) from its first message through an\n"
            "ordered consumer (nothing acknowledged, nothing left on the server) and print one\n"
            "JSON object per decoded event:\n"
            "  {\"subject\", \"worker\", \"dp_rank\", \"instance\", \"seq\", \"stream_seq\", \"format\",\n"
            "   \"type\", \"block_hashes\", ... as in `kvreg-events decode`}\n"
            "  worker, dp_rank, instance and seq come from the message's Kvreg-Batch header\n"
            "  (null without one), format names the payload's encoding\n"
            "  --subject SUBJ   only these subjects (default: the stream's one subject pattern)\n"
            "  --format F       the encoding of messages without a Kvreg-Batch header (default vllm)\n"
            "  --count N, --timeout S  as for ZeroMQ\n");
}

#if EVENTS_HAVE_NATS

static volatile sig_atomic_t interrupted;
static void on_signal(int sig)
{
    (void)sig;
    interrupted = 1;
}

static const char *format_name(uint32_t f)
{
    switch (f) {
    case KVREG_WIRE_VLLM: return "vllm";
    case KVREG_WIRE_VLLM_LEGACY: return "vllm-legacy";
    case KVREG_WIRE_DYNAMO_JSON: return "dynamo-json";
    case KVREG_WIRE_DYNAMO_MSGPACK: return "dynamo-msgpack";
    default: return NULL;
    }
}

static int format_of(const char *name, uint32_t *out)
{
    uint32_t f;
    for (f = KVREG_WIRE_VLLM; f <= KVREG_WIRE_DYNAMO_MSGPACK; f++) {
        if (strcmp(name, format_name(f)) == 0) {
            *out = f;
            return 0;
        }
    }
    return -1;
}

typedef struct batch_header {
    unsigned long long worker, rank, instance, seq, format;
} batch_header;

/* "1 <worker> <rank> <instance> <seq> <format>", decimal, single spaces. 0 when valid. */
static int parse_header(const char *v, batch_header *h)
{
    unsigned long long *field[5] = {&h->worker, &h->rank, &h->instance, &h->seq, &h->format};
    char *end;
    int i;
    if (!v || v[0] != '1' || v[1] != ' ')
        return -1;
    v += 2;
    for (i = 0; i < 5; i++) {
        if (*v < '0' || *v > '9')
            return -1;
        errno = 0;
        *field[i] = strtoull(v, &end, 10);
        if (errno || (i < 4 ? *end != ' ' : *end != '\0'))
            return -1;
        v = end + (i < 4);
    }
    return h->rank <= INT32_MAX && format_name((uint32_t)h->format) ? 0 : -1;
}

/* s as a JSON string body (subjects are printable ASCII tokens; anything else escaped). */
static void json_body(const char *s, char *out, size_t cap)
{
    size_t o = 0;
    for (; *s && o + 7 < cap; s++) {
        const unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            out[o++] = '\\';
            out[o++] = (char)c;
        } else if (c < 0x20 || c >= 0x7f) {
            o += (size_t)snprintf(out + o, cap - o, "\\u%04x", c);
        } else {
            out[o++] = (char)c;
        }
    }
    out[o] = 0;
}

typedef struct nats_sub {
    kvreg_wire_decoder *dec[KVREG_WIRE_DYNAMO_MSGPACK + 1];
    uint32_t fallback;
    unsigned long long count, printed, batches;
} nats_sub;

/* One message: decode by its header's format and print its events. */
static void show(nats_sub *st, natsMsg *m)
{
    const char *hv = NULL, *subj = natsMsg_GetSubject(m);
    const kvreg_wire_event *ev = NULL;
    jsMsgMetaData *meta = NULL;
    batch_header h;
    char head[1536], subject[1024];
    size_t n = 0, off = 0, i;
    uint64_t sseq = 0;
    uint32_t format = st->fallback;
    int has = natsMsgHeader_Get(m, "Kvreg-Batch", &hv) == NATS_OK && parse_header(hv, &h) == 0;
    int rc;

    st->batches++;
    if (natsMsg_GetMetaData(&meta, m) == NATS_OK) {
        sseq = meta->Sequence.Stream;
        jsMsgMetaData_Destroy(meta);
    }
    json_body(subj ? subj : "", subject, sizeof subject);
    if (has) {
        format = (uint32_t)h.format;
        snprintf(head, sizeof head,
                 "\"subject\":\"%s\",\"worker\":%llu,\"dp_rank\":%llu,\"instance\":%llu,"
                 "\"seq\":%llu,\"stream_seq\":%" PRIu64 ",\"format\":\"%s\",",
                 subject, h.worker, h.rank, h.instance, h.seq, sseq, format_name(format));
    } else {
        fprintf(stderr, "kvreg-events: stream seq %" PRIu64 " (%s): no valid Kvreg-Batch header "
                "(%s); decoded as %s\n", sseq, subject, hv ? hv : "none", format_name(format));
        snprintf(head, sizeof head,
                 "\"subject\":\"%s\",\"worker\":null,\"dp_rank\":null,\"instance\":null,"
                 "\"seq\":null,\"stream_seq\":%" PRIu64 ",\"format\":\"%s\",",
                 subject, sseq, format_name(format));
    }
    rc = kvreg_wire_decode(st->dec[format], natsMsg_GetData(m),
                           (size_t)natsMsg_GetDataLength(m), &ev, &n, &off);
    if (rc != KVREG_OK) {
        fprintf(stderr, "kvreg-events: stream seq %" PRIu64 " (%s): rejected at byte %zu: %s\n",
                sseq, subject, off, rc == KVREG_EPROTO ? kvreg_wire_decoder_error(st->dec[format])
                                                       : kvreg_strerror(rc));
        return;
    }
    for (i = 0; i < n && !(st->count && st->printed >= st->count); i++) {
        events_print_event(&ev[i], format == KVREG_WIRE_DYNAMO_JSON ||
                                       format == KVREG_WIRE_DYNAMO_MSGPACK, head);
        st->printed++;
    }
}

int events_sub_nats(const char *url, const char *stream, const char *subject,
                    unsigned long long count, double timeout_s, const char *format)
{
    natsOptions *opts = NULL;
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    jsStreamInfo *si = NULL;
    natsSubscription *sub = NULL;
    jsSubOptions so;
    jsErrCode jerr = 0;
    nats_sub st;
    struct timespec t0, t;
    int status = EVENTS_EXIT_OK;
    natsStatus s;
    uint32_t f;

    memset(&st, 0, sizeof st);
    st.count = count;
    st.fallback = KVREG_WIRE_VLLM;
    if (format && format_of(format, &st.fallback) != 0) {
        fprintf(stderr, "kvreg-events sub: --format needs vllm, vllm-legacy, dynamo-json or "
                        "dynamo-msgpack with --nats\n");
        return EVENTS_EXIT_USAGE;
    }
    for (f = KVREG_WIRE_VLLM; f <= KVREG_WIRE_DYNAMO_MSGPACK; f++) {
        int rc = kvreg_wire_decoder_new(&st.dec[f], f);
        if (rc != KVREG_OK) {
            fprintf(stderr, "kvreg-events sub: %s\n", kvreg_strerror(rc));
            status = EVENTS_EXIT_REJECTED;
            goto out;
        }
    }
    s = natsOptions_Create(&opts);
    if (s == NATS_OK)
        s = natsOptions_SetURL(opts, url);
    if (s == NATS_OK)
        s = natsOptions_SetTimeout(opts, 2000);
    if (s == NATS_OK)
        s = natsConnection_Connect(&nc, opts);
    if (s == NATS_OK)
        s = natsConnection_JetStream(&js, nc, NULL);
    if (s != NATS_OK) {
        fprintf(stderr, "kvreg-events sub: cannot connect to %s: %s\n", url, natsStatus_GetText(s));
        status = EVENTS_EXIT_REJECTED;
        goto out;
    }
    if (!subject) { /* the stream's subjects: one pattern is the filter; several need --subject */
        s = js_GetStreamInfo(&si, js, stream, NULL, &jerr);
        if (s != NATS_OK || !si) {
            fprintf(stderr, "kvreg-events sub: no stream %s on %s (%s)\n", stream, url,
                    natsStatus_GetText(s));
            status = EVENTS_EXIT_REJECTED;
            goto out;
        }
        if (si->Config->SubjectsLen != 1) {
            fprintf(stderr, "kvreg-events sub: stream %s has %d subject patterns: choose with "
                    "--subject\n", stream, si->Config->SubjectsLen);
            status = EVENTS_EXIT_USAGE;
            goto out;
        }
        subject = si->Config->Subjects[0];
    }
    jsSubOptions_Init(&so);
    so.Stream = stream;
    so.Ordered = true;
    so.Config.DeliverPolicy = js_DeliverAll;
    s = js_SubscribeSync(&sub, js, subject, NULL, &so, &jerr);
    if (s != NATS_OK) {
        fprintf(stderr, "kvreg-events sub: cannot read stream %s (subject %s) on %s: %s\n",
                stream, subject, url, natsStatus_GetText(s));
        status = EVENTS_EXIT_REJECTED;
        goto out;
    }
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (!interrupted && !(count && st.printed >= count)) {
        natsMsg *m = NULL;
        int64_t slice = 100;
        if (timeout_s >= 0) {
            double left;
            clock_gettime(CLOCK_MONOTONIC, &t);
            left = timeout_s - ((double)(t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9);
            if (left <= 0)
                break;
            if (left * 1000 < slice)
                slice = (int64_t)(left * 1000) + 1;
        }
        s = natsSubscription_NextMsg(&m, sub, slice);
        if (s == NATS_OK) {
            show(&st, m);
            natsMsg_Destroy(m);
            fflush(stdout);
        } else if (s != NATS_TIMEOUT) {
            fprintf(stderr, "kvreg-events sub: %s\n", natsStatus_GetText(s));
            status = EVENTS_EXIT_REJECTED;
            break;
        }
    }
    fflush(stdout);
    if (status == EVENTS_EXIT_OK && !interrupted && st.batches == 0) {
        fprintf(stderr, "kvreg-events sub: nothing arrived in %g s\n", timeout_s);
        status = EVENTS_EXIT_REJECTED;
    } else if (status == EVENTS_EXIT_OK && count && st.printed < count) {
        fprintf(stderr, "kvreg-events sub: %llu of %llu events arrived\n", st.printed, count);
        status = EVENTS_EXIT_REJECTED;
    }
out:
    /* Close first: libnats 3.4's reader thread may still be delivering to sub, and destroying a
     * subscription it delivers to is a use after free there (fixed in nats.c 3.6). */
    if (nc)
        natsConnection_Close(nc);
    natsSubscription_Destroy(sub);
    jsStreamInfo_Destroy(si);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    natsOptions_Destroy(opts);
    for (f = 0; f <= KVREG_WIRE_DYNAMO_MSGPACK; f++)
        kvreg_wire_decoder_free(st.dec[f]);
    /* libnats keeps library-wide threads and buffers until this (memcheck counts them) */
    nats_Close();
    return status;
}

#else

int events_sub_nats(const char *url, const char *stream, const char *subject,
                    unsigned long long count, double timeout_s, const char *format)
{
    (void)url, (void)stream, (void)subject, (void)count, (void)timeout_s, (void)format;
    fprintf(stderr, "kvreg-events sub: --nats: this kvreg-events was built without NATS "
                    "(libnats-dev)\n");
    return EVENTS_EXIT_REJECTED;
}

#endif
