#include "zmq_feed.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <kvreg_net.h>

/* How long the index may lag behind the engines before the run fails: loopback delivers in
 * microseconds, so reaching this means something is broken, not slow. */
#define SYNC_TIMEOUT_MS 10000
/* Subscriptions: how long to wait for all of them, and how often to probe the silent ones. */
#define CONNECT_TIMEOUT_MS 10000
#define PROBE_EVERY_MS 50
/* Longest wait in one kvreg_subscriber_run() before the loop checks the publishers' error
 * counters and the deadline again (the callback ends a run as soon as the index caught up). */
#define RUN_SLICE_MS 20
/* File descriptors each worker costs (two publishers with their sockets and ZeroMQ contexts,
 * and the subscriber's sockets for them: about 30 measured), and the process's own. libzmq
 * aborts the process when it runs out of them, so they are counted before anything opens. */
#define FDS_PER_WORKER 32
#define FDS_BASE 64

struct zmq_feed {
    uint32_t n_pub;             /* 2 per worker: G1 stream, G2 stream */
    kvreg_registry **regs;      /* borrowed, n_pub */
    kvreg_publisher **pubs;     /* n_pub */
    kvreg_subscriber *sub;
    kvreg_index *idx;
    feed_stats *st;
    uint64_t *next_seq;         /* per worker: the index's seq for its next batch */
    uint64_t *target, *got;     /* per publisher: events emitted / block hashes applied */
    uint64_t target_total, got_total;
    unsigned char *heard;       /* per publisher: a batch arrived (its subscription is live) */
    uint32_t n_heard;
    int connecting;             /* in zmq_feed_open's probe phase */
    int failed;                 /* a callback met an error (printed) */
    kvreg_wire_event *scratch;  /* a batch's Stored / Removed events */
    size_t scratch_cap;
    zmq_feed_stats zs;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int zmq_feed_available(void)
{
    return (kvreg_features() & KVREG_FEATURE_ZMQ) != 0;
}

int zmq_feed_configure(kvreg_config *cfg)
{
    /* The queue only ever holds one request's events: the replay syncs after each one. */
    return kvreg_config_set(cfg, KVREG_OPT_DELIVERY, KVREG_DELIVERY_POLL);
}

static void fail(zmq_feed *z)
{
    z->failed = 1;
    kvreg_subscriber_stop(z->sub);
}

/* Apply one decoded batch of publisher p to the index (its Cleared probes are skipped). */
static void on_batch(const kvreg_sub_batch *b, void *user_data)
{
    zmq_feed *z = user_data;
    uint32_t p = b->publisher, w = p / 2;
    size_t i, n = 0;
    uint64_t blocks = 0;

    if (z->failed)
        return;
    z->zs.batches++;
    z->zs.replayed += b->replayed != 0;
    if (!z->heard[p]) {
        z->heard[p] = 1;
        z->n_heard++;
    }
    if (b->n_events > z->scratch_cap) {
        kvreg_wire_event *s = realloc(z->scratch, b->n_events * sizeof *s);
        if (!s) {
            fprintf(stderr, "kvreg-replay: out of memory\n");
            fail(z);
            return;
        }
        z->scratch = s;
        z->scratch_cap = b->n_events;
    }
    for (i = 0; i < b->n_events; i++) {
        const kvreg_wire_event *e = &b->events[i];
        if (e->type == KVREG_WIRE_CLEARED)
            continue; /* a probe from zmq_feed_open (the registries were empty) */
        if (e->type != KVREG_WIRE_STORED && e->type != KVREG_WIRE_REMOVED) {
            fprintf(stderr, "kvreg-replay: zmq: publisher %u sent an event of type %u\n", p,
                    e->type);
            fail(z);
            return;
        }
        z->scratch[n++] = *e;
        blocks += e->n_block_hashes; /* one per registry event */
    }
    if (n) {
        kvreg_index_apply_info info;
        double t0 = now_s();
        int rc = kvreg_index_apply(z->idx, w, 0, z->next_seq[w]++, z->scratch, n, &info);
        z->st->apply_s += now_s() - t0;
        if (rc != KVREG_OK) {
            fprintf(stderr, "kvreg-replay: index apply (worker %u): %s\n", w, kvreg_strerror(rc));
            fail(z);
            return;
        }
        z->st->payloads++;
        z->st->wire_events += n;
        z->st->flagged += info.flags & ~(uint32_t)KVREG_INDEX_F_NEW_WORKER ? 1 : 0;
    }
    z->got[p] += blocks;
    z->got_total += blocks;
    if (z->got[p] > z->target[p]) {
        fprintf(stderr, "kvreg-replay: zmq: publisher %u delivered %llu events, its registry "
                "emitted %llu\n", p, (unsigned long long)z->got[p],
                (unsigned long long)z->target[p]);
        fail(z);
    } else if (z->connecting ? z->n_heard == z->n_pub : z->got_total == z->target_total) {
        kvreg_subscriber_stop(z->sub); /* caught up: back to the replay */
    }
}

static void on_notice(const kvreg_sub_notice *n, void *user_data)
{
    zmq_feed *z = user_data;
    if (n->kind == KVREG_SUB_GAP) {
        z->zs.gaps++; /* a late join or a dropped batch: the subscriber replays it */
        return;
    }
    if (n->kind == KVREG_SUB_LOSS || n->kind == KVREG_SUB_RESET || n->kind == KVREG_SUB_MALFORMED) {
        fprintf(stderr, "kvreg-replay: zmq: publisher %u (%s): %s\n", n->publisher, n->endpoint,
                n->message);
        fail(z);
    }
}

static int start_publisher(zmq_feed *z, uint32_t p, uint32_t block_tokens)
{
    char ep[256], rep[256];
    kvreg_publisher *pub = NULL;
    int rc = kvreg_publisher_new(&pub, z->regs[p]);
    if (rc == KVREG_OK)
        rc = kvreg_publisher_set_string(pub, KVREG_PUB_ENDPOINT, "tcp://127.0.0.1:*");
    if (rc == KVREG_OK)
        rc = kvreg_publisher_set_string(pub, KVREG_PUB_REPLAY_ENDPOINT, "tcp://127.0.0.1:*");
    if (rc == KVREG_OK)
        rc = kvreg_publisher_set(pub, KVREG_PUB_OPT_BLOCK_SIZE, block_tokens);
    /* The router waits for every batch before it routes: letting events gather would only
     * delay it. */
    if (rc == KVREG_OK)
        rc = kvreg_publisher_set(pub, KVREG_PUB_OPT_BATCH_US, 0);
    if (rc == KVREG_OK) /* everything was synced before stop: nothing is left to linger for */
        rc = kvreg_publisher_set(pub, KVREG_PUB_OPT_LINGER_MS, 100);
    if (rc == KVREG_OK)
        rc = kvreg_publisher_start(pub);
    if (rc == KVREG_OK)
        rc = kvreg_publisher_endpoint(pub, KVREG_PUB_ENDPOINT, ep, sizeof ep, NULL);
    if (rc == KVREG_OK)
        rc = kvreg_publisher_endpoint(pub, KVREG_PUB_REPLAY_ENDPOINT, rep, sizeof rep, NULL);
    if (rc == KVREG_OK)
        rc = kvreg_subscriber_add(z->sub, ep, rep, NULL);
    if (rc != KVREG_OK) {
        fprintf(stderr, "kvreg-replay: zmq: cannot publish worker %u's %s events on "
                "tcp://127.0.0.1: %s\n", p / 2, p % 2 ? "G2" : "G1", kvreg_strerror(rc));
        kvreg_publisher_free(pub);
        return -1;
    }
    z->pubs[p] = pub;
    return 0;
}

/* Probe every publisher not heard from yet until all are (see zmq_feed.h). */
static int connect_all(zmq_feed *z)
{
    double deadline = now_s() + CONNECT_TIMEOUT_MS / 1000.0, next_probe = 0;
    uint32_t p;
    z->connecting = 1;
    while (z->n_heard < z->n_pub && !z->failed) {
        double t = now_s();
        if (t > deadline) {
            fprintf(stderr, "kvreg-replay: zmq: %u of %u subscriptions still silent after %d ms\n",
                    z->n_pub - z->n_heard, z->n_pub, CONNECT_TIMEOUT_MS);
            return -1;
        }
        if (t >= next_probe) {
            for (p = 0; p < z->n_pub; p++) {
                if (!z->heard[p] && kvreg_registry_clear(z->regs[p]) == KVREG_OK)
                    z->zs.probes++;
            }
            next_probe = t + PROBE_EVERY_MS / 1000.0;
        }
        kvreg_subscriber_run(z->sub, PROBE_EVERY_MS);
    }
    z->connecting = 0;
    return z->failed ? -1 : 0;
}

/* Raise the soft limit on open files up to the hard one when the workers need more. */
static int enough_fds(uint32_t n_workers)
{
    struct rlimit rl;
    rlim_t need = (rlim_t)n_workers * FDS_PER_WORKER + FDS_BASE;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need)
        return 0;
    if (rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need) {
        rl.rlim_cur = need;
        if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
            return 0;
    }
    fprintf(stderr, "kvreg-replay: --transport zmq with %u workers needs about %llu open files, "
            "the limit is %llu (ulimit -n): use fewer workers or --transport inproc\n", n_workers,
            (unsigned long long)need, (unsigned long long)rl.rlim_max);
    return -1;
}

