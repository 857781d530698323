/* The nats suite's engines and replicas (nats_world.h). */
#define _POSIX_C_SOURCE 200809L
#include "nats_world.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

nats_server server;

/* ------------------------------------------------------------------------------ engine side */

void engine_open(engine *e, uint64_t poll_capacity, int keep_tokens) {
    memset(e, 0, sizeof *e);
    kvreg_config *cfg = NULL;
    assert_int_equal(kvreg_config_new(&cfg), KVREG_OK);
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_DELIVERY, KVREG_DELIVERY_POLL), KVREG_OK);
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_POLL_CAPACITY, poll_capacity), KVREG_OK);
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_KEEP_TOKENS, (uint64_t)keep_tokens), KVREG_OK);
    assert_int_equal(kvreg_registry_new(&e->reg, cfg), KVREG_OK);
    kvreg_config_free(cfg);
    assert_int_equal(kvreg_pool_new_medium(&e->gpu, e->reg, "gpu", KVREG_MEDIUM_GPU), KVREG_OK);
    assert_int_equal(kvreg_pool_new_medium(&e->cpu, e->reg, "cpu", KVREG_MEDIUM_CPU), KVREG_OK);
    assert_int_equal(kvreg_nats_publisher_new(&e->pub, e->reg), KVREG_OK);
}

/* Publisher options: pairs (option, value) ended by 0. */
static void engine_startv(engine *e, const char *url, const char *stream, const char *prefix, uint64_t format,
                          uint64_t worker, va_list ap) {
    assert_int_equal(kvreg_nats_publisher_set_string(e->pub, KVREG_NATS_URL, url), KVREG_OK);
    assert_int_equal(kvreg_nats_publisher_set_string(e->pub, KVREG_NATS_STREAM, stream), KVREG_OK);
    assert_int_equal(kvreg_nats_publisher_set_string(e->pub, KVREG_NATS_SUBJECT_PREFIX, prefix), KVREG_OK);
    assert_int_equal(kvreg_nats_publisher_set(e->pub, KVREG_NATS_PUB_OPT_FORMAT, format), KVREG_OK);
    assert_int_equal(kvreg_nats_publisher_set(e->pub, KVREG_NATS_PUB_OPT_WORKER_ID, worker), KVREG_OK);
    for (;;) {
        const unsigned opt = va_arg(ap, unsigned);
        if (!opt) break;
        assert_int_equal(kvreg_nats_publisher_set(e->pub, opt, va_arg(ap, uint64_t)), KVREG_OK);
    }
    assert_int_equal(kvreg_nats_publisher_start(e->pub), KVREG_OK);
}

void engine_start(engine *e, const char *stream, const char *prefix, uint64_t format, uint64_t worker, ...) {
    va_list ap;
    va_start(ap, worker);
    engine_startv(e, server.url, stream, prefix, format, worker, ap);
    va_end(ap);
}

void engine_start_at(engine *e, const char *url, const char *stream, const char *prefix, uint64_t format,
                     uint64_t worker, ...) {
    va_list ap;
    va_start(ap, worker);
    engine_startv(e, url, stream, prefix, format, worker, ap);
    va_end(ap);
}

void engine_one_per_batch(engine *e, const char *stream, const char *prefix, uint64_t worker) {
    engine_open(e, 1024, 0);
    engine_start(e, stream, prefix, KVREG_WIRE_DYNAMO_MSGPACK, worker, KVREG_NATS_PUB_OPT_MAX_EVENTS, (uint64_t)1, 0);
}

uint64_t pub_stat(const engine *e, uint32_t stat) {
    uint64_t v = 0;
    assert_int_equal(kvreg_nats_publisher_stat(e->pub, stat, &v), KVREG_OK);
    return v;
}

void put_stream_cfg(const jsStreamConfig *cfg, int update) {
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    jsStreamInfo *si = NULL;
    assert_int_equal(natsConnection_ConnectTo(&nc, server.url), NATS_OK);
    assert_int_equal(natsConnection_JetStream(&js, nc, NULL), NATS_OK);
    jsStreamConfig c = *cfg; /* libnats takes it non-const */
    if (update)
        assert_int_equal(js_UpdateStream(&si, js, &c, NULL, NULL), NATS_OK);
    else
        assert_int_equal(js_AddStream(&si, js, &c, NULL, NULL), NATS_OK);
    jsStreamInfo_Destroy(si);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
}

