/* Suite nats: the NATS JetStream publisher and consumer against a real nats-server the test
 * starts itself (nats_fixture.h). Every index is checked against the engine's own registry
 * (what its pools hold) or against hand-computed answers, never against the code under test. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <nats/nats.h>

#include <kvreg.h>
#include <kvreg_index.h>
#include <kvreg_nats.h>
#include <kvreg_net.h>


#include "nats_world.h"

/* ------------------------------------------------------------------------------------ tests */
static void test_api(void **state) {
    (void)state;
    assert_int_equal(kvreg_nats_available(), 1);
    kvreg_registry *inline_reg = NULL;
    kvreg_nats_publisher *pub = NULL;
    assert_int_equal(kvreg_registry_new(&inline_reg, NULL), KVREG_OK);
    assert_int_equal(kvreg_nats_publisher_new(&pub, inline_reg), KVREG_EINVAL); /* not POLL */
    kvreg_registry_free(inline_reg);

    engine e;
    engine_open(&e, 1024, 0);
    assert_int_equal(kvreg_nats_publisher_set(e.pub, KVREG_NATS_PUB_OPT_MAX_IN_FLIGHT, 0), KVREG_EINVAL);
    assert_int_equal(kvreg_nats_publisher_set(e.pub, KVREG_NATS_PUB_OPT_FORMAT, KVREG_WIRE_SGLANG), KVREG_EINVAL);
    assert_int_equal(kvreg_nats_publisher_set(e.pub, 999, 1), KVREG_EINVAL);
    {
        /* The publisher takes the registry's events: no other poller, no second publisher
         * (of either kind). Both used to succeed. */
        kvreg_event ev[4];
        size_t n = 99;
        assert_int_equal(kvreg_registry_poll(e.reg, ev, 4, &n), KVREG_EBUSY);
        assert_int_equal(kvreg_registry_poll_wait(e.reg, ev, 4, &n, 0), KVREG_EBUSY);
        assert_int_equal(n, 99);
        kvreg_nats_publisher *second = NULL;
        assert_int_equal(kvreg_nats_publisher_new(&second, e.reg), KVREG_EBUSY);
        assert_null(second);
        kvreg_publisher *zmq_pub = NULL;
        const int rc = kvreg_publisher_new(&zmq_pub, e.reg);
        assert_true(rc == KVREG_EBUSY || rc == KVREG_ENOTSUP); /* ENOTSUP: built without libzmq */
        assert_null(zmq_pub);
    }
    assert_int_equal(kvreg_nats_publisher_set_string(e.pub, KVREG_NATS_NAMESPACE, "a.b"), KVREG_OK);
    assert_int_equal(kvreg_nats_publisher_start(e.pub), KVREG_EINVAL); /* '.' in a token */
    engine_close(&e);

    /* Nobody listens on port 1: start fails within its connect bound. */
    engine_open(&e, 1024, 0);
    assert_int_equal(kvreg_nats_publisher_set_string(e.pub, KVREG_NATS_URL, "nats://127.0.0.1:1"), KVREG_OK);
    assert_int_equal(kvreg_nats_publisher_set(e.pub, KVREG_NATS_PUB_OPT_CONNECT_TIMEOUT_MS, 500), KVREG_OK);
    const int64_t t0 = nats_now_ms();
    assert_int_equal(kvreg_nats_publisher_start(e.pub), KVREG_EPROTO);
    assert_true(nats_now_ms() - t0 < 3000);
    assert_int_equal(kvreg_nats_publisher_stop(e.pub), KVREG_OK);
    engine_close(&e);

    /* A consumer of a stream that does not exist. */
    kvreg_index *idx = NULL;
    kvreg_nats_consumer *con = NULL;
    assert_int_equal(kvreg_index_new(&idx, NULL), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_new(&con, idx), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_run(con, 0), KVREG_ESTATE);
    assert_int_equal(kvreg_nats_consumer_set_string(con, KVREG_NATS_URL, server.url), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_set_string(con, KVREG_NATS_STREAM, "NO_SUCH_STREAM"), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_start(con), KVREG_EPROTO);
    kvreg_nats_consumer_free(con);
    kvreg_index_free(idx);
}

/* Hand-checkable, vLLM format, router hashes computed by the index from the tokens:
 * A = tokens 1..48 (blocks A0 A1 A2), B = tokens 1..16 then 101..116 (B0 == A0, then B1).
 * The engine registers A0 A1 A2 and B1 (B0 is A0: the pool takes another reference) and then
 * releases A2. The index must hold exactly A0, A1, B1: prompt A matches 2 blocks, B 2 blocks,
 * and a prompt starting with another token nothing. */
static void test_small_vllm(void **state) {
    (void)state;
    uint32_t a[48], b[32];
    for (uint32_t i = 0; i < 48; i++) a[i] = i + 1;
    for (uint32_t i = 0; i < 16; i++) b[i] = i + 1;
    for (uint32_t i = 0; i < 16; i++) b[16 + i] = 101 + i;
    engine e;
    engine_open(&e, 1024, 1);
    engine_start(&e, "SMALL", "small.ev", KVREG_WIRE_VLLM, 7, KVREG_NATS_PUB_OPT_BLOCK_SIZE, (uint64_t)16, 0);
    replica r1;
    replica_open(&r1, "SMALL", "r1", 0, 0); /* this one is there from the start */

    kvreg_sequence *sa = NULL, *sb = NULL;
    assert_int_equal(kvreg_sequence_new(&sa, 16, KVREG_ROUTER_SALT), KVREG_OK);
    assert_int_equal(kvreg_sequence_new(&sb, 16, KVREG_ROUTER_SALT), KVREG_OK);
    assert_int_equal(kvreg_sequence_extend(sa, a, 48, NULL), KVREG_OK);
    assert_int_equal(kvreg_sequence_extend(sb, b, 32, NULL), KVREG_OK);
    kvreg_block ba[3], bb[2];
    size_t n = 0;
    assert_int_equal(kvreg_register_sequence(e.gpu, sa, 0, 3, ba, NULL, &n), KVREG_OK);
    assert_int_equal(n, 3);
    kvreg_block_info b0;
    assert_int_equal(kvreg_sequence_block(sb, 0, &b0), KVREG_OK);
    assert_int_equal(kvreg_acquire(e.gpu, b0.sequence_hash, &bb[0]), KVREG_OK);
    assert_int_equal(kvreg_register_sequence_block(e.gpu, sb, 1, &bb[1]), KVREG_OK);
    assert_int_equal(kvreg_release(e.gpu, ba[2]), KVREG_OK);
    const uint64_t batches = engine_finish(&e);
    assert_int_equal(pub_stat(&e, KVREG_NATS_PUB_STAT_EVENTS_SENT), 5); /* 4 Register, 1 Remove */

    replica r2;
    replica_open(&r2, "SMALL", "r2", 0, 0); /* a replica that joins after the fact */
    replica *rs[2] = {&r1, &r2};
    for (int i = 0; i < 2; i++) {
        replica_catch_up(rs[i], batches);
        uint64_t entries = 0;
        assert_int_equal(kvreg_index_stat(rs[i]->idx, KVREG_INDEX_STAT_ENTRIES, &entries), KVREG_OK);
        assert_int_equal(entries, 3);
        kvreg_index_depth d[2];
        size_t nd = 0;
        assert_int_equal(kvreg_index_query_depths_tokens(rs[i]->idx, a, 48, d, 2, &nd), KVREG_OK);
        assert_int_equal(nd, 1);
        assert_int_equal(d[0].worker_id, 7);
        assert_int_equal(d[0].depth, 2);
        assert_int_equal(kvreg_index_query_depths_tokens(rs[i]->idx, b, 32, d, 2, &nd), KVREG_OK);
        assert_int_equal(nd, 1);
        assert_int_equal(d[0].depth, 2);
        uint32_t other[16];
        memcpy(other, a, sizeof other);
        other[0] = 999;
        assert_int_equal(kvreg_index_query_depths_tokens(rs[i]->idx, other, 16, d, 2, &nd), KVREG_OK);
        assert_int_equal(nd, 0);
        assert_int_equal(con_stat(rs[i], KVREG_NATS_CON_STAT_LOST), 0);
        assert_int_equal(con_stat(rs[i], KVREG_NATS_CON_STAT_MALFORMED), 0);
        assert_int_equal(rs[i]->n_notices, 0);
    }
    kvreg_sequence_free(sa);
    kvreg_sequence_free(sb);
    replica_close(&r1);
    replica_close(&r2);
    engine_close(&e);
}


