/* The publisher's replay socket under requesters that never read (issue 36, attack 1).
 *
 * flood: 30 requesters (another process: replay_flood_client) each ask for the whole ring
 * and never read. The publisher used to answer each request with a copy of the whole ring
 * queued in libzmq: 30 copies of an 8 MB ring grew it by hundreds of MiB. Now an answer is
 * streamed from the ring in bounded slices, at most KVREG_PUB_OPT_REPLAY_MAX replays hold a
 * slot, and what they have queued is bounded by KVREG_PUB_OPT_REPLAY_MAX_BYTES; requests past
 * the limit get the busy end marker at once. Asserted with the defaults: resident memory
 * (/proc/self/status, this process holds the publisher and a well-behaved subscriber) grows
 * by less than 64 MiB over the unattacked state, the live stream published meanwhile reaches
 * the subscriber complete within a bounded time, a request past the limit is answered busy,
 * and once the requesters go, the slots and queued bytes return to zero.
 *
 * gone: a requester that stops reading while the ring moves on gets the batches it was sent,
 * contiguous from its start, then the gone end marker instead of a silent jump.
 *
 * Every wait is bounded by a deadline; addresses are 127.0.0.1 with ephemeral ports. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "net_fixture.h"

#define CLIENTS 30
#define RING 1000        /* batches the ring keeps */
#define PER_BATCH 16     /* events per batch (MAX_EVENTS) */
#define TOKENS 64        /* tokens per event: 5 bytes each, so a batch is about 8 KB */
#define LIVE 2000        /* batches published during the attack */
#define GROWTH_MIB 64    /* the bound on resident growth (issue 36's target) */

static const char *client_path;

static uint64_t rss_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    assert_non_null(f);
    char line[256];
    uint64_t kib = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %lu kB", &kib) == 1) break;
    fclose(f);
    assert_true(kib > 0);
    return kib;
}

/* n events of TOKENS tokens each (values past 2^24: 5 bytes apiece in msgpack). */
static void register_big(net_pub *p, size_t n) {
    uint32_t tokens[TOKENS];
    for (size_t i = 0; i < n; i++) {
        for (uint32_t t = 0; t < TOKENS; t++) tokens[t] = 0x10000000u + (uint32_t)p->next_hash * 131u + t;
        kvreg_block_desc d;
        memset(&d, 0, sizeof d);
        d.sequence_hash = p->next_hash;
        d.block_hash = p->next_hash ^ UINT64_C(0x5555);
        d.block_size = TOKENS;
        d.tokens = tokens;
        d.n_tokens = TOKENS;
        p->next_hash++;
        kvreg_block b;
        assert_int_equal(kvreg_register(p->pool, &d, &b), KVREG_OK);
    }
}

/* ---- raw replay clients (DEALER) ----------------------------------------------------------- */
static void *dealer(void *ctx, const char *ep, int rcvhwm, int rcvbuf) {
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    assert_non_null(s);
    const int zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    if (rcvhwm >= 0) zmq_setsockopt(s, ZMQ_RCVHWM, &rcvhwm, sizeof rcvhwm);
    if (rcvbuf > 0) zmq_setsockopt(s, ZMQ_RCVBUF, &rcvbuf, sizeof rcvbuf);
    assert_int_equal(zmq_connect(s, ep), 0);
    return s;
}

static void request(void *s, uint64_t start) {
    unsigned char s8[8];
    for (int i = 0; i < 8; i++) s8[i] = (unsigned char)(start >> (56 - 8 * i));
    assert_true(zmq_send(s, "", 0, ZMQ_SNDMORE) == 0);
    assert_true(zmq_send(s, s8, 8, 0) == 8);
}

typedef struct answer {
    char topic[64];
    uint64_t seq;
    size_t payload;
} answer;

