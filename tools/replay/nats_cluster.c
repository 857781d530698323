#include "nats_cluster.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <kvreg_nats.h>

#include "cluster.h"
#include "nats_server.h"
#include "synth.h"
#include "trace.h"

/* How long the replicas may lag behind the engines before the run fails: on loopback a batch
 * is stored and fetched in well under a millisecond, so this means broken, not slow. The
 * restore reads the whole stream one message per fetch: its bound grows with the stream. */
#define SYNC_TIMEOUT_MS 20000
/* The first publisher retries its start while a fresh server's JetStream comes up. */
#define START_TIMEOUT_MS 10000

typedef struct replica {
    kvreg_index *idx;
    kvreg_nats_consumer *con;
    char durable[32];
    uint64_t messages, batches; /* of earlier lives (the restored replica's first one) */
} replica;

struct nats_cluster {
    uint32_t n_workers, n_rep;
    kvreg_registry **regs;          /* borrowed, n_workers */
    kvreg_nats_publisher **pubs;    /* n_workers */
    uint64_t *target;               /* per worker: batches published, at the last sync */
    replica rep[NATS_CLUSTER_MAX_ROUTERS];
    nats_index_fn mk;
    void *mk_ctx;
    replay_nats_server server;
    char url[512], stream[64], prefix[64];
    int kill_router, corrupt_restored;
    int failed;                     /* a notice came (printed) */
    nats_cluster_stats st;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Between two looks at a counter another thread moves: never as synchronisation. */
static void pause_us(long us)
{
    struct timespec ts = {0, us * 1000L};
    nanosleep(&ts, NULL);
}

int nats_cluster_available(void)
{
    return kvreg_nats_available();
}

int nats_cluster_configure(kvreg_config *cfg)
{
    /* The queue holds one request's events at most: the replay syncs after each one. */
    return kvreg_config_set(cfg, KVREG_OPT_DELIVERY, KVREG_DELIVERY_POLL);
}

int nats_cluster_reference(const replay_options *o, cluster_outcome *ref)
{
    replay_options in = *o;
    workload *w;
    int status;
    in.transport = REPLAY_TRANSPORT_INPROC;
    in.json = 0;
    if (in.trace) {
        w = trace_open(in.trace, in.skip_bad);
    } else {
        synth_params sp;
        sp.seed = in.seed;
        sp.conversations = in.conversations;
        sp.block_tokens = in.block_tokens;
        w = synth_open(&sp);
    }
    if (!w)
        return 2;
    status = cluster_collect(&in, w, ref);
    w->close(w);
    return status;
}

/* kvreg_index_digest: equal for equal contents (workers with their next seqs, entries and
 * tiers), whatever order the events came in. -1 on an error (printed). */
static int digest(nats_cluster *z, const kvreg_index *idx, uint64_t *out)
{
    int rc = kvreg_index_digest(idx, out);
    (void)z;
    if (rc != KVREG_OK) {
        fprintf(stderr, "kvreg-replay: nats: index digest: %s\n", kvreg_strerror(rc));
        return -1;
    }
    return 0;
}

static void on_notice(const kvreg_nats_notice *n, void *user_data)
{
    nats_cluster *z = user_data;
    static const char *const kinds[] = {"?", "LOSS", "RESET", "MALFORMED", "APPLY", "SNAPSHOT",
                                        "EXPIRED"};
    const char *kind = n->kind < sizeof kinds / sizeof kinds[0] ? kinds[n->kind] : "?";
    if (n->kind == KVREG_NATS_NOTICE_SNAPSHOT) {
        /* count 1: restored, 2: written (both expected with --kill-router); else a snapshot
         * found invalid, which the run does not expect either */
        if (n->count == 1 || n->count == 2)
            return;
    }
    fprintf(stderr, "kvreg-replay: nats: %s notice (worker %llu, seqs %llu..%llu, subject %s): "
            "%s\n", kind, (unsigned long long)n->worker_id, (unsigned long long)n->first,
            (unsigned long long)n->last, n->subject, n->message);
    z->failed = 1;
}

static int start_replica(nats_cluster *z, uint32_t k)
{
    replica *r = &z->rep[k];
    int rc = z->mk(z->mk_ctx, &r->idx);
    if (rc == KVREG_OK)
        rc = kvreg_nats_consumer_new(&r->con, r->idx);
    if (rc == KVREG_OK)
        rc = kvreg_nats_consumer_set_string(r->con, KVREG_NATS_URL, z->url);
    if (rc == KVREG_OK)
        rc = kvreg_nats_consumer_set_string(r->con, KVREG_NATS_STREAM, z->stream);
    if (rc == KVREG_OK)
        rc = kvreg_nats_consumer_set_string(r->con, KVREG_NATS_DURABLE, r->durable);
    /* One message per fetch: a fetch asking for more waits out its expiry when fewer are
     * there, and the replay asks after every request for the few batches it made. */
    if (rc == KVREG_OK)
        rc = kvreg_nats_consumer_set(r->con, KVREG_NATS_CON_OPT_FETCH_BATCH, 1);
    if (rc == KVREG_OK)
        rc = kvreg_nats_consumer_set_notice_fn(r->con, on_notice, z);
    /* --kill-router: replica 0 writes a snapshot (kvreg_nats_consumer_snapshot) into a bucket
     * of this run when replica k dies; the restarted replica restores it at start (RESTORE,
     * the default) and reads only the stream after it. */
    if (rc == KVREG_OK && z->kill_router)
        rc = kvreg_nats_consumer_set_string(r->con, KVREG_NATS_SNAPSHOT_BUCKET, z->stream);
    if (rc == KVREG_OK)
        rc = kvreg_nats_consumer_start(r->con);
    if (rc != KVREG_OK) {
        fprintf(stderr, "kvreg-replay: nats: cannot start router replica %u (durable %s on %s, "
                "stream %s): %s\n", k, r->durable, z->url, z->stream, kvreg_strerror(rc));
        kvreg_nats_consumer_free(r->con);
        kvreg_index_free(r->idx);
        r->con = NULL;
        r->idx = NULL;
        return -1;
    }
    return 0;
}

static void stop_replica(replica *r)
{
    uint64_t v = 0;
    if (!r->con)
        return;
    kvreg_nats_consumer_stat(r->con, KVREG_NATS_CON_STAT_MESSAGES, &v);
    r->messages += v;
    v = 0;
    kvreg_nats_consumer_stat(r->con, KVREG_NATS_CON_STAT_BATCHES, &v);
    r->batches += v;
    kvreg_nats_consumer_free(r->con);
    kvreg_index_free(r->idx);
    r->con = NULL;
    r->idx = NULL;
}

static int start_publisher(nats_cluster *z, uint32_t w, uint32_t block_tokens, double deadline)
{
    kvreg_nats_publisher *pub = NULL;
    int rc = kvreg_nats_publisher_new(&pub, z->regs[w]);
    if (rc == KVREG_OK)
        rc = kvreg_nats_publisher_set(pub, KVREG_NATS_PUB_OPT_WORKER_ID, w);
    if (rc == KVREG_OK)
        rc = kvreg_nats_publisher_set(pub, KVREG_NATS_PUB_OPT_BLOCK_SIZE, block_tokens);
    /* The router waits for every batch before it routes: gathering would only delay it. */
    if (rc == KVREG_OK)
        rc = kvreg_nats_publisher_set(pub, KVREG_NATS_PUB_OPT_BATCH_US, 0);
    if (rc == KVREG_OK) /* everything was synced before stop */
        rc = kvreg_nats_publisher_set(pub, KVREG_NATS_PUB_OPT_LINGER_MS, 1000);
    if (rc == KVREG_OK)
        rc = kvreg_nats_publisher_set_string(pub, KVREG_NATS_URL, z->url);
    if (rc == KVREG_OK)
        rc = kvreg_nats_publisher_set_string(pub, KVREG_NATS_STREAM, z->stream);
    if (rc == KVREG_OK)
        rc = kvreg_nats_publisher_set_string(pub, KVREG_NATS_SUBJECT_PREFIX, z->prefix);
    while (rc == KVREG_OK) {
        rc = kvreg_nats_publisher_start(pub);
        /* A server just started answers before its JetStream is up: try again, bounded. */
        if (rc != KVREG_EPROTO || now_s() > deadline)
            break;
        pause_us(20000);
        rc = KVREG_OK;
    }
    if (rc != KVREG_OK) {
        fprintf(stderr, "kvreg-replay: nats: cannot publish worker %u's events to %s (stream "
                "%s): %s\n", w, z->url, z->stream, kvreg_strerror(rc));
        kvreg_nats_publisher_free(pub);
        return -1;
    }
    z->pubs[w] = pub;
    return 0;
}

int nats_cluster_open(nats_cluster **out, const replay_options *o, uint32_t n_workers,
                      kvreg_registry **regs, uint64_t total_requests,
                      nats_index_fn mk, void *mk_ctx)
{
    nats_cluster *z = calloc(1, sizeof *z);
    double deadline;
    uint32_t w, k;
    *out = NULL;
    if (!z) {
        fprintf(stderr, "kvreg-replay: out of memory\n");
        return -1;
    }
    z->n_workers = n_workers;
    z->n_rep = o->nats.routers ? o->nats.routers : 1;
    z->regs = regs;
    z->mk = mk;
    z->mk_ctx = mk_ctx;
    z->kill_router = o->nats.kill_router;
    z->corrupt_restored = o->nats.corrupt_restored;
    z->pubs = calloc(n_workers, sizeof *z->pubs);
    z->target = calloc(n_workers, sizeof *z->target);
    if (!z->pubs || !z->target) {
        fprintf(stderr, "kvreg-replay: out of memory\n");
        nats_cluster_close(z);
        return -1;
    }
    if (o->nats.url) {
        snprintf(z->url, sizeof z->url, "%s", o->nats.url);
    } else {
        if (nats_server_launch(&z->server) != 0) {
            nats_cluster_close(z);
            return -1;
        }
        snprintf(z->url, sizeof z->url, "%s", z->server.url);
        z->st.own_server = 1;
    }
    /* A stream and subjects of this run only, so a shared server's other streams (or an
     * earlier run's, until their max age) never mix in. */
    snprintf(z->stream, sizeof z->stream, "KVREG_REPLAY_%ld_%ld", (long)getpid(),
             (long)time(NULL));
    snprintf(z->prefix, sizeof z->prefix, "kvreg.replay.r%ldt%ld", (long)getpid(),
             (long)time(NULL));
    z->st.url = z->url;
    z->st.stream = z->stream;
    z->st.routers = z->n_rep;
    z->st.publishers = n_workers;
    z->st.killed = -1;
    if (z->kill_router) {
        if (z->n_rep < 2 || total_requests < 3) {
            fprintf(stderr, "kvreg-replay: --kill-router needs --routers 2 or more and 3 "
                            "requests or more (a replica must stay to route)\n");
            nats_cluster_close(z);
            return -1;
        }
        z->st.killed = (int)z->n_rep - 1;
        z->st.kill_at = total_requests / 3;
        z->st.restore_at = 2 * total_requests / 3;
    }
    deadline = now_s() + START_TIMEOUT_MS / 1000.0;
    for (w = 0; w < n_workers; w++) {
        if (start_publisher(z, w, o->block_tokens, deadline) != 0) {
            nats_cluster_close(z);
            return -1;
        }
    }
    for (k = 0; k < z->n_rep; k++) {
        snprintf(z->rep[k].durable, sizeof z->rep[k].durable, "kvreg-replay-%u", k);
        if (start_replica(z, k) != 0) {
            nats_cluster_close(z);
            return -1;
        }
    }
    *out = z;
    return 0;
}

/* A publisher counter that means some events will never arrive (NULL if none). */
static const char *publisher_trouble(nats_cluster *z, uint32_t w)
{
    static const struct { uint32_t stat; const char *what; } bad[] = {
        {KVREG_NATS_PUB_STAT_EVENTS_LOST, "events dropped by the registry's poll queue"},
        {KVREG_NATS_PUB_STAT_EVENTS_SKIPPED, "events the vLLM format cannot carry"},
    };
    size_t i;
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t v = 0;
        if (kvreg_nats_publisher_stat(z->pubs[w], bad[i].stat, &v) == KVREG_OK && v)
            return bad[i].what;
    }
    return NULL;
}

