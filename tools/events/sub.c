/*
 * kvreg-events sub: subscribe to KV-event publishers over ZeroMQ (libkvreg's, vLLM's,
 * SGLang's) and print every decoded event as one JSON line: the fields of
 * `kvreg-events decode` plus "publisher" (endpoint index), "topic", "instance" (the
 * publisher's instance id), "seq" and "replayed". Gaps,
 * replays, losses, resets and malformed messages are reported on stderr. A kcat for KV events.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <kvreg_net.h>

#include "commands.h"

#define MAX_ENDPOINTS 256

static void sub_usage(FILE *f)
{
    fprintf(f,
            "usage: kvreg-events sub ENDPOINT... [--replay EP]... [--topic T] [--from-seq N]\n"
            "                        [--count N] [--timeout S] [--format vllm|sglang]\n"
            "\n"
            "Subscribe to each ENDPOINT (at most 256; connects, or binds for a '*' host, ipc\n"
            "and inproc, as vLLM does) and print one JSON object per decoded event, in each\n"
            "publisher's order:\n"
            "  {\"publisher\", \"topic\", \"instance\", \"seq\", \"replayed\", \"type\",\n"
            "   \"block_hashes\", ... as in `kvreg-events decode`}\n"
            "  publisher is the ENDPOINT's index, topic the batch's topic (whole, as every\n"
            "  string: UTF-8, an invalid sequence as U+FFFD), instance the publisher's\n"
            "  instance id as 16 hex digits (a kvreg publisher names it in its replay\n"
            "  answers; null when not known: a foreign publisher, or none read yet)\n"
            "  --replay EP      the replay (ROUTER) endpoint of the ENDPOINT in the same position\n"
            "                   (give one per ENDPOINT, in order); gaps and late joins are then\n"
            "                   filled from it\n"
            "  --topic T        subscription prefix (default: every topic; llm-d uses kv@)\n"
            "  --from-seq N     first ask each publisher with --replay for its batches from N\n"
            "  --count N        exit after N events\n"
            "  --timeout S      exit after S seconds (default: run until --count or Ctrl-C)\n"
            "  --format F       payload decoder: vllm (default, also SGLang's) or sglang\n"
            "stderr gets one line per gap, replay, loss, reset and malformed message.\n"
            "\n"
            "With --nats URL it reads a JetStream stream instead (ENDPOINTs are not given):\n"
            "\n");
    events_sub_nats_usage(f);
    fprintf(f,
            "\n"
            "Exit status: 0 done (count reached, timeout or interrupt without --count),\n"
            "1 nothing arrived before --timeout, --count not reached, or a library error\n"
            "(with a message on stderr), 2 bad usage.\n");
}

typedef struct sub_state {
    unsigned long long printed, count, batches;
    kvreg_subscriber *sub;
    int failed; /* out of memory: stop, exit 1 */
} sub_state;

static volatile sig_atomic_t interrupted;
static void on_signal(int sig)
{
    (void)sig;
    interrupted = 1;
}

static void on_batch(const kvreg_sub_batch *b, void *ud)
{
    sub_state *st = ud;
    char instance[24] = "null", *head = NULL;
    size_t head_len = 0;
    uint64_t id = 0;
    st->batches++;
    /* The publisher's instance id (a kvreg publisher names it; 0: not known yet or foreign). */
    if (kvreg_subscriber_instance(st->sub, b->publisher, b->topic, &id) == KVREG_OK && id)
        snprintf(instance, sizeof instance, "\"%016llx\"", (unsigned long long)id);
    /* the topic whole (up to KVREG_SUB_MAX_TOPIC_LEN bytes), escaped as every string is */
    FILE *h = open_memstream(&head, &head_len);
    if (h) {
        fprintf(h, "\"publisher\":%u,\"topic\":", b->publisher);
        events_json_write(h, b->topic, strlen(b->topic), 1);
        fprintf(h, ",\"instance\":%s,\"seq\":%llu,\"replayed\":%s,", instance,
                (unsigned long long)b->seq, b->replayed ? "true" : "false");
    }
    if (!h || fclose(h) != 0 || !head) {
        fprintf(stderr, "kvreg-events sub: out of memory\n");
        free(head);
        st->failed = 1;
        kvreg_subscriber_stop(st->sub);
        return;
    }
    for (size_t i = 0; i < b->n_events; i++) {
        if (st->count && st->printed >= st->count)
            break;
        events_print_event(&b->events[i], 0, head);
        st->printed++;
    }
    free(head);
    if (st->count && st->printed >= st->count)
        kvreg_subscriber_stop(st->sub);
}