/* One answer message [ "", topic, seq8, payload ] within timeout_ms; 0 if none came. */
static int read_answer(void *s, answer *a, int timeout_ms) {
    zmq_pollitem_t item = {s, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&item, 1, timeout_ms) != 1) return 0;
    zmq_msg_t m[4];
    int n = 0, more = 1;
    while (more) {
        zmq_msg_t part;
        zmq_msg_init(&part);
        assert_true(zmq_msg_recv(&part, s, 0) >= 0);
        more = zmq_msg_more(&part);
        assert_true(n < 4);
        m[n++] = part;
    }
    assert_int_equal(n, 4);
    assert_int_equal(zmq_msg_size(&m[0]), 0);
    const size_t tl = zmq_msg_size(&m[1]);
    assert_true(tl < sizeof a->topic);
    memcpy(a->topic, zmq_msg_data(&m[1]), tl);
    a->topic[tl] = 0;
    assert_int_equal(zmq_msg_size(&m[2]), 8);
    const unsigned char *s8 = zmq_msg_data(&m[2]);
    a->seq = 0;
    for (int i = 0; i < 8; i++) a->seq = (a->seq << 8) | s8[i];
    a->payload = zmq_msg_size(&m[3]);
    for (int i = 0; i < n; i++) zmq_msg_close(&m[i]);
    return 1;
}

static int is_end(const answer *a) { return a->seq == UINT64_MAX && a->payload == 0; }

/* ---- the attacker process ------------------------------------------------------------------ */
typedef struct attacker {
    pid_t pid;
    int to_child;   /* closing it ends the attacker */
    int from_child; /* "SENT" */
} attacker;

