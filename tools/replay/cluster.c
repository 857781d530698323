#include "cluster.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <kvreg.h>
#include <kvreg_index.h>

#include "cache.h"
#include "cluster_report.h"
#include "feed.h"
#include "hmap.h"
#include "max_hits.h"
#include "naming.h"
#include "nats_cluster.h"
#include "router.h"
#include "zmq_feed.h"

#define EXIT_LIBRARY 1
#define EXIT_BAD_INPUT 2

typedef struct engine {
    kvreg_registry *g1_reg, *g2_reg; /* one per tier: their events are that tier's */
    cache model;
    feed fd;
} engine;

typedef struct cluster {
    uint32_t n;
    engine *eng;
    kvreg_index *idx;
    feed_stats fs;
    kvreg_registry *shared_reg; /* the shared-cache baseline (no events needed) */
    cache shared;
    router rt;
    uint32_t *inflight;  /* per worker */
    uint32_t *window;    /* ring of the last n x inflight workers dispatched to */
    size_t window_cap, window_head, window_len;
    uint64_t *requests_per_worker;
    uint64_t *seq_hashes, *block_hashes;
    size_t seq_cap, block_cap;
    double *query_ns;
    size_t query_cap;
    namer *nm;
    hmap id_of;          /* sequence hash -> block id, for the tokens vLLM events carry */
    kvreg_registry **regs; /* every engine's G1 and G2 registries, in that order */
    zmq_feed *zf;        /* --transport zmq; NULL: inproc (each engine's feed) */
    nats_cluster *nc;    /* --transport nats: the replicas route, idx stays empty */
    kvreg_index_config *icfg; /* the index's settings (the NATS replicas make theirs) */
    const cluster_outcome *ref; /* --transport nats: the in-process run's decisions */
    cluster_outcome *out; /* cluster_collect: per-request records go there; NULL otherwise */
} cluster;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t times(uint64_t blocks, uint32_t n)
{
    return blocks == CACHE_UNLIMITED || blocks == 0 ? blocks : blocks * n;
}

/* fn NULL and poll: POLL delivery (a publisher takes the events, --transport zmq). Events per
 * tier (KVREG_EVENTS_PER_TIER), so that the router's index sees each tier's blocks: every
 * tier has a registry of its own here, where the modes agree, and the mode keeps that true
 * for tiers sharing one. */
static int new_registry(kvreg_registry **out, kvreg_event_fn fn, void *user_data, int poll)
{
    kvreg_config *cfg = NULL;
    int rc = kvreg_config_new(&cfg);
    if (rc == KVREG_OK)
        rc = kvreg_config_set(cfg, KVREG_OPT_EVENT_MODE, KVREG_EVENTS_PER_TIER);
    if (rc == KVREG_OK && fn)
        rc = kvreg_config_set_event_fn(cfg, fn, user_data, NULL);
    if (rc == KVREG_OK && poll)
        rc = zmq_feed_configure(cfg);
    if (rc == KVREG_OK)
        rc = kvreg_registry_new(out, cfg);
    kvreg_config_free(cfg);
    return rc;
}

/* feed_tokens_fn: the tokens of a block the cluster has named. */
static int tokens_of(void *ctx, uint64_t sequence_hash, uint32_t *out)
{
    cluster *c = ctx;
    const uint64_t *id = hmap_get(&c->id_of, sequence_hash);
    if (!id)
        return -1;
    namer_tokens(c->nm, *id, out);
    return 0;
}