static void test_random_two_replicas(void **state) {
    (void)state;
    engine e;
    engine_open(&e, 1 << 16, 0);
    engine_start(&e, "RAND", "rand.ev", KVREG_WIRE_DYNAMO_MSGPACK, 3, KVREG_NATS_PUB_OPT_MAX_EVENTS,
                 (uint64_t)8, KVREG_NATS_PUB_OPT_BATCH_US, (uint64_t)0, 0);
    replica r1, r2;
    replica_open(&r1, "RAND", "r1", 1, 0);
    runner u = {&r1, 0};
    assert_int_equal(pthread_create(&u.thread, NULL, run_replica, &u), 0);
    random_workload(&e, 1000, 6000, 1);
    const uint64_t batches = engine_finish(&e);
    const int64_t deadline = nats_now_ms() + 10000;
    uint64_t applied = 0;
    while ((kvreg_nats_consumer_stat(r1.con, KVREG_NATS_CON_STAT_BATCHES, &applied), applied) < batches) {
        assert_true(nats_now_ms() < deadline);
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL); /* polling a counter with a deadline */
    }
    kvreg_nats_consumer_stop(r1.con);
    pthread_join(u.thread, NULL);
    replica_catch_up(&r1, batches);
    replica_open(&r2, "RAND", "r2", 1, 0);
    replica_catch_up(&r2, batches);
    assert_same_as_engine(&r1, &e, 3, 1000, UNIVERSE);
    assert_same_as_engine(&r2, &e, 3, 1000, UNIVERSE);
    uint64_t next = 0, inst = 0;
    assert_int_equal(kvreg_nats_consumer_worker(r2.con, 3, 0, &inst, &next), KVREG_OK);
    assert_int_equal(next, batches);
    assert_int_equal(con_stat(&r1, KVREG_NATS_CON_STAT_LOST), 0);
    assert_int_equal(con_stat(&r2, KVREG_NATS_CON_STAT_LOST), 0);
    replica_close(&r1);
    replica_close(&r2);
    engine_close(&e);
}

/* The registry's queue (64 events) overflows before the publisher runs: 300 registered, 236
 * dropped. The publisher must report the loss and resync (Cleared + snapshot) so that the
 * replicas still end with the engine's blocks. */
static void test_loss_resync(void **state) {
    (void)state;
    engine e;
    engine_open(&e, 64, 0);
    kvreg_block blocks[300];
    for (unsigned i = 0; i < 300; i++) assert_int_equal(reg_hash(e.gpu, 5000 + i, &blocks[i]), KVREG_OK);
    uint64_t dropped = 0;
    assert_int_equal(kvreg_registry_stat(e.reg, KVREG_STAT_EVENTS_DROPPED, &dropped), KVREG_OK);
    assert_int_equal(dropped, 236);
    engine_start(&e, "LOSS", "loss.ev", KVREG_WIRE_DYNAMO_MSGPACK, 11, 0);
    for (unsigned i = 0; i < 300; i += 3) assert_int_equal(kvreg_release(e.gpu, blocks[i]), KVREG_OK);
    const uint64_t batches = engine_finish(&e);
    /* The 100 Removes may overflow the 64-event queue again before the publisher drains it:
     * what it reports lost is the registry's drops since its start. */
    assert_int_equal(kvreg_registry_stat(e.reg, KVREG_STAT_EVENTS_DROPPED, &dropped), KVREG_OK);
    assert_int_equal(pub_stat(&e, KVREG_NATS_PUB_STAT_EVENTS_LOST), dropped - 236);
    assert_true(pub_stat(&e, KVREG_NATS_PUB_STAT_RESYNCS) >= 1);
    replica r;
    replica_open(&r, "LOSS", "r1", 1, 0);
    replica_catch_up(&r, batches);
    assert_same_as_engine(&r, &e, 11, 5000, 300);
    replica_close(&r);
    engine_close(&e);
}

/* nats-server is killed (SIGKILL) mid-stream with batches in flight and restarted on its file
 * store while the engine keeps going: every batch is in the stream exactly once, and both
 * replicas apply every seq once and equal the engine. */