static void attacker_start(attacker *a, const char *replay_ep, int clients, uint64_t start) {
    int in[2], out[2];
    assert_int_equal(pipe(in), 0);
    assert_int_equal(pipe(out), 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addclose(&fa, in[1]);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    char nbuf[16], sbuf[32];
    snprintf(nbuf, sizeof nbuf, "%d", clients);
    snprintf(sbuf, sizeof sbuf, "%llu", (unsigned long long)start);
    char *argv[] = {(char *)client_path, (char *)replay_ep, nbuf, sbuf, NULL};
    extern char **environ;
    assert_int_equal(posix_spawn(&a->pid, client_path, &fa, NULL, argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    a->to_child = in[1];
    a->from_child = out[0];
    char line[8] = {0};
    size_t got = 0;
    while (got < 5) {
        const ssize_t r = read(a->from_child, line + got, 5 - got);
        assert_true(r > 0);
        got += (size_t)r;
    }
    assert_memory_equal(line, "SENT\n", 5);
}

static void attacker_stop(attacker *a) {
    close(a->to_child);
    int status = 0;
    assert_int_equal(waitpid(a->pid, &status, 0), a->pid);
    close(a->from_child);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* Wait (bounded) until the publisher's stat reaches at least v; returns its value. */
static uint64_t wait_stat(net_pub *p, uint32_t stat, uint64_t v, int seconds) {
    const int64_t deadline = net_now_ms() + seconds * 1000;
    uint64_t now = net_pub_stat(p, stat);
    while (now < v && net_now_ms() < deadline) {
        struct timespec ts = {0, 2000000}; /* polling a condition */
        nanosleep(&ts, NULL);
        now = net_pub_stat(p, stat);
    }
    return now;
}

/* ---- flood ----------------------------------------------------------------------------------- */
static void flood(void **state) {
    (void)state;
    net_pub p;
    net_pub_open(&p, 1, NULL, 1, KVREG_PUB_OPT_MAX_EVENTS, (uint64_t)PER_BATCH, KVREG_PUB_OPT_BUFFER_STEPS,
                 (uint64_t)RING, 0u);
    /* A well-behaved live subscriber (no replay endpoint: it must not need one). */
    kvreg_subscriber *sub = NULL;
    assert_int_equal(kvreg_subscriber_new(&sub), KVREG_OK);
    net_collect c;
    net_collect_init(&c, sub);
    assert_int_equal(kvreg_subscriber_add(sub, p.endpoint, NULL, NULL), KVREG_OK);
    /* Joined once a batch arrives (the first ones may go before the subscription is up). */
    int64_t deadline = net_now_ms() + 10000;
    while (c.n == 0 && net_now_ms() < deadline) {
        register_big(&p, PER_BATCH);
        assert_int_equal(kvreg_subscriber_run(sub, 20), KVREG_OK);
    }
    assert_true(c.n > 0);
    /* The ring filled, everything delivered: the unattacked state. */
    register_big(&p, (size_t)RING * PER_BATCH);
    net_pub_settle(&p);
    uint64_t next = net_pub_stat(&p, KVREG_PUB_STAT_NEXT_SEQ);
    while (c.n && c.recs[c.n - 1].seq + 1 < next && net_now_ms() < deadline + 20000)
        assert_int_equal(kvreg_subscriber_run(sub, 20), KVREG_OK);
    assert_int_equal(c.recs[c.n - 1].seq + 1, next);
    const uint64_t lost_before = c.lost;
    const size_t n_before = c.n;
    const uint64_t base = rss_kib();
    uint64_t peak = base;

    /* The attack: 30 requests for everything from seq 0, never read. */
    attacker a;
    attacker_start(&a, p.replay, CLIENTS, 0);
    const uint64_t busy = wait_stat(&p, KVREG_PUB_STAT_REPLAYS_BUSY, CLIENTS - 8, 20);
    if (rss_kib() > peak) peak = rss_kib();
    assert_int_equal(busy, CLIENTS - 8); /* default KVREG_PUB_OPT_REPLAY_MAX: 8 */
    assert_int_equal(net_pub_stat(&p, KVREG_PUB_STAT_REPLAYS_ACTIVE), 8);
    /* A request past the limit: the busy end marker, at once, nothing before it. (The eight
     * answers cannot be done: 8 MB each into requesters that do not read.) */
    void *ctx = zmq_ctx_new();
    void *probe = dealer(ctx, p.replay, -1, 0);
    request(probe, 0);
    answer ans;
    assert_true(read_answer(probe, &ans, 10000));
    assert_true(is_end(&ans));
    assert_string_equal(ans.topic, KVREG_PUB_REPLAY_BUSY);
    assert_int_equal(net_pub_stat(&p, KVREG_PUB_STAT_REPLAYS_BUSY), CLIENTS - 8 + 1);

    /* Live publishing meanwhile: every batch reaches the subscriber, in bounded time. */
    const int64_t t0 = net_now_ms();
    register_big(&p, (size_t)LIVE * PER_BATCH);
    net_pub_settle(&p);
    next = net_pub_stat(&p, KVREG_PUB_STAT_NEXT_SEQ);
    deadline = t0 + 15000;
    while (c.recs[c.n - 1].seq + 1 < next && net_now_ms() < deadline) {
        assert_int_equal(kvreg_subscriber_run(sub, 20), KVREG_OK);
        const uint64_t r = rss_kib();
        if (r > peak) peak = r;
    }
    const int64_t live_ms = net_now_ms() - t0;
    fprintf(stderr, "flood: active %llu served %llu gone %llu batches %llu\n",
            (unsigned long long)net_pub_stat(&p, KVREG_PUB_STAT_REPLAYS_ACTIVE),
            (unsigned long long)net_pub_stat(&p, KVREG_PUB_STAT_REPLAYS_SERVED),
            (unsigned long long)net_pub_stat(&p, KVREG_PUB_STAT_REPLAYS_GONE),
            (unsigned long long)net_pub_stat(&p, KVREG_PUB_STAT_REPLAY_BATCHES));
    const uint64_t r = rss_kib();
    if (r > peak) peak = r;
    fprintf(stderr, "flood: resident %llu KiB before, peak %llu KiB (+%llu KiB); %llu live batches in %lld ms;"
                    " replay bytes queued %llu\n",
            (unsigned long long)base, (unsigned long long)peak, (unsigned long long)(peak - base),
            (unsigned long long)(next - c.recs[n_before].seq), (long long)live_ms,
            (unsigned long long)net_pub_stat(&p, KVREG_PUB_STAT_REPLAY_QUEUED_BYTES));
    assert_int_equal(c.recs[c.n - 1].seq + 1, next);
    assert_int_equal(c.lost, lost_before);
    for (size_t i = n_before; i < c.n; i++) assert_int_equal(c.recs[i].seq, c.recs[i - 1].seq + 1);
    assert_true(peak - base < (uint64_t)GROWTH_MIB * 1024);
    assert_true(net_pub_stat(&p, KVREG_PUB_STAT_REPLAY_QUEUED_BYTES) <= 32u << 20);


    /* The ring moved on by twice its length meanwhile: none of the eight answers could be
     * whole (each ends gone, or waits for its requester to read the gone marker). */
    assert_int_equal(net_pub_stat(&p, KVREG_PUB_STAT_REPLAYS_SERVED), 0);
    assert_true(net_pub_stat(&p, KVREG_PUB_STAT_REPLAYS_GONE) <= 8);
    /* The requesters go: libzmq drops what was queued for them, and the slots come back. */
    attacker_stop(&a);
    deadline = net_now_ms() + 10000;
    while ((net_pub_stat(&p, KVREG_PUB_STAT_REPLAYS_ACTIVE) || net_pub_stat(&p, KVREG_PUB_STAT_REPLAY_QUEUED_BYTES)) &&
           net_now_ms() < deadline) {
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    assert_int_equal(net_pub_stat(&p, KVREG_PUB_STAT_REPLAYS_ACTIVE), 0);
    assert_int_equal(net_pub_stat(&p, KVREG_PUB_STAT_REPLAY_QUEUED_BYTES), 0);
    /* And a reader is served again: the ring's batches from its oldest, contiguous, then the
     * plain end marker. */
    request(probe, 0);
    const uint64_t newest = net_pub_stat(&p, KVREG_PUB_STAT_NEXT_SEQ) - 1;
    uint64_t expect = newest + 1 - RING, got = 0;
    for (;;) {
        assert_true(read_answer(probe, &ans, 10000));
        if (is_end(&ans)) break;
        assert_int_equal(ans.seq, expect);
        expect++;
        got++;
    }
    assert_string_equal(ans.topic, "");
    assert_int_equal(got, RING);

    zmq_close(probe);
    zmq_ctx_term(ctx);
    kvreg_subscriber_free(sub);
    net_collect_free(&c);
    net_pub_close(&p);
}

/* ---- gone ------------------------------------------------------------------------------------ */
static void gone(void **state) {
    (void)state;
    /* A ring of 2000 batches of about 8 KB (16 MB): more than the kernel's socket buffers and a
     * replay's share of the queue hold, so the reader below blocks part way. */
    net_pub p;
    net_pub_open(&p, 1, NULL, 1, KVREG_PUB_OPT_MAX_EVENTS, (uint64_t)PER_BATCH, KVREG_PUB_OPT_BUFFER_STEPS,
                 (uint64_t)2 * RING, KVREG_PUB_OPT_REPLAY_MAX_BYTES, (uint64_t)1 << 20, 0u);
    register_big(&p, (size_t)2 * RING * PER_BATCH);
    net_pub_settle(&p);
    const uint64_t first = net_pub_stat(&p, KVREG_PUB_STAT_NEXT_SEQ) - 2 * RING;
    void *ctx = zmq_ctx_new();
    void *s = dealer(ctx, p.replay, 1, 4096);
    request(s, first);
    /* It has begun and is stuck: the reader does not read. */
    const int64_t deadline = net_now_ms() + 10000;
    while (net_pub_stat(&p, KVREG_PUB_STAT_REPLAY_BATCHES) == 0 && net_now_ms() < deadline) {
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    assert_true(net_pub_stat(&p, KVREG_PUB_STAT_REPLAY_BATCHES) > 0);
    /* The ring moves on by its whole length: everything not yet sent is overwritten. */
    register_big(&p, (size_t)2 * RING * PER_BATCH);
    net_pub_settle(&p);
    uint64_t expect = first;
    answer ans;
    for (;;) {
        assert_true(read_answer(s, &ans, 10000));
        if (is_end(&ans)) break;
        assert_int_equal(ans.seq, expect);
        expect++;
    }
    assert_string_equal(ans.topic, KVREG_PUB_REPLAY_GONE);
    assert_true(expect > first && expect < first + 2 * RING);
    assert_int_equal(wait_stat(&p, KVREG_PUB_STAT_REPLAYS_GONE, 1, 10), 1);
    zmq_close(s);
    zmq_ctx_term(ctx);
    net_pub_close(&p);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s <replay_flood_client>\n", argv[0]);
        return 2;
    }
    client_path = argv[1];
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(flood),
        cmocka_unit_test(gone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