static void on_notice(const kvreg_sub_notice *n, void *ud)
{
    (void)ud;
    static const char *const kinds[] = {"?",         "gap",          "loss",   "reset",
                                        "replay",    "malformed",    "disconnected", "evicted"};
    const char *kind = n->kind < sizeof kinds / sizeof kinds[0] ? kinds[n->kind] : "?";
    fprintf(stderr, "kvreg-events: %s: publisher %u (%s%s%s)", kind, n->publisher, n->endpoint,
            n->topic[0] ? ", topic " : "", n->topic);
    if (n->kind == KVREG_SUB_GAP || n->kind == KVREG_SUB_LOSS)
        fprintf(stderr, " seqs %llu..%llu", (unsigned long long)n->first, (unsigned long long)n->last);
    else if (n->kind == KVREG_SUB_RESET)
        fprintf(stderr, " expected seq %llu, got %llu", (unsigned long long)n->first,
                (unsigned long long)n->last);
    else if (n->kind == KVREG_SUB_REPLAY_DONE)
        fprintf(stderr, " %llu batches", (unsigned long long)n->count);
    else if (n->kind == KVREG_SUB_MALFORMED && n->has_seq)
        fprintf(stderr, " seq %llu", (unsigned long long)n->first);
    fprintf(stderr, ": %s%s\n", n->message,
            n->kind == KVREG_SUB_GAP ? (n->replay_requested ? "; replay requested" : "") : "");
}

static int number(const char *opt, const char *v, unsigned long long *out)
{
    char *end;
    errno = 0;
    *out = strtoull(v ? v : "", &end, 10);
    if (!v || v[0] < '0' || v[0] > '9' || *end || errno) {
        fprintf(stderr, "kvreg-events sub: %s needs a whole number\n", opt);
        return -1;
    }
    return 0;
}