static void test_server_restart(void **state) {
    (void)state;
    engine e;
    engine_open(&e, 1 << 16, 0);
    engine_start(&e, "RESTART", "restart.ev", KVREG_WIRE_DYNAMO_MSGPACK, 5, KVREG_NATS_PUB_OPT_MAX_EVENTS,
                 (uint64_t)1, KVREG_NATS_PUB_OPT_BATCH_US, (uint64_t)0, KVREG_NATS_PUB_OPT_ACK_TIMEOUT_MS,
                 (uint64_t)300, KVREG_NATS_PUB_OPT_RETRY_MS, (uint64_t)50, KVREG_NATS_PUB_OPT_MAX_IN_FLIGHT,
                 (uint64_t)64, KVREG_NATS_PUB_OPT_LINGER_MS, (uint64_t)8000, 0);
    kvreg_block blocks[400];
    for (unsigned i = 0; i < 200; i++) assert_int_equal(reg_hash(e.gpu, 20000 + i, &blocks[i]), KVREG_OK);
    nats_server_kill(&server, SIGKILL);
    for (unsigned i = 200; i < 400; i++) assert_int_equal(reg_hash(e.gpu, 20000 + i, &blocks[i]), KVREG_OK);
    for (unsigned i = 0; i < 200; i += 4) assert_int_equal(kvreg_release(e.gpu, blocks[i]), KVREG_OK);
    /* The server stays away until batches in flight have timed out, so the resend path runs
     * (a polled counter with a deadline, not a sleep). */
    const int64_t deadline = nats_now_ms() + 5000;
    while (pub_stat(&e, KVREG_NATS_PUB_STAT_ERRORS) == 0) {
        assert_true(nats_now_ms() < deadline);
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    nats_server_restart(&server);
    const uint64_t batches = engine_finish(&e);
    assert_true(pub_stat(&e, KVREG_NATS_PUB_STAT_RETRIES) >= 1);
    assert_int_equal(batches, 450); /* one event a batch: 400 Register + 50 Remove */
    fprintf(stderr, "restart: %llu batches, %llu publish failures, %llu resent, %llu acked as duplicates\n",
            (unsigned long long)batches, (unsigned long long)pub_stat(&e, KVREG_NATS_PUB_STAT_ERRORS),
            (unsigned long long)pub_stat(&e, KVREG_NATS_PUB_STAT_RETRIES),
            (unsigned long long)pub_stat(&e, KVREG_NATS_PUB_STAT_DUPLICATES));
    assert_int_equal(pub_stat(&e, KVREG_NATS_PUB_STAT_EVENTS_LOST), 0);
    assert_int_equal(stream_msgs("RESTART"), batches); /* no batch lost or stored twice */
    replica r1, r2;
    replica_open(&r1, "RESTART", "r1", 1, 0);
    replica_open(&r2, "RESTART", "r2", 1, 0);
    replica_catch_up(&r1, batches);
    replica_catch_up(&r2, batches);
    assert_same_as_engine(&r1, &e, 5, 20000, 400);
    assert_same_as_engine(&r2, &e, 5, 20000, 400);
    assert_int_equal(con_stat(&r1, KVREG_NATS_CON_STAT_LOST), 0);
    assert_int_equal(con_stat(&r2, KVREG_NATS_CON_STAT_LOST), 0);
    replica_close(&r1);
    replica_close(&r2);
    engine_close(&e);
}

/* Garbage in the stream: no header, a header that does not parse, a valid header on a payload
 * that does not decode, a message over the replica's size limit, a header with seq 2^64 - 1,
 * and an empty one with a
 * "Status" header (what the server's own status messages carry: it must not be taken for
 * one, which dropped it unacknowledged, redelivered for ever). Each gets a MALFORMED notice
 * and is acknowledged; the replica goes on and applies the engine's batches after them. */
static void raw_publish_named(jsCtx *js, const char *subject, const char *name, const char *header, const void *data,
                              int len) {
    natsMsg *m = NULL;
    jsPubAck *pa = NULL;
    assert_int_equal(natsMsg_Create(&m, subject, NULL, data, len), NATS_OK);
    if (header) assert_int_equal(natsMsgHeader_Set(m, name, header), NATS_OK);
    assert_int_equal(js_PublishMsg(&pa, js, m, NULL, NULL), NATS_OK);
    jsPubAck_Destroy(pa);
    natsMsg_Destroy(m);
}
static void raw_publish(jsCtx *js, const char *subject, const char *header, const void *data, int len) {
    raw_publish_named(js, subject, "Kvreg-Batch", header, data, len);
}

static void test_garbage(void **state) {
    (void)state;
    engine e;
    engine_open(&e, 1024, 0);
    engine_start(&e, "GARBAGE", "garbage.ev", KVREG_WIRE_DYNAMO_MSGPACK, 9, 0); /* makes the stream */
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    assert_int_equal(natsConnection_ConnectTo(&nc, server.url), NATS_OK);
    assert_int_equal(natsConnection_JetStream(&js, nc, NULL), NATS_OK);
    static const unsigned char junk[] = {0xc1, 0xff, 0x00, 'j', 'u', 'n', 'k'};
    raw_publish(js, "garbage.ev.x", NULL, junk, sizeof junk);
    raw_publish(js, "garbage.ev.x", "1 x 0 0 0 1", junk, sizeof junk);
    raw_publish(js, "garbage.ev.x", "1 99 0 5 0 4", junk, sizeof junk); /* worker 99 seq 0 */
    static char big[8192];
    memset(big, 0x91, sizeof big);
    raw_publish(js, "garbage.ev.x", "1 98 0 5 0 4", big, sizeof big);
    /* seq 2^64 - 1: no next seq (applied, a replica's next wrapped to 0) */
    raw_publish(js, "garbage.ev.x", "1 97 0 5 18446744073709551615 4", junk, sizeof junk);
    raw_publish_named(js, "garbage.ev.x", "Status", "404", NULL, 0);
    kvreg_block b[10];
    for (unsigned i = 0; i < 10; i++) assert_int_equal(reg_hash(e.gpu, 700 + i, &b[i]), KVREG_OK);
    assert_int_equal(kvreg_release(e.gpu, b[3]), KVREG_OK);
    const uint64_t batches = engine_finish(&e);

    replica r;
    replica_open(&r, "GARBAGE", "r1", 1, 4096);
    /* The undecodable payload of worker 99 still uses its seq: one batch (of no events). */
    replica_catch_up(&r, batches + 1);
    assert_int_equal(con_stat(&r, KVREG_NATS_CON_STAT_MALFORMED), 6);
    assert_int_equal(r.n_notices, 6);
    /* Every message acknowledged: none pending, the ack floor at the stream's last. */
    jsConsumerInfo *ci = NULL;
    assert_int_equal(js_GetConsumerInfo(&ci, js, "GARBAGE", "r1", NULL, NULL), NATS_OK);
    assert_int_equal(ci->NumAckPending, 0);
    assert_int_equal(ci->NumRedelivered, 0);
    assert_int_equal(ci->AckFloor.Stream, batches + 6);
    jsConsumerInfo_Destroy(ci);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    int over = 0, header = 0, decode = 0;
    for (int i = 0; i < 6; i++) {
        assert_int_equal(r.kinds[i], KVREG_NATS_NOTICE_MALFORMED);
        over += strstr(r.texts[i], "over the limit") != NULL;
        header += strstr(r.texts[i], "Kvreg-Batch") != NULL;
        if (strstr(r.texts[i], "does not decode")) {
            decode++;
            assert_int_equal(r.has_seq[i], 1);
        }
    }
    assert_int_equal(over, 1);
    assert_int_equal(header, 4);
    assert_int_equal(decode, 1);
    uint64_t next = 0;
    assert_int_equal(kvreg_nats_consumer_worker(r.con, 99, 0, NULL, &next), KVREG_OK);
    assert_int_equal(next, 1);
    assert_int_equal(kvreg_nats_consumer_worker(r.con, 98, 0, NULL, &next), KVREG_ENOENT);
    assert_int_equal(kvreg_nats_consumer_worker(r.con, 97, 0, NULL, &next), KVREG_ENOENT);
    assert_same_as_engine(&r, &e, 9, 700, 10);
    replica_close(&r);
    engine_close(&e);
}

/* A worker's seq 1 stored before its seq 0 (what a resend after a server restart does): a new
 * replica must hold seq 1, apply seq 0 when it comes, then seq 1 (regression: the first batch
 * seen was taken as the start, seq 0 reported lost and then skipped as a duplicate). */
static void encode_one(uint64_t hash, uint8_t *out, size_t *len) {
    kvreg_wire_encoder *enc = NULL;
    kvreg_event ev;
    memset(&ev, 0, sizeof ev);
    ev.kind = KVREG_EVENT_REGISTER;
    ev.sequence_hash = hash;
    ev.block_hash = hash + 1;
    const uint8_t *p = NULL;
    size_t used = 0;
    assert_int_equal(kvreg_wire_encoder_new(&enc, KVREG_WIRE_DYNAMO_MSGPACK), KVREG_OK);
    assert_int_equal(kvreg_wire_encode(enc, &ev, 1, 0.0, &used, &p, len), KVREG_OK);
    assert_true(*len <= 256);
    memcpy(out, p, *len);
    kvreg_wire_encoder_free(enc);
}

static void test_out_of_order_start(void **state) {
    (void)state;
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    jsStreamInfo *si = NULL;
    assert_int_equal(natsConnection_ConnectTo(&nc, server.url), NATS_OK);
    assert_int_equal(natsConnection_JetStream(&js, nc, NULL), NATS_OK);
    const char *subjects[1] = {"ooo.>"};
    jsStreamConfig sc;
    jsStreamConfig_Init(&sc);
    sc.Name = "OOO";
    sc.Subjects = subjects;
    sc.SubjectsLen = 1;
    assert_int_equal(js_AddStream(&si, js, &sc, NULL, NULL), NATS_OK);
    jsStreamInfo_Destroy(si);
    uint8_t p0[256], p1[256];
    size_t l0 = 0, l1 = 0;
    encode_one(111, p0, &l0);
    encode_one(222, p1, &l1);
    raw_publish(js, "ooo.w", "1 55 0 9 1 4", p1, (int)l1);
    raw_publish(js, "ooo.w", "1 55 0 9 0 4", p0, (int)l0);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);

    replica r;
    replica_open(&r, "OOO", "r1", 1, 0);
    replica_catch_up(&r, 2);
    assert_int_equal(con_stat(&r, KVREG_NATS_CON_STAT_LOST), 0);
    assert_int_equal(con_stat(&r, KVREG_NATS_CON_STAT_DUPLICATES), 0);
    assert_int_equal(index_holds(r.idx, 111, 55), 1);
    assert_int_equal(index_holds(r.idx, 222, 55), 1);
    uint64_t next = 0;
    assert_int_equal(kvreg_nats_consumer_worker(r.con, 55, 0, NULL, &next), KVREG_OK);
    assert_int_equal(next, 2);
    replica_close(&r);
}

