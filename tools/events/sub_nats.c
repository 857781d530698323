/*
 * kvreg-events sub --nats URL: print a JetStream stream's KV-event batches (as libkvreg's NATS
 * publisher writes them, docs/nats.md) as JSON lines, like `sub` does for ZeroMQ: each event
 * with the message's subject, the Kvreg-Batch header's worker, dp rank ("header_dp_rank": the
 * event's own "dp_rank" is the payload's), instance, seq and format, and the stream sequence.
 * It reads through an ordered consumer (ephemeral, nothing acknowledged, no durable left
 * behind), from the stream's first message. A message without a valid Kvreg-Batch header is
 * decoded with --format (default vllm) and printed with null worker and seq; one that does not
 * decode is reported on stderr and skipped.
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
            "  {\"subject\", \"worker\", \"header_dp_rank\", \"instance\", \"seq\", \"stream_seq\",\n"
            "   \"format\", \"type\", \"block_hashes\", ... as in `kvreg-events decode`}\n"
            "  worker, header_dp_rank, instance and seq come from the message's Kvreg-Batch\n"
            "  header (null without a valid one); \"dp_rank\" is the payload's, as in decode;\n"
            "  format names the payload's encoding\n"
            "  --subject SUBJ   only these subjects (default: the stream's one subject pattern)\n"
            "  --format F       the encoding of messages without a Kvreg-Batch header (default vllm)\n"
            "  --count N        exit after N events\n"
            "  --timeout S      exit after S seconds, counted from the start: connecting and the\n"
            "                   JetStream requests are bounded by what is left of it\n");
}

#if EVENTS_HAVE_NATS

/* libnats' default wait for a JetStream API answer, used without --timeout */
#define JS_WAIT_MS 5000

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
    /* the format is a KVREG_WIRE_* number: range-checked before it is narrowed */
    return h->rank <= INT32_MAX && h->format <= KVREG_WIRE_DYNAMO_MSGPACK &&
                   format_name((uint32_t)h->format)
               ? 0
               : -1;
}

/* s escaped as JSON string text (for stderr: without the quotes). */
static void put_escaped(FILE *f, const char *s)
{
    events_json_write(f, s, strlen(s), 0);
}

typedef struct nats_sub {
    kvreg_wire_decoder *dec[KVREG_WIRE_DYNAMO_MSGPACK + 1];
    uint32_t fallback;
    unsigned long long count, printed, batches;
} nats_sub;

/* One message: decode by its header's format and print its events. The header's fields come
 * first; its rank is "header_dp_rank" (the payload's own stays the event's "dp_rank"). 0, or -1
 * out of memory. */