void delete_stream(const char *name) {
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    assert_int_equal(natsConnection_ConnectTo(&nc, server.url), NATS_OK);
    assert_int_equal(natsConnection_JetStream(&js, nc, NULL), NATS_OK);
    assert_int_equal(js_DeleteStream(js, name, NULL, NULL), NATS_OK);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
}

void put_stream(const char *name, const char *subjects, int32_t max_msg_size, int update) {
    jsStreamConfig cfg;
    jsStreamConfig_Init(&cfg);
    const char *subj[1] = {subjects};
    cfg.Name = name;
    cfg.Subjects = subj;
    cfg.SubjectsLen = 1;
    cfg.Storage = js_FileStorage;
    cfg.MaxMsgSize = max_msg_size;
    put_stream_cfg(&cfg, update);
}

uint64_t stream_msgs(const char *name) {
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    jsStreamInfo *si = NULL;
    assert_int_equal(natsConnection_ConnectTo(&nc, server.url), NATS_OK);
    assert_int_equal(natsConnection_JetStream(&js, nc, NULL), NATS_OK);
    assert_int_equal(js_GetStreamInfo(&si, js, name, NULL, NULL), NATS_OK);
    const uint64_t n = si->State.Msgs;
    jsStreamInfo_Destroy(si);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    return n;
}

/* Stop (everything queued goes out and is acknowledged) and return the batches made. */
uint64_t engine_finish(engine *e) {
    assert_int_equal(kvreg_nats_publisher_stop(e->pub), KVREG_OK);
    assert_int_equal(pub_stat(e, KVREG_NATS_PUB_STAT_BATCHES_UNACKED), 0);
    assert_int_equal(pub_stat(e, KVREG_NATS_PUB_STAT_EVENTS_UNSENT), 0);
    assert_int_equal(pub_stat(e, KVREG_NATS_PUB_STAT_ACKED), pub_stat(e, KVREG_NATS_PUB_STAT_BATCHES));
    return pub_stat(e, KVREG_NATS_PUB_STAT_BATCHES);
}

void engine_close(engine *e) {
    kvreg_nats_publisher_free(e->pub);
    kvreg_registry_free(e->reg);
    memset(e, 0, sizeof *e);
}

/* A hash-only block (the Dynamo formats need no tokens): sequence hash h, no parent. */
int reg_hash(kvreg_pool *pool, uint64_t h, kvreg_block *out) {
    kvreg_block_desc d;
    memset(&d, 0, sizeof d);
    d.sequence_hash = h;
    d.block_hash = h ^ UINT64_C(0x9e3779b97f4a7c15);
    return kvreg_register(pool, &d, out);
}

/* ------------------------------------------------------------------------------ router side */

void on_notice(const kvreg_nats_notice *n, void *user) {
    replica *r = user;
    if (r->n_notices < MAX_NOTICES) {
        r->kinds[r->n_notices] = n->kind;
        r->has_seq[r->n_notices] = n->has_seq;
        snprintf(r->texts[r->n_notices], sizeof r->texts[0], "%s", n->message);
    }
    r->n_notices++;
}

/* A replica not started yet: its index (own hashes or ENGINE mode) and a consumer of stream
 * with that durable, notices recorded; set more options, then kvreg_nats_consumer_start. */
void replica_prepare(replica *r, const char *stream, const char *durable, int own_hashes) {
    kvreg_index_config *cfg = NULL;
    assert_int_equal(kvreg_index_config_new(&cfg), KVREG_OK);
    if (own_hashes)
        assert_int_equal(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_HASHES, KVREG_INDEX_HASHES_OWN), KVREG_OK);
    replica_prepare_index(r, stream, durable, cfg);
    kvreg_index_config_free(cfg);
}

void replica_prepare_index(replica *r, const char *stream, const char *durable, const kvreg_index_config *cfg) {
    memset(r, 0, sizeof *r);
    assert_int_equal(kvreg_index_new(&r->idx, cfg), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_new(&r->con, r->idx), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_set_string(r->con, KVREG_NATS_URL, server.url), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_set_string(r->con, KVREG_NATS_STREAM, stream), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_set_string(r->con, KVREG_NATS_DURABLE, durable), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_set_notice_fn(r->con, on_notice, r), KVREG_OK);
}

void replica_open(replica *r, const char *stream, const char *durable, int own_hashes,
                  uint64_t max_msg_bytes) {
    replica_prepare(r, stream, durable, own_hashes);
    if (max_msg_bytes)
        assert_int_equal(kvreg_nats_consumer_set(r->con, KVREG_NATS_CON_OPT_MAX_MSG_BYTES, max_msg_bytes),
                         KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_start(r->con), KVREG_OK);
}