/* Streams of raw batches (header "1 worker rank instance seq format") for the tests below. */
static void raw_stream(jsCtx **js, natsConnection **nc, const char *name, const char *subject) {
    jsStreamInfo *si = NULL;
    assert_int_equal(natsConnection_ConnectTo(nc, server.url), NATS_OK);
    assert_int_equal(natsConnection_JetStream(js, *nc, NULL), NATS_OK);
    const char *subjects[1] = {subject};
    jsStreamConfig sc;
    jsStreamConfig_Init(&sc);
    sc.Name = name;
    sc.Subjects = subjects;
    sc.SubjectsLen = 1;
    assert_int_equal(js_AddStream(&si, *js, &sc, NULL, NULL), NATS_OK);
    jsStreamInfo_Destroy(si);
}

static size_t raw_batch_of(jsCtx *js, const char *subject, uint64_t worker, uint64_t instance, uint64_t seq,
                           uint64_t hash) {
    uint8_t p[256];
    size_t l = 0;
    char header[96];
    encode_one(hash, p, &l);
    snprintf(header, sizeof header, "1 %llu 0 %llu %llu 4", (unsigned long long)worker, (unsigned long long)instance,
             (unsigned long long)seq);
    raw_publish(js, subject, header, p, (int)l);
    return l;
}
static void raw_batch(jsCtx *js, const char *subject, uint64_t instance, uint64_t seq, uint64_t hash) {
    raw_batch_of(js, subject, 56, instance, seq, hash);
}

static int count_notices(const replica *r, uint32_t kind, const char *text) {
    int n = 0;
    for (int i = 0; i < r->n_notices && i < MAX_NOTICES; i++)
        n += r->kinds[i] == kind && (!text || strstr(r->texts[i], text));
    return n;
}

/* Ten workers each missing their seq 0: their seq 1s are held, but never more than
 * MAX_HELD_BYTES across workers (three payloads' worth here): past it the oldest gap is given
 * up at once (LOSS), long before REORDER_MS. (Unbounded, many workers' 1 MB batches held 1.2 GB.) */
static void test_held_bytes_bound(void **state) {
    (void)state;
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    raw_stream(&js, &nc, "HELDB", "heldb.>");
    size_t len = 0;
    for (uint64_t w = 0; w < 10; w++) len = raw_batch_of(js, "heldb.w", 100 + w, 9, 1, 5000 + w);
    replica r;
    replica_prepare(&r, "HELDB", "r1", 1);
    assert_int_equal(kvreg_nats_consumer_set(r.con, KVREG_NATS_CON_OPT_MAX_HELD_BYTES, 3 * len), KVREG_OK);
    uint64_t v = 0;
    assert_int_equal(kvreg_nats_consumer_get(r.con, KVREG_NATS_CON_OPT_MAX_HELD_BYTES, &v), KVREG_OK);
    assert_int_equal(v, 3 * len);
    assert_int_equal(kvreg_nats_consumer_set(r.con, KVREG_NATS_CON_OPT_MAX_HELD_BYTES, 0), KVREG_EINVAL);
    assert_int_equal(kvreg_nats_consumer_set(r.con, KVREG_NATS_CON_OPT_REORDER_MS, 3600000), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_start(r.con), KVREG_OK);
    const int64_t deadline = nats_now_ms() + 10000;
    while (con_stat(&r, KVREG_NATS_CON_STAT_MESSAGES) < 10) {
        assert_true(nats_now_ms() < deadline);
        assert_int_equal(kvreg_nats_consumer_run(r.con, 20), KVREG_OK);
    }
    assert_int_equal(con_stat(&r, KVREG_NATS_CON_STAT_HELD), 3);
    assert_int_equal(con_stat(&r, KVREG_NATS_CON_STAT_LOST), 7);
    assert_int_equal(count_notices(&r, KVREG_NATS_NOTICE_LOSS, "MAX_HELD_BYTES"), 7);
    /* The seven given up first (the oldest) applied their seq 1; the last three still wait. */
    for (uint64_t w = 0; w < 10; w++) {
        uint64_t next = 0;
        assert_int_equal(kvreg_nats_consumer_worker(r.con, 100 + w, 0, NULL, &next), KVREG_OK);
        assert_int_equal(next, w < 7 ? 2 : 0);
        assert_int_equal(index_holds(r.idx, 5000 + w, 100 + w), w < 7);
    }
    replica_close(&r);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
}

/* Held batches are not acknowledged: with MAX_ACK_PENDING of them the server sends nothing
 * new, the missing batch included, so the gap is given up at once (LOSS) instead of after
 * REORDER_MS (an hour here), and the stream moves on. The missing batch, stored after the held
 * ones, then comes as a duplicate. */
static void test_held_at_ack_pending(void **state) {
    (void)state;
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    raw_stream(&js, &nc, "HELDP", "heldp.>");
    for (uint64_t s = 1; s <= 5; s++) raw_batch(js, "heldp.w", 9, s, 6000 + s);
    raw_batch(js, "heldp.w", 9, 0, 6000); /* a resend stored late */
    replica r;
    replica_prepare(&r, "HELDP", "r1", 1);
    assert_int_equal(kvreg_nats_consumer_set(r.con, KVREG_NATS_CON_OPT_MAX_ACK_PENDING, 4), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_set(r.con, KVREG_NATS_CON_OPT_REORDER_MS, 3600000), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_start(r.con), KVREG_OK);
    const int64_t deadline = nats_now_ms() + 8000;
    uint64_t next = 0;
    while (kvreg_nats_consumer_worker(r.con, 56, 0, NULL, &next) != KVREG_OK || next < 6 ||
           con_stat(&r, KVREG_NATS_CON_STAT_MESSAGES) < 6) {
        assert_true(nats_now_ms() < deadline);
        assert_int_equal(kvreg_nats_consumer_run(r.con, 20), KVREG_OK);
    }
    assert_int_equal(next, 6);
    assert_int_equal(con_stat(&r, KVREG_NATS_CON_STAT_LOST), 1);
    assert_int_equal(con_stat(&r, KVREG_NATS_CON_STAT_DUPLICATES), 1);
    assert_int_equal(con_stat(&r, KVREG_NATS_CON_STAT_HELD), 0);
    assert_int_equal(count_notices(&r, KVREG_NATS_NOTICE_LOSS, "MAX_ACK_PENDING"), 1);
    for (uint64_t s = 1; s <= 5; s++) assert_int_equal(index_holds(r.idx, 6000 + s, 56), 1);
    replica_close(&r);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
}

/* A seq that never comes: the batches after it are held, and after REORDER_MS the missing one
 * gets a LOSS notice and the held ones apply, in order. */
static void test_reorder_give_up(void **state) {
    (void)state;
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    raw_stream(&js, &nc, "GIVEUP", "giveup.>");
    raw_batch(js, "giveup.w", 9, 0, 1000);
    raw_batch(js, "giveup.w", 9, 2, 1002); /* seq 1 never published */
    raw_batch(js, "giveup.w", 9, 3, 1003);
    replica r;
    replica_prepare(&r, "GIVEUP", "r1", 1);
    assert_int_equal(kvreg_nats_consumer_set(r.con, KVREG_NATS_CON_OPT_REORDER_MS, 200), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_start(r.con), KVREG_OK);
    const int64_t t0 = nats_now_ms(), deadline = t0 + 10000;
    uint64_t next = 0;
    while (kvreg_nats_consumer_worker(r.con, 56, 0, NULL, &next) != KVREG_OK || next < 4) {
        assert_true(nats_now_ms() < deadline);
        if (next == 1) assert_int_equal(con_stat(&r, KVREG_NATS_CON_STAT_LOST), 0); /* still waiting */
        assert_int_equal(kvreg_nats_consumer_run(r.con, 20), KVREG_OK);
    }
    assert_true(nats_now_ms() - t0 >= 200); /* not before REORDER_MS */
    assert_int_equal(next, 4);
    assert_int_equal(con_stat(&r, KVREG_NATS_CON_STAT_LOST), 1);
    int loss = 0;
    for (int i = 0; i < r.n_notices && i < MAX_NOTICES; i++) loss += r.kinds[i] == KVREG_NATS_NOTICE_LOSS;
    assert_int_equal(loss, 1);
    assert_int_equal(index_holds(r.idx, 1000, 56), 1);
    assert_int_equal(index_holds(r.idx, 1001, 56), 0);
    assert_int_equal(index_holds(r.idx, 1002, 56), 1);
    assert_int_equal(index_holds(r.idx, 1003, 56), 1);
    replica_close(&r);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
}