static uint64_t emitted(kvreg_registry *reg)
{
    uint64_t reg_ = 0, rem = 0, clr = 0;
    kvreg_registry_stat(reg, KVREG_STAT_EVENTS_REGISTER, &reg_);
    kvreg_registry_stat(reg, KVREG_STAT_EVENTS_REMOVE, &rem);
    kvreg_registry_stat(reg, KVREG_STAT_EVENTS_CLEARED, &clr);
    return reg_ + rem + clr;
}

/* Every event of worker w's registry published and acknowledged; target[w] = its batches. */
static int publisher_done(nats_cluster *z, uint32_t w, double deadline)
{
    const uint64_t want = emitted(z->regs[w]);
    for (;;) {
        uint64_t handled = 0, in_flight = 1;
        const char *trouble = publisher_trouble(z, w);
        if (trouble) {
            fprintf(stderr, "kvreg-replay: nats: worker %u's publisher: %s\n", w, trouble);
            return -1;
        }
        kvreg_nats_publisher_stat(z->pubs[w], KVREG_NATS_PUB_STAT_EVENTS_HANDLED, &handled);
        kvreg_nats_publisher_stat(z->pubs[w], KVREG_NATS_PUB_STAT_IN_FLIGHT, &in_flight);
        if (handled >= want && in_flight == 0)
            break;
        if (now_s() > deadline) {
            fprintf(stderr, "kvreg-replay: nats: worker %u's publisher handled %llu of %llu "
                    "events, %llu batches unacknowledged, after %d ms\n", w,
                    (unsigned long long)handled, (unsigned long long)want,
                    (unsigned long long)in_flight, SYNC_TIMEOUT_MS);
            return -1;
        }
        pause_us(20);
    }
    kvreg_nats_publisher_stat(z->pubs[w], KVREG_NATS_PUB_STAT_BATCHES, &z->target[w]);
    return 0;
}