int zmq_feed_open(zmq_feed **out, kvreg_index *idx, uint32_t n_workers, kvreg_registry **regs,
                  uint32_t block_tokens, feed_stats *st)
{
    zmq_feed *z = calloc(1, sizeof *z);
    uint32_t p;
    int rc;
    *out = NULL;
    if (!z) {
        fprintf(stderr, "kvreg-replay: out of memory\n");
        return -1;
    }
    if (enough_fds(n_workers) != 0) {
        free(z);
        return -1;
    }
    z->n_pub = 2 * n_workers;
    z->regs = regs;
    z->idx = idx;
    z->st = st;
    z->zs.publishers = z->n_pub;
    z->pubs = calloc(z->n_pub, sizeof *z->pubs);
    z->next_seq = calloc(n_workers, sizeof *z->next_seq);
    z->target = calloc(z->n_pub, sizeof *z->target);
    z->got = calloc(z->n_pub, sizeof *z->got);
    z->heard = calloc(z->n_pub, 1);
    if (!z->pubs || !z->next_seq || !z->target || !z->got || !z->heard) {
        fprintf(stderr, "kvreg-replay: out of memory\n");
        zmq_feed_close(z);
        return -1;
    }
    rc = kvreg_subscriber_new(&z->sub);
    if (rc == KVREG_OK)
        rc = kvreg_subscriber_set_batch_fn(z->sub, on_batch, z);
    if (rc == KVREG_OK)
        rc = kvreg_subscriber_set_notice_fn(z->sub, on_notice, z);
    if (rc != KVREG_OK) {
        fprintf(stderr, "kvreg-replay: zmq: cannot make the subscriber: %s\n", kvreg_strerror(rc));
        zmq_feed_close(z);
        return -1;
    }
    for (p = 0; p < z->n_pub; p++) {
        if (start_publisher(z, p, block_tokens) != 0) {
            zmq_feed_close(z);
            return -1;
        }
    }
    if (connect_all(z) != 0) {
        zmq_feed_close(z);
        return -1;
    }
    *out = z;
    return 0;
}