/* An engine restart through the stream: a new instance's seq 0 drops the worker's entries
 * (RESET) and is applied; a late batch of the old instance is skipped (STALE). */
static void test_restart_through_stream(void **state) {
    (void)state;
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    raw_stream(&js, &nc, "ERESTART", "erestart.>");
    raw_batch(js, "erestart.w", 9, 0, 2000);
    raw_batch(js, "erestart.w", 9, 1, 2001);
    raw_batch(js, "erestart.w", 10, 0, 2100); /* the engine restarted */
    raw_batch(js, "erestart.w", 9, 2, 2002);  /* a late batch of its old run */
    raw_batch(js, "erestart.w", 10, 1, 2101);
    replica r;
    replica_open(&r, "ERESTART", "r1", 1, 0);
    const int64_t deadline = nats_now_ms() + 10000;
    uint64_t next = 0, inst = 0;
    while (con_stat(&r, KVREG_NATS_CON_STAT_MESSAGES) < 5) {
        assert_true(nats_now_ms() < deadline);
        assert_int_equal(kvreg_nats_consumer_run(r.con, 20), KVREG_OK);
    }
    assert_int_equal(kvreg_nats_consumer_worker(r.con, 56, 0, &inst, &next), KVREG_OK);
    assert_int_equal(inst, 10);
    assert_int_equal(next, 2);
    assert_int_equal(con_stat(&r, KVREG_NATS_CON_STAT_RESETS), 1);
    assert_int_equal(con_stat(&r, KVREG_NATS_CON_STAT_STALE), 1);
    assert_int_equal(con_stat(&r, KVREG_NATS_CON_STAT_LOST), 0);
    assert_int_equal(index_holds(r.idx, 2000, 56), 0);
    assert_int_equal(index_holds(r.idx, 2001, 56), 0);
    assert_int_equal(index_holds(r.idx, 2002, 56), 0);
    assert_int_equal(index_holds(r.idx, 2100, 56), 1);
    assert_int_equal(index_holds(r.idx, 2101, 56), 1);
    replica_close(&r);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
}

/* A start() that fails leaves nothing behind: the same consumer started again, once the
 * failure is gone, runs as a new one would (and, under AddressSanitizer, the first attempt's
 * decoders, connection and liveness lookups are not leaked). Failures: a stream that does not
 * exist yet, then a liveness bucket name the server refuses (too long). */
static void test_start_again(void **state) {
    (void)state;
    replica r;
    replica_prepare(&r, "AGAIN", "again-r", 1);
    assert_int_equal(kvreg_nats_consumer_start(r.con), KVREG_EPROTO); /* no such stream */
    assert_int_equal(kvreg_nats_consumer_start(r.con), KVREG_EPROTO);
    engine e;
    engine_one_per_batch(&e, "AGAIN", "again.ev", 3);
    kvreg_block b;
    for (unsigned i = 0; i < 10; i++) assert_int_equal(reg_hash(e.gpu, 5000 + i, &b), KVREG_OK);
    const uint64_t batches = engine_finish(&e);
    char bucket[300];
    memset(bucket, 'L', sizeof bucket - 1);
    bucket[sizeof bucket - 1] = '\0';
    assert_int_equal(kvreg_nats_consumer_set_string(r.con, KVREG_NATS_LIVENESS_BUCKET, bucket), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_start(r.con), KVREG_EPROTO); /* the server refuses the bucket */
    assert_int_equal(kvreg_nats_consumer_set_string(r.con, KVREG_NATS_LIVENESS_BUCKET, "AGAIN_LIVE"), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_start(r.con), KVREG_OK);
    replica_catch_up(&r, batches);
    for (unsigned i = 0; i < 10; i++) assert_int_equal(index_holds(r.idx, 5000 + i, 3), 1);
    replica_close(&r);
    engine_close(&e);
}

/* A replica that restores checks the stream together with its snapshot slots (one round trip
 * for all): with a snapshot in the bucket but the stream gone, its start fails and its index
 * stays empty (no snapshot loaded into a replica that cannot consume). With the stream made
 * again, its sequences start over: the snapshot, which covers sequence `batches` of the
 * stream's earlier life, is refused (restored, the replica would skip the new stream's first
 * `batches` messages), and the same replica starts empty; once the stream has come as far
 * again, the snapshot is taken (its sequence is one the stream has reached). */
static void test_restore_needs_stream(void **state) {
    (void)state;
    engine e;
    engine_one_per_batch(&e, "RNS", "rns.ev", 3);
    kvreg_block b;
    for (unsigned i = 0; i < 10; i++) assert_int_equal(reg_hash(e.gpu, 6000 + i, &b), KVREG_OK);
    const uint64_t batches = engine_finish(&e);
    engine_close(&e);
    replica a;
    replica_prepare(&a, "RNS", "rns-a", 1);
    assert_int_equal(kvreg_nats_consumer_set_string(a.con, KVREG_NATS_SNAPSHOT_BUCKET, "RNS_SNAP"), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_start(a.con), KVREG_OK);
    replica_catch_up(&a, batches);
    uint64_t seq = 0;
    assert_int_equal(kvreg_nats_consumer_snapshot(a.con, &seq), KVREG_OK);
    assert_int_equal(seq, batches);
    replica_close(&a);
    delete_stream("RNS");

    replica r;
    replica_prepare(&r, "RNS", "rns-r", 1);
    assert_int_equal(kvreg_nats_consumer_set_string(r.con, KVREG_NATS_SNAPSHOT_BUCKET, "RNS_SNAP"), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_start(r.con), KVREG_EPROTO);
    uint64_t workers = 1;
    assert_int_equal(kvreg_index_stat(r.idx, KVREG_INDEX_STAT_WORKERS, &workers), KVREG_OK);
    assert_int_equal(workers, 0);
    assert_int_equal(con_stat(&r, KVREG_NATS_CON_STAT_RESTORED), 0);
    put_stream("RNS", "rns.ev.>", 0, 0);
    assert_int_equal(kvreg_nats_consumer_start(r.con), KVREG_OK);
    assert_int_equal(con_stat(&r, KVREG_NATS_CON_STAT_RESTORED), 0);
    assert_int_equal(con_stat(&r, KVREG_NATS_CON_STAT_SNAPSHOTS_REJECTED), 1);
    assert_non_null(strstr(r.texts[r.n_notices - 1], "past the stream's last"));
    assert_int_equal(kvreg_index_stat(r.idx, KVREG_INDEX_STAT_WORKERS, &workers), KVREG_OK);
    assert_int_equal(workers, 0);
    replica_close(&r);
    /* The same snapshot once the stream has as many messages again (a stream restored from a
     * backup keeps its sequences): taken. */
    engine_one_per_batch(&e, "RNS", "rns.ev", 4);
    for (unsigned i = 0; i < batches; i++) assert_int_equal(reg_hash(e.gpu, 7000 + i, &b), KVREG_OK);
    engine_finish(&e);
    engine_close(&e);
    assert_true(stream_msgs("RNS") >= batches);
    replica_prepare(&r, "RNS", "rns-r2", 1);
    assert_int_equal(kvreg_nats_consumer_set_string(r.con, KVREG_NATS_SNAPSHOT_BUCKET, "RNS_SNAP"), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_start(r.con), KVREG_OK);
    assert_int_equal(con_stat(&r, KVREG_NATS_CON_STAT_RESTORED), 1);
    for (unsigned i = 0; i < 10; i++) assert_int_equal(index_holds(r.idx, 6000 + i, 3), 1);
    replica_close(&r);
}