int events_sub(int argc, char **argv)
{
    const char *endpoints[MAX_ENDPOINTS], *replays[MAX_ENDPOINTS];
    int n_ep = 0, n_replay = 0;
    const char *topic = "";
    unsigned long long from_seq = UINT64_MAX, count = 0;
    double timeout_s = -1;
    uint32_t format = KVREG_WIRE_VLLM;
    const char *nats_url = NULL, *stream = "KVREG_EVENTS", *subject = NULL, *format_name = NULL;
    int stream_given = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            sub_usage(stdout);
            return EVENTS_EXIT_OK;
        } else if (strcmp(a, "--replay") == 0 && v) {
            if (n_replay == MAX_ENDPOINTS) {
                fprintf(stderr, "kvreg-events sub: at most %d --replay\n", MAX_ENDPOINTS);
                return EVENTS_EXIT_USAGE;
            }
            replays[n_replay++] = argv[++i];
        } else if (strcmp(a, "--topic") == 0 && v) {
            topic = argv[++i];
        } else if (strcmp(a, "--from-seq") == 0) {
            if (number(a, v, &from_seq) != 0)
                return EVENTS_EXIT_USAGE;
            i++;
        } else if (strcmp(a, "--count") == 0) {
            if (number(a, v, &count) != 0 || count == 0)
                return EVENTS_EXIT_USAGE;
            i++;
        } else if (strcmp(a, "--timeout") == 0 && v) {
            char *end;
            timeout_s = strtod(argv[++i], &end);
            if (*end || !(timeout_s >= 0 && timeout_s < 1e7)) {
                fprintf(stderr, "kvreg-events sub: --timeout needs seconds\n");
                return EVENTS_EXIT_USAGE;
            }
        } else if (strcmp(a, "--nats") == 0 && v) {
            nats_url = argv[++i];
        } else if (strcmp(a, "--stream") == 0 && v) {
            stream = argv[++i];
            stream_given = 1;
        } else if (strcmp(a, "--subject") == 0 && v) {
            subject = argv[++i];
            stream_given = 1;
        } else if (strcmp(a, "--format") == 0 && v) {
            format_name = argv[++i]; /* checked below: --nats has formats of its own */
        } else if (a[0] == '-') {
            fprintf(stderr, "kvreg-events sub: unknown option or missing value: %s\n", a);
            sub_usage(stderr);
            return EVENTS_EXIT_USAGE;
        } else if (n_ep < MAX_ENDPOINTS) {
            endpoints[n_ep++] = a;
        } else {
            fprintf(stderr, "kvreg-events sub: at most %d ENDPOINTs: %s is one too many\n",
                    MAX_ENDPOINTS, a);
            return EVENTS_EXIT_USAGE;
        }
    }
    if (nats_url) {
        if (n_ep || n_replay || from_seq != UINT64_MAX || topic[0]) {
            fprintf(stderr, "kvreg-events sub: --nats reads a stream: no ENDPOINT, --replay, "
                            "--topic or --from-seq\n");
            return EVENTS_EXIT_USAGE;
        }
        return events_sub_nats(nats_url, stream, subject, count, timeout_s, format_name);
    }
    if (stream_given) {
        fprintf(stderr, "kvreg-events sub: --stream and --subject need --nats\n");
        return EVENTS_EXIT_USAGE;
    }
    if (format_name && strcmp(format_name, "vllm") == 0) {
        format = KVREG_WIRE_VLLM;
    } else if (format_name && strcmp(format_name, "sglang") == 0) {
        format = KVREG_WIRE_SGLANG;
    } else if (format_name) {
        fprintf(stderr, "kvreg-events sub: --format needs vllm or sglang\n");
        return EVENTS_EXIT_USAGE;
    }
    if (n_ep == 0 || n_replay > n_ep) {
        fprintf(stderr, "kvreg-events sub: %s\n",
                n_ep == 0 ? "no ENDPOINT given" : "more --replay than ENDPOINTs");
        sub_usage(stderr);
        return EVENTS_EXIT_USAGE;
    }

    sub_state st = {0, count, 0, NULL, 0};
    int rc = kvreg_subscriber_new(&st.sub);
    if (rc == KVREG_OK)
        rc = kvreg_subscriber_set(st.sub, KVREG_SUB_OPT_FORMAT, format);
    if (rc == KVREG_OK && from_seq != UINT64_MAX)
        rc = kvreg_subscriber_set(st.sub, KVREG_SUB_OPT_FROM_SEQ, from_seq);
    if (rc == KVREG_OK)
        rc = kvreg_subscriber_set_string(st.sub, KVREG_SUB_TOPIC, topic);
    if (rc == KVREG_OK)
        rc = kvreg_subscriber_set_batch_fn(st.sub, on_batch, &st);
    if (rc == KVREG_OK)
        rc = kvreg_subscriber_set_notice_fn(st.sub, on_notice, NULL);
    for (int i = 0; rc == KVREG_OK && i < n_ep; i++) {
        rc = kvreg_subscriber_add(st.sub, endpoints[i], i < n_replay ? replays[i] : NULL, NULL);
        if (rc != KVREG_OK)
            fprintf(stderr, "kvreg-events sub: %s%s%s: ", endpoints[i], i < n_replay ? " / " : "",
                    i < n_replay ? replays[i] : "");
    }
    if (rc != KVREG_OK) {
        fprintf(stderr, "kvreg-events sub: %s\n", kvreg_strerror(rc));
        kvreg_subscriber_free(st.sub);
        return EVENTS_EXIT_REJECTED;
    }
    for (int i = 0; i < n_ep; i++) {
        char ep[512];
        if (kvreg_subscriber_endpoint(st.sub, (uint32_t)i, ep, sizeof ep, NULL) == KVREG_OK &&
            strcmp(ep, endpoints[i]) != 0)
            fprintf(stderr, "kvreg-events sub: listening on %s\n", ep);
    }
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);

    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (!interrupted && !st.failed && !(count && st.printed >= count)) {
        int slice = 100;
        if (timeout_s >= 0) {
            clock_gettime(CLOCK_MONOTONIC, &t);
            const double left = timeout_s - ((double)(t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9);
            if (left <= 0)
                break;
            if (left * 1000 < slice)
                slice = (int)(left * 1000) + 1;
        }
        kvreg_subscriber_run(st.sub, slice);
        fflush(stdout);
    }
    fflush(stdout);
    kvreg_subscriber_free(st.sub);
    if (st.failed)
        return EVENTS_EXIT_REJECTED;
    if (!interrupted && st.batches == 0) {
        fprintf(stderr, "kvreg-events sub: nothing arrived in %g s\n", timeout_s);
        return EVENTS_EXIT_REJECTED;
    }
    if (count && st.printed < count)
        fprintf(stderr, "kvreg-events sub: %llu of %llu events arrived\n", st.printed, count);
    return count && st.printed < count ? EVENTS_EXIT_REJECTED : EVENTS_EXIT_OK;
}