/* Run replica k until it applied target[w] batches of every worker. */
static int replica_caught_up(nats_cluster *z, uint32_t k, double deadline)
{
    replica *r = &z->rep[k];
    uint32_t w = 0;
    double t0;
    while (w < z->n_workers) {
        uint64_t inst = 0, next = 0;
        int rc = kvreg_nats_consumer_worker(r->con, w, 0, &inst, &next);
        if (rc != KVREG_OK && rc != KVREG_ENOENT) {
            fprintf(stderr, "kvreg-replay: nats: replica %u: %s\n", k, kvreg_strerror(rc));
            return -1;
        }
        if (next >= z->target[w]) {
            w++;
            continue;
        }
        if (z->failed)
            return -1;
        if (now_s() > deadline) {
            fprintf(stderr, "kvreg-replay: nats: replica %u applied %llu of worker %u's %llu "
                    "batches after %d ms\n", k, (unsigned long long)next, w,
                    (unsigned long long)z->target[w], SYNC_TIMEOUT_MS);
            return -1;
        }
        t0 = now_s();
        rc = kvreg_nats_consumer_run(r->con, 0);
        if (k == 0)
            z->st.run0_s += now_s() - t0;
        if (rc != KVREG_OK) {
            fprintf(stderr, "kvreg-replay: nats: replica %u: %s\n", k, kvreg_strerror(rc));
            return -1;
        }
    }
    return z->failed ? -1 : 0;
}