/* A replica with a subject filter (KVREG_NATS_FILTER) is made a durable with that filter: of
 * two engines on one stream (workers 5 and 6) it applies the batches of the one its filter
 * names, and no others; a replica without one applies both. */
static void test_filter(void **state) {
    (void)state;
    engine e5, e6;
    engine_one_per_batch(&e5, "FILT", "filt.ev", 5);
    engine_one_per_batch(&e6, "FILT", "filt.ev", 6);
    kvreg_block b;
    for (unsigned i = 0; i < 20; i++) {
        assert_int_equal(reg_hash(e5.gpu, 3000 + i, &b), KVREG_OK);
        assert_int_equal(reg_hash(e6.gpu, 4000 + i, &b), KVREG_OK);
    }
    const uint64_t b5 = engine_finish(&e5), b6 = engine_finish(&e6);
    assert_int_equal(b5, 20);
    assert_int_equal(b6, 20);

    replica r;
    replica_prepare(&r, "FILT", "only5", 1);
    assert_int_equal(kvreg_nats_consumer_set_string(r.con, KVREG_NATS_FILTER, "filt.ev.default.backend.5.*"), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_start(r.con), KVREG_OK);
    replica_catch_up(&r, b5); /* and nothing more */
    for (unsigned i = 0; i < 20; i++) {
        assert_int_equal(index_holds(r.idx, 3000 + i, 5), 1);
        assert_int_equal(index_holds(r.idx, 4000 + i, 6), 0);
    }
    replica_close(&r);

    replica_open(&r, "FILT", "both", 1, 0);
    replica_catch_up(&r, b5 + b6);
    for (unsigned i = 0; i < 20; i++) {
        assert_int_equal(index_holds(r.idx, 3000 + i, 5), 1);
        assert_int_equal(index_holds(r.idx, 4000 + i, 6), 1);
    }
    replica_close(&r);
    engine_close(&e5);
    engine_close(&e6);
}

/* A replica's durable keeps its position: a consumer stopped part way and a new one on the
 * same durable (RESUME) and the same index apply every batch between them exactly once. */
static void test_resume(void **state) {
    (void)state;
    engine e;
    engine_open(&e, 1024, 0);
    engine_start(&e, "RESUME", "resume.ev", KVREG_WIRE_DYNAMO_MSGPACK, 4, KVREG_NATS_PUB_OPT_MAX_EVENTS,
                 (uint64_t)1, 0);
    kvreg_block b[100];
    for (unsigned i = 0; i < 100; i++) assert_int_equal(reg_hash(e.gpu, 900 + i, &b[i]), KVREG_OK);
    for (unsigned i = 0; i < 100; i += 2) assert_int_equal(kvreg_release(e.gpu, b[i]), KVREG_OK);
    const uint64_t batches = engine_finish(&e);
    assert_int_equal(batches, 150);

    replica r;
    replica_open(&r, "RESUME", "r1", 1, 0);
    kvreg_nats_consumer_free(r.con); /* set up again with a small fetch, to stop part way */
    assert_int_equal(kvreg_nats_consumer_new(&r.con, r.idx), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_set_string(r.con, KVREG_NATS_URL, server.url), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_set_string(r.con, KVREG_NATS_STREAM, "RESUME"), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_set_string(r.con, KVREG_NATS_DURABLE, "r1"), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_set(r.con, KVREG_NATS_CON_OPT_FETCH_BATCH, 10), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_start(r.con), KVREG_OK);
    const int64_t deadline = nats_now_ms() + 10000;
    while (con_stat(&r, KVREG_NATS_CON_STAT_BATCHES) < 40) {
        assert_true(nats_now_ms() < deadline);
        assert_int_equal(kvreg_nats_consumer_run(r.con, 0), KVREG_OK);
    }
    const uint64_t first = con_stat(&r, KVREG_NATS_CON_STAT_BATCHES);
    assert_true(first < batches);
    kvreg_nats_consumer_free(r.con);

    assert_int_equal(kvreg_nats_consumer_new(&r.con, r.idx), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_set_string(r.con, KVREG_NATS_URL, server.url), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_set_string(r.con, KVREG_NATS_STREAM, "RESUME"), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_set_string(r.con, KVREG_NATS_DURABLE, "r1"), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_set(r.con, KVREG_NATS_CON_OPT_RESUME, 1), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_start(r.con), KVREG_OK);
    replica_catch_up(&r, batches - first);
    assert_same_as_engine(&r, &e, 4, 900, 100);
    uint64_t next = 0;
    assert_int_equal(kvreg_nats_consumer_worker(r.con, 4, 0, NULL, &next), KVREG_OK);
    assert_int_equal(next, batches);
    replica_close(&r);
    engine_close(&e);
}

/* Long (suite long): the engine runs a random workload on its thread and two replicas consume
 * on theirs while nats-server is killed (SIGKILL) and restarted 5 times on its file store.
 * Afterwards every batch is in the stream once, no replica lost a seq, and both equal the
 * engine. */
typedef struct workload {
    engine *e;
    unsigned ops, seed;
    int failures;
    pthread_t thread;
} workload;