static int cluster_init(cluster *c, const replay_options *o, const cache_config *cc, namer *nm)
{
    kvreg_index_config *icfg = NULL;
    cache_config shared = *cc, per_engine = *cc;
    const int zmq = o->transport == REPLAY_TRANSPORT_ZMQ;
    /* NATS: one registry per worker for both tiers, one publisher each (nats_cluster.h) */
    const int nats = o->transport == REPLAY_TRANSPORT_NATS;
    uint32_t i;
    int rc;

    memset(c, 0, sizeof *c);
    c->n = o->workers;
    c->nm = nm;
    hmap_init(&c->id_of);
    c->eng = calloc(c->n, sizeof *c->eng);
    c->inflight = calloc(c->n, sizeof *c->inflight);
    c->requests_per_worker = calloc(c->n, sizeof *c->requests_per_worker);
    c->window_cap = (size_t)c->n * o->inflight;
    c->window = calloc(c->window_cap, sizeof *c->window);
    c->regs = calloc(2 * (size_t)c->n, sizeof *c->regs);
    if (!c->eng || !c->inflight || !c->requests_per_worker || !c->window || !c->regs ||
        router_init(&c->rt, o->router, c->n, o->seed, &o->routing) != 0)
        return KVREG_ENOMEM;

    /* The workers are libkvreg engines: the hashes they publish are router hashes. */
    rc = kvreg_index_config_new(&icfg);
    if (rc == KVREG_OK)
        rc = kvreg_index_config_set(icfg, KVREG_INDEX_OPT_HASHES, KVREG_INDEX_HASHES_OWN);
    if (rc == KVREG_OK)
        rc = kvreg_index_config_set(icfg, KVREG_INDEX_OPT_BLOCK_SIZE, o->block_tokens);
    if (rc == KVREG_OK)
        rc = kvreg_index_config_set(icfg, KVREG_INDEX_OPT_SALT, o->salt);
    if (rc == KVREG_OK && cc->g1_blocks != CACHE_UNLIMITED && cc->g2_blocks != CACHE_UNLIMITED)
        rc = kvreg_index_config_set(icfg, KVREG_INDEX_OPT_EXPECTED_ENTRIES, /* what can be cached */
                                    (uint64_t)c->n * (cc->g1_blocks + cc->g2_blocks));
    if (rc == KVREG_OK)
        rc = kvreg_index_new(&c->idx, icfg);
    c->icfg = icfg;

    /* Over ZeroMQ the engines' own registries' events are sent as they are, so every
     * Register carries its tokens (inproc, the feed adds them before encoding). */
    if (zmq || nats) {
        per_engine.with_tokens = 1;
        per_engine.tokens_of = tokens_of;
        per_engine.tokens_ctx = c;
    }
    for (i = 0; i < c->n && rc == KVREG_OK; i++) {
        engine *e = &c->eng[i];
        if (!zmq && !nats)
            rc = feed_init(&e->fd, i, c->idx, &c->fs, o->block_tokens, tokens_of, c);
        if (rc == KVREG_OK)
            rc = new_registry(&e->g1_reg, zmq || nats ? NULL : feed_capture, &e->fd, zmq || nats);
        if (rc == KVREG_OK && !nats)
            rc = new_registry(&e->g2_reg, zmq ? NULL : feed_capture, &e->fd, zmq);
        if (rc == KVREG_OK)
            rc = cache_init_tiers(&e->model, e->g1_reg, nats ? e->g1_reg : e->g2_reg, &per_engine);
        if (nats) { /* nats_cluster_open takes one registry per worker */
            c->regs[i] = e->g1_reg;
            continue;
        }
        c->regs[2 * i] = e->g1_reg;
        c->regs[2 * i + 1] = e->g2_reg;
    }
    shared.g1_blocks = times(cc->g1_blocks, c->n);
    shared.g2_blocks = times(cc->g2_blocks, c->n);
    shared.inflight = cc->inflight * c->n;
    if (rc == KVREG_OK)
        rc = new_registry(&c->shared_reg, NULL, NULL, 0);
    if (rc == KVREG_OK)
        rc = cache_init(&c->shared, c->shared_reg, &shared);
    return rc;
}

static void cluster_free(cluster *c)
{
    uint32_t i;
    zmq_feed_close(c->zf); /* the publishers stop before their registries go */
    nats_cluster_close(c->nc);
    for (i = 0; c->eng && i < c->n; i++) {
        cache_free(&c->eng[i].model);
        kvreg_registry_free(c->eng[i].g1_reg);
        kvreg_registry_free(c->eng[i].g2_reg);
        feed_free(&c->eng[i].fd);
    }
    cache_free(&c->shared);
    kvreg_registry_free(c->shared_reg);
    kvreg_index_free(c->idx);
    kvreg_index_config_free(c->icfg);
    router_free(&c->rt);
    free(c->eng);
    free(c->inflight);
    free(c->window);
    free(c->requests_per_worker);
    free(c->regs);
    free(c->seq_hashes);
    free(c->block_hashes);
    free(c->query_ns);
    hmap_free(&c->id_of);
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    size_t n = *cap ? *cap : 1024;
    void *q;
    if (need <= *cap)
        return 0;
    while (n < need)
        n *= 2;
    q = realloc(*p, n * elem);
    if (!q)
        return -1;
    *p = q;
    *cap = n;
    return 0;
}