/* A publisher counter that means some events will never arrive (0 if none). */
static const char *publisher_trouble(zmq_feed *z, uint32_t p)
{
    static const struct { uint32_t stat; const char *what; } bad[] = {
        {KVREG_PUB_STAT_EVENTS_LOST, "events dropped by the registry's poll queue"},
        {KVREG_PUB_STAT_EVENTS_SKIPPED, "events the vLLM format cannot carry"},
        {KVREG_PUB_STAT_SEND_ERRORS, "batches lost to send errors"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t v = 0;
        if (kvreg_publisher_stat(z->pubs[p], bad[i].stat, &v) == KVREG_OK && v)
            return bad[i].what;
    }
    return NULL;
}

int zmq_feed_sync(zmq_feed *z)
{
    double deadline;
    uint64_t registers = 0, removes = 0;
    uint32_t p;

    z->zs.syncs++;
    z->target_total = 0;
    for (p = 0; p < z->n_pub; p++) {
        uint64_t reg = 0, rem = 0;
        kvreg_registry_stat(z->regs[p], KVREG_STAT_EVENTS_REGISTER, &reg);
        kvreg_registry_stat(z->regs[p], KVREG_STAT_EVENTS_REMOVE, &rem);
        z->target[p] = reg + rem;
        z->target_total += reg + rem;
        registers += reg;
        removes += rem;
    }
    z->st->registers = registers;
    z->st->removes = removes;
    z->st->events = registers + removes;
    deadline = now_s() + SYNC_TIMEOUT_MS / 1000.0;
    while (z->got_total < z->target_total && !z->failed) {
        for (p = 0; p < z->n_pub; p++) {
            const char *trouble = publisher_trouble(z, p);
            if (trouble) {
                fprintf(stderr, "kvreg-replay: zmq: worker %u's %s publisher: %s\n", p / 2,
                        p % 2 ? "G2" : "G1", trouble);
                return -1;
            }
        }
        if (now_s() > deadline) {
            fprintf(stderr, "kvreg-replay: zmq: the index still lacks %llu of the %llu events "
                    "emitted after %d ms\n",
                    (unsigned long long)(z->target_total - z->got_total),
                    (unsigned long long)z->target_total, SYNC_TIMEOUT_MS);
            return -1;
        }
        kvreg_subscriber_run(z->sub, RUN_SLICE_MS);
    }
    return z->failed ? -1 : 0;
}

void zmq_feed_get_stats(const zmq_feed *z, zmq_feed_stats *out)
{
    *out = z->zs;
}

void zmq_feed_close(zmq_feed *z)
{
    uint32_t p;
    if (!z)
        return;
    for (p = 0; z->pubs && p < z->n_pub; p++)
        kvreg_publisher_free(z->pubs[p]);
    kvreg_subscriber_free(z->sub);
    free(z->pubs);
    free(z->next_seq);
    free(z->target);
    free(z->got);
    free(z->heard);
    free(z->scratch);
    free(z);
}