static void *run_workload(void *arg) {
    workload *w = arg;
    static kvreg_block held[UNIVERSE];
    uint64_t x = w->seed * UINT64_C(0x9e3779b97f4a7c15) + 1;
    for (unsigned i = 0; i < w->ops; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        const unsigned h = (unsigned)((x >> 20) % UNIVERSE);
        kvreg_pool *pool = (h & 1) ? w->e->cpu : w->e->gpu;
        if (held[h]) {
            w->failures += kvreg_release(pool, held[h]) != KVREG_OK;
            held[h] = 0;
        } else {
            w->failures += reg_hash(pool, 40000 + h, &held[h]) != KVREG_OK;
        }
        if (i % 64 == 63) { /* an engine step: a few hundred microseconds */
            struct timespec ts = {0, 300 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    return NULL;
}

static void test_restart_cycles(void **state) {
    (void)state;
    engine e;
    engine_open(&e, 1 << 20, 0);
    engine_start(&e, "CYCLES", "cycles.ev", KVREG_WIRE_DYNAMO_MSGPACK, 6, KVREG_NATS_PUB_OPT_MAX_EVENTS,
                 (uint64_t)16, KVREG_NATS_PUB_OPT_ACK_TIMEOUT_MS, (uint64_t)300, KVREG_NATS_PUB_OPT_RETRY_MS,
                 (uint64_t)50, KVREG_NATS_PUB_OPT_LINGER_MS, (uint64_t)20000, 0);
    replica r1, r2;
    /* A message the server sent as it was killed is redelivered after the ack wait (1 s). */
    replica_open_ack(&r1, "CYCLES", "r1", 1000);
    replica_open_ack(&r2, "CYCLES", "r2", 1000);
    runner u1 = {&r1, 0}, u2 = {&r2, 0};
    assert_int_equal(pthread_create(&u1.thread, NULL, run_replica, &u1), 0);
    assert_int_equal(pthread_create(&u2.thread, NULL, run_replica, &u2), 0);
    workload w = {&e, 60000, 7, 0, 0};
    assert_int_equal(pthread_create(&w.thread, NULL, run_workload, &w), 0);
    for (int cycle = 0; cycle < 5; cycle++) {
        const uint64_t made = pub_stat(&e, KVREG_NATS_PUB_STAT_BATCHES);
        int64_t deadline = nats_now_ms() + 10000;
        while (pub_stat(&e, KVREG_NATS_PUB_STAT_BATCHES) < made + 50) { /* mid-stream */
            assert_true(nats_now_ms() < deadline);
            struct timespec ts = {0, 2 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        const uint64_t errors = pub_stat(&e, KVREG_NATS_PUB_STAT_ERRORS);
        nats_server_kill(&server, SIGKILL);
        deadline = nats_now_ms() + 10000;
        while (pub_stat(&e, KVREG_NATS_PUB_STAT_ERRORS) == errors) { /* acks in flight time out */
            assert_true(nats_now_ms() < deadline);
            struct timespec ts = {0, 5 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        nats_server_restart(&server);
    }
    pthread_join(w.thread, NULL);
    assert_int_equal(w.failures, 0);
    const uint64_t batches = engine_finish(&e);
    fprintf(stderr, "cycles: %llu batches, %llu failures, %llu resent, %llu duplicates, %llu resyncs\n",
            (unsigned long long)batches, (unsigned long long)pub_stat(&e, KVREG_NATS_PUB_STAT_ERRORS),
            (unsigned long long)pub_stat(&e, KVREG_NATS_PUB_STAT_RETRIES),
            (unsigned long long)pub_stat(&e, KVREG_NATS_PUB_STAT_DUPLICATES),
            (unsigned long long)pub_stat(&e, KVREG_NATS_PUB_STAT_RESYNCS));
    assert_int_equal(pub_stat(&e, KVREG_NATS_PUB_STAT_EVENTS_LOST), 0);
    assert_int_equal(stream_msgs("CYCLES"), batches);
    runner *us[2] = {&u1, &u2};
    const int64_t deadline = nats_now_ms() + 30000;
    for (int i = 0; i < 2; i++) {
        uint64_t applied = 0;
        while ((kvreg_nats_consumer_stat(us[i]->r->con, KVREG_NATS_CON_STAT_BATCHES, &applied), applied) < batches) {
            assert_true(nats_now_ms() < deadline);
            struct timespec ts = {0, 5 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        kvreg_nats_consumer_stop(us[i]->r->con);
        pthread_join(us[i]->thread, NULL);
        replica_catch_up(us[i]->r, batches);
        assert_int_equal(con_stat(us[i]->r, KVREG_NATS_CON_STAT_LOST), 0);
        assert_same_as_engine(us[i]->r, &e, 6, 40000, UNIVERSE);
    }
    replica_close(&r1);
    replica_close(&r2);
    engine_close(&e);
}

static int setup(void **state) {
    (void)state;
    nats_server_start(&server);
    return 0;
}
static int teardown(void **state) {
    (void)state;
    nats_server_destroy(&server);
    nats_Close();
    return 0;
}

/* A started publisher's getters read what is in effect (the subject's layout, the drawn
 * instance), and a publisher stopped before it published anything stops cleanly: it crashed
 * in stop (libnats' pending list, made only by a first publish, was read unchecked). */
/* run(0) is one round trip for what is ready: the pull request says no_wait, so the server
 * answers with what it has and ends the request at once instead of holding it open until it
 * expires (which made every run(0) last 15-20 ms, and a replica that polls wait for nothing). */
static void test_run_zero_does_not_wait(void **state) {
    (void)state;
    engine e;
    engine_open(&e, 1024, 0);
    engine_start(&e, "RUNZERO", "runzero.ev", KVREG_WIRE_DYNAMO_MSGPACK, 5, KVREG_NATS_PUB_OPT_MAX_EVENTS,
                 (uint64_t)1, 0u); /* a batch per event */
    kvreg_block b;
    for (uint64_t h = 1; h <= 3; h++) assert_int_equal(reg_hash(e.gpu, h, &b), KVREG_OK);
    const uint64_t batches = engine_finish(&e);
    assert_true(batches >= 1);
    replica r;
    replica_open(&r, "RUNZERO", "rz", 1, 0);
    assert_int_equal(kvreg_nats_consumer_run(r.con, 0), KVREG_OK); /* all of it, in one call */
    assert_int_equal(con_stat(&r, KVREG_NATS_CON_STAT_BATCHES), batches);
    /* Nothing pending: 40 calls, each a round trip on loopback (well under a millisecond; a
     * few under the sanitizers). A request held until it expires takes at least 15 ms each. */
    const int64_t t0 = nats_now_ms();
    for (int i = 0; i < 40; i++) assert_int_equal(kvreg_nats_consumer_run(r.con, 0), KVREG_OK);
    const int64_t took = nats_now_ms() - t0;
    assert_true(took < 400);
    assert_int_equal(con_stat(&r, KVREG_NATS_CON_STAT_BATCHES), batches);
    assert_int_equal(con_stat(&r, KVREG_NATS_CON_STAT_FETCH_ERRORS), 0);
    replica_close(&r);
    engine_close(&e);
}

/* A consumer freed while its last fetch's messages are still arriving: libnats 3.4 (Debian 12)
 * lets its reader thread deliver to a subscription being destroyed (a use after free of the
 * subscription's mutex: a crash or a hang; fixed upstream in nats.c 3.6), so the consumer
 * closes the connection (which stops that thread) before destroying its subscriptions. 500
 * rounds of start, a 1 ms run (a fetch of all ~2,000 batches, about 8 MB, cut short) and
 * free. Before the fix 200 rounds crashed the program in 5 runs of 10. */
static void test_free_while_delivering(void **state) {
    (void)state;
    engine e;
    engine_open(&e, 1 << 18, 0);
    engine_start(&e, "FREEDEL", "freedel.ev", KVREG_WIRE_DYNAMO_MSGPACK, 6, KVREG_NATS_PUB_OPT_MAX_EVENTS, (uint64_t)100, 0u);
    kvreg_block b;
    for (uint64_t h = 1; h <= 200000; h++) assert_int_equal(reg_hash(e.gpu, h, &b), KVREG_OK);
    assert_true(engine_finish(&e) >= 2000); /* about 8 MB: still arriving when run(1) returns */
    for (int round = 0; round < 500; round++) {
        replica r;
        replica_prepare(&r, "FREEDEL", "fd", 1);
        assert_int_equal(kvreg_nats_consumer_set(r.con, KVREG_NATS_CON_OPT_FETCH_BATCH, 4096), KVREG_OK);
        assert_int_equal(kvreg_nats_consumer_start(r.con), KVREG_OK);
        assert_int_equal(kvreg_nats_consumer_run(r.con, 1), KVREG_OK);
        replica_close(&r);
    }
    engine_close(&e);
}

/* A consumer freed from a libnats connection callback (here the application's own
 * connection's closed callback): libnats runs every connection callback of the process on
 * one thread, so a free that waited there for its own connection's closed callback waited
 * its whole bound (5 s), holding up every other callback meanwhile, and then leaked what the
 * callbacks share. The free now returns at once; the callbacks' reference goes with the last
 * one (the ASan pass checks nothing leaks). */
static pthread_mutex_t freed_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t freed_cv = PTHREAD_COND_INITIALIZER;
static kvreg_nats_consumer *to_free;
static int64_t free_took = -1;

static void free_on_closed(natsConnection *nc, void *user) {
    (void)nc;
    (void)user;
    const int64_t t = nats_now_ms();
    kvreg_nats_consumer_free(to_free);
    pthread_mutex_lock(&freed_mu);
    free_took = nats_now_ms() - t;
    pthread_cond_broadcast(&freed_cv);
    pthread_mutex_unlock(&freed_mu);
}

static void test_free_in_libnats_callback(void **state) {
    (void)state;
    jsCtx *js = NULL;
    natsConnection *nc = NULL;
    raw_stream(&js, &nc, "FREECB", "freecb.x");
    kvreg_index *idx = NULL;
    assert_int_equal(kvreg_index_new(&idx, NULL), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_new(&to_free, idx), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_set_string(to_free, KVREG_NATS_URL, server.url), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_set_string(to_free, KVREG_NATS_STREAM, "FREECB"), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_start(to_free), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_run(to_free, 20), KVREG_OK);
    natsOptions *o = NULL;
    natsConnection *app = NULL;
    assert_int_equal(natsOptions_Create(&o), NATS_OK);
    assert_int_equal(natsOptions_SetURL(o, server.url), NATS_OK);
    assert_int_equal(natsOptions_SetClosedCB(o, free_on_closed, NULL), NATS_OK);
    assert_int_equal(natsConnection_Connect(&app, o), NATS_OK);
    natsOptions_Destroy(o);
    natsConnection_Close(app); /* its closed callback frees the consumer */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 20;
    pthread_mutex_lock(&freed_mu);
    while (free_took < 0)
        if (pthread_cond_timedwait(&freed_cv, &freed_mu, &until) != 0) break;
    const int64_t took = free_took;
    pthread_mutex_unlock(&freed_mu);
    fprintf(stderr, "consumer freed on libnats' callback thread in %lld ms\n", (long long)took);
    assert_true(took >= 0 && took < 1000);
    natsConnection_Destroy(app);
    kvreg_index_free(idx);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
}

/* Messages already in the replica's inbox when the server stops (SIGSTOP) are still judged,
 * and each is acknowledged (here: terminated, as garbage) with a publish on the connection.
 * While libnats reconnects, its reconnect thread holds the connection's lock through each
 * attempt (the 2 s connect timeout against a server that accepts and never answers), and
 * such a publish waited for it: run(50) took 2 s. The acknowledgment is left out while the
 * connection is down (the server sends the message again after ACK_WAIT). A notice callback
 * that takes 20 ms keeps the 300 messages coming for a while (slow work, not a wait for an
 * event); the server is stopped after 20 of them. */
static int64_t slow_notices;
static void slow_notice_cb(const kvreg_nats_notice *n, void *user) {
    (void)n;
    (void)user;
    slow_notices++;
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

static void test_ack_while_reconnecting(void **state) {
    (void)state;
    jsCtx *js = NULL;
    natsConnection *nc = NULL;
    raw_stream(&js, &nc, "ACKREC", "ackrec.x");
    for (int i = 0; i < 300; i++) assert_int_equal(js_Publish(NULL, js, "ackrec.x", "junk", 4, NULL, NULL), NATS_OK);
    kvreg_index *idx = NULL;
    kvreg_nats_consumer *con = NULL;
    assert_int_equal(kvreg_index_new(&idx, NULL), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_new(&con, idx), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_set_string(con, KVREG_NATS_URL, server.url), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_set_string(con, KVREG_NATS_STREAM, "ACKREC"), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_set_string(con, KVREG_NATS_LIVENESS_BUCKET, "ACKRECL"), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_set(con, KVREG_NATS_CON_OPT_LIVENESS_CHECK_MS, 100), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_set_notice_cb(con, slow_notice_cb, NULL, NULL), KVREG_OK);
    slow_notices = 0;
    assert_int_equal(kvreg_nats_consumer_start(con), KVREG_OK);
    int64_t slowest = 0;
    int stopped = 0;
    for (const int64_t t0 = nats_now_ms(); nats_now_ms() - t0 < 4000;) {
        if (!stopped && slow_notices >= 20) {
            assert_int_equal(kill(server.pid, SIGSTOP), 0);
            stopped = 1;
        }
        const int64_t t = nats_now_ms();
        const int rc = kvreg_nats_consumer_run(con, 50);
        if (nats_now_ms() - t > slowest) slowest = nats_now_ms() - t;
        if (rc != KVREG_OK) break;
    }
    if (stopped) kill(server.pid, SIGCONT); /* before any assertion: later tests need the server */
    fprintf(stderr, "acks while reconnecting: slowest run(50) %lld ms, %lld notices\n", (long long)slowest,
            (long long)slow_notices);
    assert_true(stopped);
    assert_true(slowest < 1000);
    kvreg_nats_consumer_free(con);
    kvreg_index_free(idx);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
}

static void test_idle_stop_and_getters(void **state) {
    (void)state;
    engine e;
    char buf[128];
    size_t len = 0;
    uint64_t v = 0;
    engine_open(&e, 1024, 0);
    assert_int_equal(kvreg_nats_publisher_get_string(e.pub, KVREG_NATS_SUBJECT, buf, sizeof buf, &len),
                     KVREG_ENOENT);
    assert_int_equal(kvreg_nats_publisher_get(e.pub, KVREG_NATS_PUB_OPT_INSTANCE, &v), KVREG_OK);
    assert_int_equal(v, 0);
    engine_start(&e, "IDLE", "idle.ev", KVREG_WIRE_VLLM, 3, KVREG_NATS_PUB_OPT_DP_RANK, (uint64_t)1, 0u);
    assert_int_equal(kvreg_nats_publisher_get_string(e.pub, KVREG_NATS_SUBJECT, buf, sizeof buf, &len), KVREG_OK);
    assert_string_equal(buf, "idle.ev.default.backend.3.1"); /* <prefix>.<namespace>.<component>.<worker>.<rank> */
    assert_int_equal(len, strlen("idle.ev.default.backend.3.1"));
    assert_int_equal(kvreg_nats_publisher_get(e.pub, KVREG_NATS_PUB_OPT_INSTANCE, &v), KVREG_OK);
    assert_true(v > 0);
    assert_int_equal(kvreg_nats_publisher_set(e.pub, KVREG_NATS_PUB_OPT_WORKER_ID, 4), KVREG_ESTATE);
    assert_int_equal(kvreg_nats_publisher_get(e.pub, KVREG_NATS_PUB_OPT_WORKER_ID, &v), KVREG_OK);
    assert_int_equal(v, 3);
    assert_int_equal(engine_finish(&e), 0); /* stop with nothing ever published */
    engine_close(&e);
}

int main(int argc, char **argv) {
    if (!kvreg_nats_available()) {
        const char *ci = getenv("CI");
        fprintf(stderr, "%s: libkvreg was built without NATS (libnats-dev)\n",
                ci && !strcmp(ci, "true") ? "FAIL" : "SKIP");
        return ci && !strcmp(ci, "true") ? 1 : 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_api),
        cmocka_unit_test(test_idle_stop_and_getters),
        cmocka_unit_test(test_run_zero_does_not_wait),
        cmocka_unit_test(test_free_while_delivering),
        cmocka_unit_test(test_free_in_libnats_callback),
        cmocka_unit_test(test_ack_while_reconnecting),
        cmocka_unit_test(test_small_vllm),
        cmocka_unit_test(test_random_two_replicas),
        cmocka_unit_test(test_loss_resync),
        cmocka_unit_test(test_garbage),
        cmocka_unit_test(test_resume),
        cmocka_unit_test(test_filter),
        cmocka_unit_test(test_start_again),
        cmocka_unit_test(test_out_of_order_start),
        cmocka_unit_test(test_reorder_give_up),
        cmocka_unit_test(test_held_bytes_bound),
        cmocka_unit_test(test_held_at_ack_pending),
        cmocka_unit_test(test_restart_through_stream),
        cmocka_unit_test(test_restore_needs_stream),
        cmocka_unit_test(test_server_restart),
    };
    const struct CMUnitTest long_tests[] = {
        cmocka_unit_test(test_restart_cycles),
    };
    if (argc > 1 && !strcmp(argv[1], "--long"))
        return cmocka_run_group_tests_name("nats-long", long_tests, setup, teardown);
    return cmocka_run_group_tests_name("nats", tests, setup, teardown);
}