int nats_cluster_sync(nats_cluster *z)
{
    const double deadline = now_s() + SYNC_TIMEOUT_MS / 1000.0;
    uint32_t w, k;
    z->st.syncs++;
    for (w = 0; w < z->n_workers; w++)
        if (publisher_done(z, w, deadline) != 0)
            return -1;
    for (k = 0; k < z->n_rep; k++)
        if (z->rep[k].con && replica_caught_up(z, k, deadline) != 0)
            return -1;
    return 0;
}

int nats_cluster_before_request(nats_cluster *z, uint64_t i)
{
    replica *r;
    uint64_t after = 0, d0 = 0, dk = 0;
    uint32_t k;
    double t0;
    if (!z->kill_router)
        return 0;
    k = (uint32_t)z->st.killed;
    r = &z->rep[k];
    if (i == z->st.kill_at && r->con) {
        fprintf(stderr, "kvreg-replay: nats: request %llu: router replica %u killed\n",
                (unsigned long long)i, k);
        stop_replica(r);
        /* the snapshot the restarted replica will restore: replica 0's index now, so that it
         * then reads what came between the kill and the restore from the stream */
        int rc = kvreg_nats_consumer_snapshot(z->rep[0].con, &z->st.snapshot_seq);
        if (rc != KVREG_OK) {
            fprintf(stderr, "kvreg-replay: nats: replica 0 could not write a snapshot: %s\n",
                    kvreg_strerror(rc));
            return -1;
        }
        return 0;
    }
    if (i != z->st.restore_at || r->con)
        return 0;
    /* The others are caught up (synced after the last request): the restored one must reach
     * the same targets, then the same digest. */
    t0 = now_s();
    if (start_replica(z, k) != 0 ||
        replica_caught_up(z, k, now_s() + SYNC_TIMEOUT_MS / 1000.0 * 10) != 0)
        return -1;
    z->st.restore_s = now_s() - t0;
    kvreg_nats_consumer_stat(r->con, KVREG_NATS_CON_STAT_BATCHES, &after);
    z->st.restore_batches = after;
    kvreg_nats_consumer_stat(r->con, KVREG_NATS_CON_STAT_RESTORED, &z->st.restored);
    if (z->corrupt_restored) { /* testing aid: worker 0's blocks go, its seq stays */
        uint64_t inst = 0, next = 0;
        kvreg_nats_consumer_worker(r->con, 0, 0, &inst, &next);
        kvreg_index_clear_worker(r->idx, 0, 0, next);
    }
    if (digest(z, z->rep[0].idx, &d0) != 0 || digest(z, r->idx, &dk) != 0)
        return -1;
    z->st.restore_digest_equal = d0 == dk;
    fprintf(stderr, "kvreg-replay: nats: request %llu: router replica %u restored from %s "
            "(then %llu batches; %.3f s), digest %016llx, replica 0's %016llx%s\n",
            (unsigned long long)i, k, z->st.restored ? "replica 0's snapshot" : "the stream",
            (unsigned long long)after, z->st.restore_s,
            (unsigned long long)dk, (unsigned long long)d0,
            d0 == dk ? "" : ": MISMATCH");
    return 0;
}