/* replica_open (own hashes) with the consumer's ack wait set. */
void replica_open_ack(replica *r, const char *stream, const char *durable, uint64_t ack_wait_ms) {
    replica_prepare(r, stream, durable, 1);
    assert_int_equal(kvreg_nats_consumer_set(r->con, KVREG_NATS_CON_OPT_ACK_WAIT_MS, ack_wait_ms), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_start(r->con), KVREG_OK);
}

uint64_t con_stat(const replica *r, uint32_t stat) {
    uint64_t v = 0;
    assert_int_equal(kvreg_nats_consumer_stat(r->con, stat, &v), KVREG_OK);
    return v;
}

/* Run until the replica has applied `batches` batches (bounded). */
void replica_catch_up(replica *r, uint64_t batches) {
    const int64_t deadline = nats_now_ms() + 10000;
    while (con_stat(r, KVREG_NATS_CON_STAT_BATCHES) < batches) {
        assert_true(nats_now_ms() < deadline);
        assert_int_equal(kvreg_nats_consumer_run(r->con, 50), KVREG_OK);
    }
    /* Nothing more than that arrives (no duplicate is applied). */
    assert_int_equal(kvreg_nats_consumer_run(r->con, 0), KVREG_OK);
    assert_int_equal(con_stat(r, KVREG_NATS_CON_STAT_BATCHES), batches);
}

void replica_close(replica *r) {
    kvreg_nats_consumer_free(r->con);
    kvreg_index_free(r->idx);
    memset(r, 0, sizeof *r);
}

/* Does the index name `worker` as a holder of hash h? */
int index_holds(const kvreg_index *idx, uint64_t h, uint64_t worker) {
    kvreg_index_match m[4];
    size_t n = 0;
    assert_int_equal(kvreg_index_query_hashes(idx, &h, 1, 0, m, 4, &n), KVREG_OK);
    for (size_t i = 0; i < n; i++)
        if (m[i].worker_id == worker && m[i].depth >= 1) return 1;
    return 0;
}

/* For every hash of [0, universe): the replica holds it for `worker` iff the engine does. */
void assert_same_as_engine(const replica *r, const engine *e, uint64_t worker, uint64_t base,
                                  uint64_t universe) {
    uint64_t held = 0;
    for (uint64_t h = base; h < base + universe; h++) {
        int present = 0;
        assert_int_equal(kvreg_registry_contains(e->reg, h, &present), KVREG_OK);
        held += (uint64_t)present;
        if (index_holds(r->idx, h, worker) != present) {
            fprintf(stderr, "hash %llu: engine %d, index %d\n", (unsigned long long)h, present, !present);
            fail();
        }
    }
    uint64_t entries = 0, engine_hashes = 0;
    assert_int_equal(kvreg_index_stat(r->idx, KVREG_INDEX_STAT_ENTRIES, &entries), KVREG_OK);
    assert_int_equal(kvreg_registry_stat(e->reg, KVREG_STAT_HASHES, &engine_hashes), KVREG_OK);
    assert_int_equal(entries, engine_hashes);
    assert_int_equal(entries, held);
}

/* A random workload over two pools, Dynamo msgpack, small batches; replica 1 consumes on its
 * own thread while the engine runs, replica 2 afterwards. */
void *run_replica(void *arg) {
    runner *u = arg;
    kvreg_nats_consumer_run(u->r->con, -1);
    return NULL;
}

void random_workload(engine *e, uint64_t base, unsigned ops, unsigned seed) {
    static kvreg_block held[2][UNIVERSE];
    memset(held, 0, sizeof held);
    uint64_t x = seed * UINT64_C(0x9e3779b97f4a7c15) + 1;
    for (unsigned i = 0; i < ops; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        /* Each hash lives in one pool (h % 2): a hash in two pools would give a Register of
         * one tier and a Remove of the other (the registry's events are per hash, not per
         * pool), which no index can reconcile. */
        const unsigned h = (unsigned)((x >> 20) % UNIVERSE), p = h & 1;
        kvreg_pool *pool = p ? e->cpu : e->gpu;
        if (held[p][h]) {
            assert_int_equal(kvreg_release(pool, held[p][h]), KVREG_OK);
            held[p][h] = 0;
        } else {
            assert_int_equal(reg_hash(pool, base + h, &held[p][h]), KVREG_OK);
        }
    }
}