/* A request counts as in flight on its worker until window_cap later requests were
 * dispatched. The oldest one retires BEFORE the next request is routed (retire_oldest), so the
 * router sees the window_cap - 1 requests still running beside the new one: picking with the
 * finished one still counted gave worker 0 a 9/8 share (issue 39). */
static int retire_oldest(cluster *c)
{
    if (c->window_len == c->window_cap) {
        c->inflight[c->window[c->window_head]]--;
        c->window_head = (c->window_head + 1) % c->window_cap;
        c->window_len--;
        return router_retired(&c->rt);
    }
    return 0;
}

static void dispatched(cluster *c, uint32_t w)
{
    c->window[(c->window_head + c->window_len) % c->window_cap] = w;
    c->window_len++;
    c->inflight[w]++;
    c->requests_per_worker[w]++;
}

/* Carry engine w's new events into the index; with zmq, wait until every event is there. */
static int carry_events(cluster *c, uint32_t w)
{
    if (c->nc)
        return nats_cluster_sync(c->nc);
    return c->zf ? zmq_feed_sync(c->zf) : feed_flush(&c->eng[w].fd);
}

/* Route and replay one request; 0 or -1 (printed). */
static int one_request(cluster *c, namer *nm, const replay_request *req, uint64_t n_done,
                       uint64_t blocks_so_far, uint32_t inflight_per_worker)
{
    uint32_t w = 0, bt = c->eng[0].model.cfg.block_tokens;
    double load_cost, qns;
    if (grow((void **)&c->seq_hashes, &c->seq_cap, req->n_ids, sizeof(uint64_t)) != 0 ||
        grow((void **)&c->block_hashes, &c->block_cap, req->n_ids, sizeof(uint64_t)) != 0 ||
        grow((void **)&c->query_ns, &c->query_cap, n_done + 1, sizeof(double)) != 0 ||
        (req->n_ids && namer_chain(nm, req->ids, req->n_ids, c->block_hashes, c->seq_hashes) != 0)) {
        fprintf(stderr, "kvreg-replay: out of memory\n");
        return -1;
    }
    /* one request in flight beyond the least loaded worker costs a mean request's share */
    load_cost = n_done ? (double)blocks_so_far / (double)n_done / inflight_per_worker : 0.0;
    if (retire_oldest(c) != 0 || (c->nc && nats_cluster_before_request(c->nc, n_done) != 0))
        return -1;
    if (router_pick(&c->rt, c->nc ? nats_cluster_route_index(c->nc, n_done) : c->idx,
                    c->seq_hashes, req->n_ids, c->inflight, load_cost, &w, &qns) != 0)
        return -1;
    if (c->nc) /* the in-process run's choice for this request */
        nats_cluster_routed(c->nc, n_done < c->ref->n_reqs && c->ref->reqs[n_done].worker == w);
    c->query_ns[n_done] = qns;
    for (size_t i = 0; i < req->n_ids; i++) {
        if (hmap_put(&c->id_of, c->seq_hashes[i], req->ids[i], NULL) != 0) {
            fprintf(stderr, "kvreg-replay: out of memory\n");
            return -1;
        }
    }
    dispatched(c, w);
    /* the request holds its prompt and output blocks while it runs (kv-load's active blocks) */
    if (router_dispatched(&c->rt, w, (req->input_length + req->output_length + bt - 1) / bt) != 0)
        return -1;
    if (cluster_record_begin(c->out, &c->eng[w].model.st) != 0 ||
        cache_request(&c->eng[w].model, nm, req) != 0 || carry_events(c, w) != 0 ||
        cluster_record_end(c->out, &c->eng[w].model.st, req, w) != 0)
        return -1;
    return cache_request(&c->shared, nm, req);
}