const kvreg_index *nats_cluster_route_index(const nats_cluster *z, uint64_t i)
{
    uint32_t live = 0, k, pick;
    for (k = 0; k < z->n_rep; k++)
        live += z->rep[k].con != NULL;
    pick = (uint32_t)(i % live);
    for (k = 0; k < z->n_rep; k++) {
        if (!z->rep[k].con)
            continue;
        if (pick-- == 0)
            return z->rep[k].idx;
    }
    return z->rep[0].idx; /* not reached: replica 0 is never killed */
}

void nats_cluster_routed(nats_cluster *z, int same)
{
    z->st.compared++;
    z->st.routing_differs += !same;
}

kvreg_index *nats_cluster_index(const nats_cluster *z, uint32_t k)
{
    return k < z->n_rep && z->rep[k].con ? z->rep[k].idx : NULL;
}

int nats_cluster_finish(nats_cluster *z, nats_cluster_stats *out)
{
    uint32_t w, k;
    int bad = 0;
    for (w = 0; w < z->n_workers; w++) {
        uint64_t v = 0;
        kvreg_nats_publisher_stat(z->pubs[w], KVREG_NATS_PUB_STAT_BATCHES, &v);
        z->st.batches_published += v;
        v = 0;
        kvreg_nats_publisher_stat(z->pubs[w], KVREG_NATS_PUB_STAT_ACKED, &v);
        z->st.batches_acked += v;
        v = 0;
        kvreg_nats_publisher_stat(z->pubs[w], KVREG_NATS_PUB_STAT_RETRIES, &v);
        z->st.publish_retries += v;
        v = 0;
        kvreg_nats_publisher_stat(z->pubs[w], KVREG_NATS_PUB_STAT_DUPLICATES, &v);
        z->st.publish_duplicates += v;
    }
    z->st.digests_equal = 1;
    for (k = 0; k < z->n_rep; k++) {
        replica *r = &z->rep[k];
        uint64_t m = 0, b = 0;
        if (!r->con) { /* cannot happen: the killed replica is restored before the end */
            fprintf(stderr, "kvreg-replay: nats: replica %u is not running\n", k);
            bad = 1;
            continue;
        }
        kvreg_nats_consumer_stat(r->con, KVREG_NATS_CON_STAT_MESSAGES, &m);
        kvreg_nats_consumer_stat(r->con, KVREG_NATS_CON_STAT_BATCHES, &b);
        if (k == 0)
            kvreg_nats_consumer_stat(r->con, KVREG_NATS_CON_STAT_EVENTS, &z->st.events0);
        z->st.messages += r->messages + m;
        z->st.batches_applied += r->batches + b;
        if (digest(z, r->idx, &z->st.digest[k]) != 0)
            return -1;
        if (z->st.digest[k] != z->st.digest[0]) {
            fprintf(stderr, "kvreg-replay: nats: replica %u's digest %016llx differs from "
                    "replica 0's %016llx\n", k, (unsigned long long)z->st.digest[k],
                    (unsigned long long)z->st.digest[0]);
            z->st.digests_equal = 0;
            bad = 1;
        }
    }
    if (z->st.routing_differs) {
        fprintf(stderr, "kvreg-replay: nats: %llu of %llu requests routed otherwise than by "
                "the in-process run\n", (unsigned long long)z->st.routing_differs,
                (unsigned long long)z->st.compared);
        bad = 1;
    }
    if (z->kill_router && !z->st.restore_digest_equal) {
        fprintf(stderr, "kvreg-replay: nats: the restored replica's digest differed\n");
        bad = 1;
    }
    *out = z->st;
    return bad ? -1 : 0;
}

void nats_cluster_close(nats_cluster *z)
{
    uint32_t w, k;
    if (!z)
        return;
    for (k = 0; k < z->n_rep; k++)
        stop_replica(&z->rep[k]);
    for (w = 0; z->pubs && w < z->n_workers; w++)
        kvreg_nats_publisher_free(z->pubs[w]);
    nats_server_stop(&z->server);
    free(z->pubs);
    free(z->target);
    free(z);
}