static int show(nats_sub *st, natsMsg *m)
{
    const char *hv = NULL, *subj = natsMsg_GetSubject(m);
    const kvreg_wire_event *ev = NULL;
    jsMsgMetaData *meta = NULL;
    batch_header h;
    char *head = NULL;
    size_t head_len = 0, n = 0, off = 0, i;
    uint64_t sseq = 0;
    uint32_t format = st->fallback;
    int has = natsMsgHeader_Get(m, "Kvreg-Batch", &hv) == NATS_OK && parse_header(hv, &h) == 0;
    int rc;
    FILE *hf;

    st->batches++;
    if (!subj)
        subj = "";
    if (natsMsg_GetMetaData(&meta, m) == NATS_OK) {
        sseq = meta->Sequence.Stream;
        jsMsgMetaData_Destroy(meta);
    }
    if (has)
        format = (uint32_t)h.format;
    else {
        fprintf(stderr, "kvreg-events: stream seq %" PRIu64 " (", sseq);
        put_escaped(stderr, subj);
        fputs("): no valid Kvreg-Batch header (", stderr);
        put_escaped(stderr, hv ? hv : "none");
        fprintf(stderr, "); decoded as %s\n", format_name(format));
    }
    hf = open_memstream(&head, &head_len);
    if (hf) {
        fputs("\"subject\":", hf);
        events_json_write(hf, subj, strlen(subj), 1);
        if (has)
            fprintf(hf, ",\"worker\":%llu,\"header_dp_rank\":%llu,\"instance\":%llu,\"seq\":%llu,",
                    h.worker, h.rank, h.instance, h.seq);
        else
            fputs(",\"worker\":null,\"header_dp_rank\":null,\"instance\":null,\"seq\":null,", hf);
        fprintf(hf, "\"stream_seq\":%" PRIu64 ",\"format\":\"%s\",", sseq, format_name(format));
    }
    if (!hf || fclose(hf) != 0 || !head) {
        fprintf(stderr, "kvreg-events sub: out of memory\n");
        free(head);
        return -1;
    }
    rc = kvreg_wire_decode(st->dec[format], natsMsg_GetData(m),
                           (size_t)natsMsg_GetDataLength(m), &ev, &n, &off);
    if (rc != KVREG_OK) {
        fprintf(stderr, "kvreg-events: stream seq %" PRIu64 " (", sseq);
        put_escaped(stderr, subj);
        fprintf(stderr, "): rejected at byte %zu: %s\n", off,
                rc == KVREG_EPROTO ? kvreg_wire_decoder_error(st->dec[format]) : kvreg_strerror(rc));
        free(head);
        return 0;
    }
    for (i = 0; i < n && !(st->count && st->printed >= st->count); i++) {
        events_print_event(&ev[i], format == KVREG_WIRE_DYNAMO_JSON ||
                                       format == KVREG_WIRE_DYNAMO_MSGPACK, head);
        st->printed++;
    }
    free(head);
    return 0;
}

/* Milliseconds left of --timeout (at least 1, so that a call times out rather than waits
 * without limit), or dflt when there is no --timeout or more is left than dflt. */
static int64_t left_ms(const struct timespec *t0, double timeout_s, int64_t dflt)
{
    struct timespec t;
    double left;
    if (timeout_s < 0)
        return dflt;
    clock_gettime(CLOCK_MONOTONIC, &t);
    left = timeout_s - ((double)(t.tv_sec - t0->tv_sec) + (t.tv_nsec - t0->tv_nsec) / 1e9);
    if (left * 1000 >= (double)dflt)
        return dflt;
    return left <= 0 ? 1 : (int64_t)(left * 1000) + 1;
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
    jsOptions jo;
    jsErrCode jerr = 0;
    nats_sub st;
    struct timespec t0, t;
    int status = EVENTS_EXIT_OK;
    natsStatus s;
    uint32_t f;

    /* --timeout counts from here: connecting and the JetStream requests (stream info, the
     * consumer's creation) take their time limits from what is left of it */
    clock_gettime(CLOCK_MONOTONIC, &t0);
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
        s = natsOptions_SetTimeout(opts, left_ms(&t0, timeout_s, 2000));
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
        jsOptions_Init(&jo);
        jo.Wait = left_ms(&t0, timeout_s, JS_WAIT_MS);
        s = js_GetStreamInfo(&si, js, stream, &jo, &jerr);
        if (s == NATS_TIMEOUT) {
            fprintf(stderr, "kvreg-events sub: no answer about stream %s from %s in time (%s)\n",
                    stream, url, natsStatus_GetText(s));
            status = EVENTS_EXIT_REJECTED;
            goto out;
        }
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
    jsOptions_Init(&jo);
    jo.Wait = left_ms(&t0, timeout_s, JS_WAIT_MS);
    s = js_SubscribeSync(&sub, js, subject, &jo, &so, &jerr);
    if (s != NATS_OK) {
        fprintf(stderr, "kvreg-events sub: cannot read stream %s (subject %s) on %s: %s\n",
                stream, subject, url, natsStatus_GetText(s));
        status = EVENTS_EXIT_REJECTED;
        goto out;
    }
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
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
            const int bad = show(&st, m);
            natsMsg_Destroy(m);
            fflush(stdout);
            if (bad) {
                status = EVENTS_EXIT_REJECTED;
                break;
            }
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