/* Worker w's tiers for hash according to the index: bit 0 GPU, bit 1 CPU; -1 on an error. */
static int index_tiers(cluster *c, const kvreg_index *idx, uint32_t w, uint64_t hash)
{
    size_t n = 0, i;
    if (kvreg_index_query_hashes(idx, &hash, 1, 0, c->rt.matches, c->n, &n) != KVREG_OK)
        return -1;
    for (i = 0; i < n; i++)
        if (c->rt.matches[i].worker_id == w)
            return (c->rt.matches[i].tier_depth[KVREG_MEDIUM_GPU] ? 1 : 0) |
                   (c->rt.matches[i].tier_depth[KVREG_MEDIUM_CPU] ? 2 : 0);
    return 0;
}

/* After the run: the index, built from the events alone, holds exactly what every worker's
 * tiers hold, in the right tiers. 1 when it does, 0 after printing the first differences. */
static int index_agrees(cluster *c, const kvreg_index *idx)
{
    uint64_t expected = 0, entries = 0, bad = 0;
    uint32_t w;
    size_t i;
    for (w = 0; w < c->n; w++) {
        const cache *m = &c->eng[w].model;
        const lru *tiers[2] = {&m->t1, &m->t2};
        int t;
        for (t = 0; t < 2; t++) {
            for (i = 0; i < tiers[t]->index.cap; i++) {
                uint64_t h;
                int want, got;
                if (!tiers[t]->index.used[i])
                    continue;
                h = tiers[t]->index.keys[i];
                want = (lru_find(&m->t1, h) ? 1 : 0) | (lru_find(&m->t2, h) ? 2 : 0);
                if (t == 1 && (want & 1))
                    continue; /* counted with G1 */
                expected++;
                got = index_tiers(c, idx, w, h);
                if (got != want && bad++ < 5)
                    fprintf(stderr, "kvreg-replay: index: worker %u hash %016llx tiers %d, "
                            "the worker holds %d\n", w, (unsigned long long)h, got, want);
            }
        }
    }
    kvreg_index_stat(idx, KVREG_INDEX_STAT_ENTRIES, &entries);
    if (entries != expected) {
        fprintf(stderr, "kvreg-replay: index: %llu entries, the workers hold %llu blocks\n",
                (unsigned long long)entries, (unsigned long long)expected);
        bad++;
    }
    return bad == 0;
}

/* nats_index_fn: a replica's index, configured as the in-process one. */
static int make_index(void *ctx, kvreg_index **out)
{
    const cluster *c = ctx;
    return kvreg_index_new(out, c->icfg);
}

/* A registry counter summed over the workers (one registry each with --transport nats). */
static uint64_t sum_stat(const cluster *c, uint32_t stat)
{
    uint64_t sum = 0, v;
    uint32_t i;
    for (i = 0; i < c->n; i++) {
        v = 0;
        kvreg_registry_stat(c->eng[i].g1_reg, stat, &v);
        sum += v;
        if (c->eng[i].g2_reg) {
            v = 0;
            kvreg_registry_stat(c->eng[i].g2_reg, stat, &v);
            sum += v;
        }
    }
    return sum;
}

static void add_stats(cache_stats *sum, const cache_stats *s)
{
    sum->requests += s->requests;
    sum->blocks += s->blocks;
    sum->prompt_tokens += s->prompt_tokens;
    sum->output_tokens += s->output_tokens;
    sum->hit_blocks_g1 += s->hit_blocks_g1;
    sum->hit_blocks_g2 += s->hit_blocks_g2;
    sum->hit_tokens_g1 += s->hit_tokens_g1;
    sum->hit_tokens_g2 += s->hit_tokens_g2;
    sum->g1_evictions += s->g1_evictions;
    sum->g2_stores += s->g2_stores;
    sum->g2_evictions += s->g2_evictions;
    sum->onboards += s->onboards;
    sum->early_finishes += s->early_finishes;
    sum->over_capacity += s->over_capacity;
    sum->api_calls += s->api_calls;
}

static int replay(const replay_options *o, workload *w, cluster_outcome *out)
{
    cluster c;
    namer nm;
    hmap seen;
    report r;
    cluster_report cr;
    zmq_feed_stats zs;
    nats_cluster_stats ns;
    cluster_outcome ref;
    cache_config cc;
    struct rusage ru;
    uint64_t n_done = 0, blocks_so_far = 0;
    double t0;
    int rc, status = 0;
    uint32_t i;
    const kvreg_index *idx;

    if (o->transport == REPLAY_TRANSPORT_ZMQ && !zmq_feed_available()) {
        fprintf(stderr, "kvreg-replay: --transport zmq: this libkvreg was built without ZeroMQ "
                        "(libzmq3-dev was not found when it was configured); use --transport "
                        "inproc\n");
        return EXIT_BAD_INPUT;
    }
    if (o->transport == REPLAY_TRANSPORT_NATS && !nats_cluster_available()) {
        fprintf(stderr, "kvreg-replay: --transport nats: this libkvreg was built without NATS "
                        "(libnats-dev was not found when it was configured); use --transport "
                        "inproc\n");
        return EXIT_BAD_INPUT;
    }
    memset(&ref, 0, sizeof ref);
    memset(&ns, 0, sizeof ns);
    if (o->transport == REPLAY_TRANSPORT_NATS && (status = nats_cluster_reference(o, &ref)) != 0) {
        cluster_outcome_free(&ref);
        return status;
    }
    if (o->transport == REPLAY_TRANSPORT_NATS && o->nats.kill_router && ref.n_reqs < 3) {
        /* a usage error the workload's size shows: no server is started for it */
        fprintf(stderr, "kvreg-replay: --kill-router needs 3 requests or more (a replica is "
                        "killed a third into the run and restored at two thirds)\n");
        cluster_outcome_free(&ref);
        return EXIT_BAD_INPUT;
    }
    memset(&r, 0, sizeof r);
    memset(&cr, 0, sizeof cr);
    memset(&cc, 0, sizeof cc); /* by hash only, no tokens_of: see cluster_init */
    cc.g1_blocks = o->g1_blocks;
    cc.g2_blocks = o->g2_blocks;
    cc.inflight = o->inflight;
    cc.block_tokens = o->block_tokens;
    hmap_init(&seen);
    if (namer_init(&nm, o->block_tokens, o->salt) != 0) {
        fprintf(stderr, "kvreg-replay: out of memory\n");
        cluster_outcome_free(&ref);
        return EXIT_LIBRARY;
    }
    rc = cluster_init(&c, o, &cc, &nm);
    if (rc != KVREG_OK) {
        fprintf(stderr, "kvreg-replay: cannot set up the cluster: %s%s\n", kvreg_strerror(rc),
                rc == KVREG_ENOTSUP ? " (this libkvreg was built without the wire formats)" : "");
        cluster_free(&c);
        namer_free(&nm);
        cluster_outcome_free(&ref);
        return EXIT_LIBRARY;
    }
    c.out = out;
    c.ref = &ref;
    if (o->transport == REPLAY_TRANSPORT_NATS &&
        nats_cluster_open(&c.nc, o, c.n, c.regs, ref.n_reqs, make_index, &c) != 0) {
        cluster_free(&c);
        namer_free(&nm);
        cluster_outcome_free(&ref);
        return EXIT_LIBRARY;
    }
    if (o->transport == REPLAY_TRANSPORT_ZMQ &&
        zmq_feed_open(&c.zf, c.idx, c.n, c.regs, o->block_tokens, &c.fs) != 0) {
        cluster_free(&c);
        namer_free(&nm);
        return EXIT_LIBRARY;
    }

    t0 = now_s();
    for (;;) {
        replay_request req;
        rc = workload_next(w, &req);
        if (rc < 0) {
            status = EXIT_BAD_INPUT;
            break;
        }
        if (rc == 0)
            break;
        if (count_max_hits(&seen, &req, o->block_tokens, &r) != 0 ||
            one_request(&c, &nm, &req, n_done, blocks_so_far, o->inflight) != 0) {
            status = EXIT_LIBRARY;
            break;
        }
        n_done++;
        blocks_so_far += req.n_ids;
        if (o->max_requests && n_done >= o->max_requests)
            break;
    }
    for (i = 0; status == 0 && i < c.n; i++) {
        if (cache_drain(&c.eng[i].model) != 0 || carry_events(&c, i) != 0)
            status = EXIT_LIBRARY;
    }
    if (status == 0 && cache_drain(&c.shared) != 0)
        status = EXIT_LIBRARY;
    r.elapsed_s = now_s() - t0;

    if (status == 0) {
        r.source = o->trace;
        r.seed = o->trace ? 0 : o->seed;
        r.conversations = o->trace ? 0 : o->conversations;
        r.salt = o->salt;
        r.cfg = cc;
        r.bad_lines = w->bad_lines;
        r.unique_blocks = seen.len;
        for (i = 0; i < c.n; i++) {
            uint64_t h1 = 0, h2 = 0;
            add_stats(&r.st, &c.eng[i].model.st);
            kvreg_registry_stat(c.eng[i].g1_reg, KVREG_STAT_HASHES, &h1);
            kvreg_registry_stat(c.eng[i].g2_reg, KVREG_STAT_HASHES, &h2);
            r.registry_hashes += h1 + h2;
            r.g1_size += kvreg_pool_size(c.eng[i].model.g1);
            r.g2_size += c.eng[i].model.g2 ? kvreg_pool_size(c.eng[i].model.g2) : 0;
        }
        if (c.nc && nats_cluster_finish(c.nc, &ns) != 0)
            status = EXIT_LIBRARY;
        if (c.nc) { /* the events as the registries count them; the batches as published */
            c.fs.registers = sum_stat(&c, KVREG_STAT_EVENTS_REGISTER);
            c.fs.removes = sum_stat(&c, KVREG_STAT_EVENTS_REMOVE);
            c.fs.events = c.fs.registers + c.fs.removes;
            c.fs.payloads = ns.batches_published;
            c.fs.wire_events = ns.events0;
            c.fs.apply_s = ns.run0_s;
            cr.nats = &ns;
        }
        r.registers = c.fs.registers;
        r.removes = c.fs.removes;
        r.peak_rss_kib = getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : 0;

        cr.workers = c.n;
        cr.router = router_policy_name(o->router);
        cr.transport = c.zf ? "zmq" : c.nc ? "nats" : "inproc";
        if (c.zf)
            zmq_feed_get_stats(c.zf, &zs);
        cr.zmq = c.zf ? &zs : NULL;
        cr.requests_per_worker = c.requests_per_worker;
        cr.shared = c.shared.st;
        cr.shared_g1 = c.shared.cfg.g1_blocks;
        cr.shared_g2 = c.shared.cfg.g2_blocks;
        idx = c.nc ? nats_cluster_index(c.nc, 0) : c.idx; /* the replicas agree (checked) */
        kvreg_index_stat(idx, KVREG_INDEX_STAT_ENTRIES, &cr.index_entries);
        kvreg_index_stat(idx, KVREG_INDEX_STAT_MEMORY_BYTES, &cr.index_memory);
        kvreg_index_stat(idx, KVREG_INDEX_STAT_BYTES_PER_ENTRY, &cr.index_bytes_per_entry);
        kvreg_index_stat(idx, KVREG_INDEX_STAT_WORKERS, &cr.index_workers);
        cr.query_ns = c.query_ns;
        cr.n_queries = n_done;
        cr.feed = c.fs;
        cr.index_agrees = index_agrees(&c, idx);
        for (i = 1; c.nc && cr.index_agrees && nats_cluster_index(c.nc, i); i++)
            cr.index_agrees = index_agrees(&c, nats_cluster_index(c.nc, i));
        if (!cr.index_agrees)
            status = EXIT_LIBRARY;
        if (out)
            status = cluster_outcome_keep(out, &r, &cr) == 0 ? status : EXIT_LIBRARY;
        else
            cluster_report_print(stdout, o->json, &r, &cr);
    }
    cluster_free(&c);
    namer_free(&nm);
    hmap_free(&seen);
    cluster_outcome_free(&ref);
    return status;
}

int cluster_run(const replay_options *o, workload *w)
{
    return replay(o, w, NULL);
}

int cluster_collect(const replay_options *o, workload *w, cluster_outcome *out)
{
    return replay(o, w, out);
}
