/* Suite nats: the publisher against a server's max_payload and a stream's max_msg_size. The
 * server counts a message's headers (Nats-Msg-Id, Kvreg-Batch) against max_payload along with
 * its payload, so a batch whose payload alone fits but whose headers push it over must be
 * split like any other oversized batch. A stream's max_msg_size below max_payload splits
 * batches the same way. A batch that stopped fitting after it was made (the server came back
 * with a smaller max_payload, or the stream's limit was lowered) is never stored: it must not
 * hold back the batches after it, and the replicas must still end with every block (its seq
 * goes out again with no events, and the worker resyncs). Batch sizes are computed here with
 * the same encoder and the header sizes from the NATS wire format, never taken from the code
 * under test. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <nats/nats.h>

#include "nats_world.h"

#define MAX_PAYLOAD 16384
#define FORMAT KVREG_WIRE_DYNAMO_MSGPACK
#define INSTANCE UINT64_C(1000000000000000000) /* fixed, so the headers' size is known */
#define BLOCK_XOR UINT64_C(0x9e3779b97f4a7c15) /* as reg_hash */

/* What the server counts for a message's headers (the NATS wire format libnats sends):
 * "NATS/1.0\r\n", one "Key: Value\r\n" per header, and a closing "\r\n". */
static size_t header_bytes(uint64_t worker, uint64_t seq) {
    char id[96], batch[128];
    snprintf(id, sizeof id, "%llu-0-%llu-%llu", (unsigned long long)worker, (unsigned long long)INSTANCE,
             (unsigned long long)seq);
    snprintf(batch, sizeof batch, "1 %llu 0 %llu %llu %u", (unsigned long long)worker,
             (unsigned long long)INSTANCE, (unsigned long long)seq, (unsigned)FORMAT);
    return strlen("NATS/1.0\r\n") + strlen("Nats-Msg-Id: ") + strlen(id) + 2 + strlen("Kvreg-Batch: ") +
           strlen(batch) + 2 + 2;
}

/* The payload of one batch of the first n events a fresh registry emits for reg_hash(base),
 * reg_hash(base + 1), ... in a GPU pool (event ids 0, 1, ...): what the publisher encodes. */
static size_t payload_bytes(uint64_t worker, uint64_t base, size_t n) {
    kvreg_wire_encoder *enc = NULL;
    assert_int_equal(kvreg_wire_encoder_new(&enc, FORMAT), KVREG_OK);
    assert_int_equal(kvreg_wire_encoder_set(enc, KVREG_WIRE_OPT_WORKER_ID, worker), KVREG_OK);
    assert_int_equal(kvreg_wire_encoder_set(enc, KVREG_WIRE_OPT_MAX_EVENTS, n), KVREG_OK);
    kvreg_event *ev = calloc(n, sizeof *ev);
    assert_non_null(ev);
    for (size_t i = 0; i < n; i++) {
        ev[i].kind = KVREG_EVENT_REGISTER;
        ev[i].event_id = i;
        ev[i].sequence_hash = base + i;
        ev[i].block_hash = (base + i) ^ BLOCK_XOR;
        ev[i].medium = KVREG_MEDIUM_GPU;
    }
    size_t used = 0, len = 0;
    const uint8_t *p = NULL;
    assert_int_equal(kvreg_wire_encode(enc, ev, n, -1.0, &used, &p, &len), KVREG_OK);
    assert_int_equal(used, n);
    free(ev);
    kvreg_wire_encoder_free(enc);
    return len;
}

/* Said before a deadline fails: where the publisher stands. */
static void say_not_applied(const engine *e) {
    fprintf(stderr, "not all applied: batches %llu acked %llu errors %llu retries %llu\n",
            (unsigned long long)pub_stat(e, KVREG_NATS_PUB_STAT_BATCHES),
            (unsigned long long)pub_stat(e, KVREG_NATS_PUB_STAT_ACKED),
            (unsigned long long)pub_stat(e, KVREG_NATS_PUB_STAT_ERRORS),
            (unsigned long long)pub_stat(e, KVREG_NATS_PUB_STAT_RETRIES));
}

static int count_kind(const replica *r, uint32_t kind) {
    int n = 0;
    for (int i = 0; i < r->n_notices && i < MAX_NOTICES; i++) n += r->kinds[i] == kind;
    return n;
}

static void wait_stat(const engine *e, uint32_t stat, uint64_t at_least, int64_t bound_ms) {
    const int64_t deadline = nats_now_ms() + bound_ms;
    while (pub_stat(e, stat) < at_least) {
        assert_true(nats_now_ms() < deadline);
        struct timespec ts = {0, 5 * 1000 * 1000}; /* between checks, not as synchronisation */
        nanosleep(&ts, NULL);
    }
}

/* ------------------------------------------------------------------------ headers counted */
#define WORKER 10
#define N_FIRST 121                 /* events in the first batch: about 16 KB of payload */
#define BASE UINT64_C(1000)         /* their hashes: BASE + i */
#define FOLLOW_UP UINT64_C(1000000) /* then FOLLOW_UPS events: FOLLOW_UP + i */
#define FOLLOW_UPS 10

/* The server's max_payload for each case, as payload + headers of the first batch + d: room
 * to spare, an exact fit, over by 1, 2 and half the headers (payload fits, headers do not), the
 * payload exactly max_payload, and the payload alone over it. */
static const long kSlack[] = {1, 0, -1, -2, -49, -98 /* = -headers */, -99};
#define N_CASES (sizeof kSlack / sizeof kSlack[0])

/* One server per case, with max_payload across the first batch's size. The first batch is
 * N_FIRST events (MAX_EVENTS N_FIRST, all queued before start), then FOLLOW_UPS more come.
 * What fits max_payload with its headers goes as one batch; what does not is split. A replica
 * must get every event with no LOSS, bounded in time, and no publish may fail. */
static void test_headers_counted(void **state) {
    (void)state;
    const nats_server main_server = server;
    const size_t len = payload_bytes(WORKER, BASE, N_FIRST), hdr = header_bytes(WORKER, 0);
    assert_int_equal(hdr, 98); /* the cases are written for these sizes */
    for (size_t k = 0; k < N_CASES; k++) {
        const long max_payload = (long)(len + hdr) + kSlack[k];
        const int fits = kSlack[k] >= 0;
        fprintf(stderr, "max_payload %ld: first batch %zu payload + %zu headers = %zu\n", max_payload, len, hdr,
                len + hdr);
        nats_server_start_max_payload(&server, (int)max_payload);
        engine e;
        kvreg_block blk;
        engine_open(&e, 1 << 16, 0);
        for (uint64_t i = 0; i < N_FIRST; i++) assert_int_equal(reg_hash(e.gpu, BASE + i, &blk), KVREG_OK);
        engine_start(&e, "MP", "mp.ev", FORMAT, WORKER, KVREG_NATS_PUB_OPT_MAX_EVENTS, (uint64_t)N_FIRST,
                     KVREG_NATS_PUB_OPT_INSTANCE, INSTANCE, KVREG_NATS_PUB_OPT_BATCH_US, (uint64_t)0,
                     KVREG_NATS_PUB_OPT_RETRY_MS, (uint64_t)50, KVREG_NATS_PUB_OPT_LINGER_MS, (uint64_t)2000, 0);
        /* The first events are in batches now (made, maybe not yet acknowledged). */
        wait_stat(&e, KVREG_NATS_PUB_STAT_EVENTS_SENT, N_FIRST, 10000);
        const uint64_t first_batches = pub_stat(&e, KVREG_NATS_PUB_STAT_BATCHES);
        for (uint64_t i = 0; i < FOLLOW_UPS; i++) assert_int_equal(reg_hash(e.gpu, FOLLOW_UP + i, &blk), KVREG_OK);

        replica r;
        replica_prepare(&r, "MP", "mp-r", 1);
        assert_int_equal(kvreg_nats_consumer_set(r.con, KVREG_NATS_CON_OPT_REORDER_MS, 500), KVREG_OK);
        assert_int_equal(kvreg_nats_consumer_start(r.con), KVREG_OK);
        const int64_t deadline = nats_now_ms() + 5000;
        for (;;) {
            int all = 1;
            for (uint64_t i = 0; i < N_FIRST && all; i++) all = index_holds(r.idx, BASE + i, WORKER);
            for (uint64_t i = 0; i < FOLLOW_UPS && all; i++) all = index_holds(r.idx, FOLLOW_UP + i, WORKER);
            if (all) break;
            if (nats_now_ms() >= deadline) say_not_applied(&e);
            assert_true(nats_now_ms() < deadline);
            assert_int_equal(kvreg_nats_consumer_run(r.con, 50), KVREG_OK);
        }
        assert_int_equal(count_kind(&r, KVREG_NATS_NOTICE_LOSS), 0);
        /* One first batch exactly when it fits with its headers: the split counts the headers,
         * and no more than them. */
        if (fits)
            assert_int_equal(first_batches, 1);
        else
            assert_true(first_batches >= 2);
        assert_int_equal(con_stat(&r, KVREG_NATS_CON_STAT_LOST), 0);
        assert_int_equal(con_stat(&r, KVREG_NATS_CON_STAT_MALFORMED), 0);
        engine_finish(&e); /* all acknowledged, nothing left */
        assert_int_equal(pub_stat(&e, KVREG_NATS_PUB_STAT_ERRORS), 0); /* nothing refused */
        assert_int_equal(pub_stat(&e, KVREG_NATS_PUB_STAT_EVENTS_SKIPPED), 0);
        assert_int_equal(pub_stat(&e, KVREG_NATS_PUB_STAT_EVENTS_SENT), N_FIRST + FOLLOW_UPS);
        replica_close(&r);
        engine_close(&e);
        nats_server_destroy(&server);
    }
    server = main_server;
}

/* ------------------------------------------------------------------------ a refused batch */
#define BIG_MAX_PAYLOAD 65536
#define N_BIG 200            /* about 27 KB of payload: over 16 KiB, under 64 KiB */
#define RETRY_MS 5000        /* the first resend: the server is back well before it */

/* A stream on the server, made here (file storage, limits). */
static void add_stream(const char *name, const char *subjects) { put_stream(name, subjects, -1, 0); }

/* Run r until it holds every block [base, base + n) of WORKER and [FOLLOW_UP, + FOLLOW_UPS),
 * within bound_ms. */
static void wait_all_held(replica *r, const engine *e, uint64_t base, uint64_t n, int64_t bound_ms) {
    const int64_t deadline = nats_now_ms() + bound_ms;
    for (;;) {
        int all = 1;
        for (uint64_t i = 0; i < n && all; i++) all = index_holds(r->idx, base + i, WORKER);
        for (uint64_t i = 0; i < FOLLOW_UPS && all; i++) all = index_holds(r->idx, FOLLOW_UP + i, WORKER);
        if (all) return;
        if (nats_now_ms() >= deadline) say_not_applied(e);
        assert_true(nats_now_ms() < deadline);
        assert_int_equal(kvreg_nats_consumer_run(r->con, 50), KVREG_OK);
    }
}

/* A failed batch that the connection refuses at every resend (it no longer fits the server's
 * max_payload: the server came back with a smaller one) must not hold back the failed batches
 * after it, and its events must not be lost. Batch 0 (N_BIG events) and the batches after it
 * fail first (no stream stores their subject yet); the server comes back with a 16 KiB
 * max_payload and a stream for them; at the resend libnats refuses batch 0 for its size. The
 * later ones must still be stored, seq 0 must go out with no events (no replica waits for it:
 * no LOSS), and the worker must resync: the replica ends with every block, within a bound.
 * (Until 0.6's last change the batch was resent until stop: the replica gave seq 0 up with a
 * LOSS notice and never had its blocks.) */
static void test_refused_batch(void **state) {
    (void)state;
    const nats_server main_server = server;
    nats_server_start_max_payload(&server, BIG_MAX_PAYLOAD);
    /* The publisher (CREATE_STREAM 0) finds stream SB at start, but SB does not take its
     * subject: every batch fails (no responders) and waits RETRY_MS for its resend. */
    add_stream("SB", "sb.none.>");
    const size_t big = payload_bytes(WORKER, BASE, N_BIG) + header_bytes(WORKER, 0);
    assert_true(big > MAX_PAYLOAD && big <= BIG_MAX_PAYLOAD);
    engine e;
    kvreg_block blk;
    engine_open(&e, 1 << 16, 0);
    for (uint64_t i = 0; i < N_BIG; i++) assert_int_equal(reg_hash(e.gpu, BASE + i, &blk), KVREG_OK);
    engine_start(&e, "SB", "sb.ev", FORMAT, WORKER, KVREG_NATS_PUB_OPT_MAX_EVENTS, (uint64_t)N_BIG,
                 KVREG_NATS_PUB_OPT_CREATE_STREAM, (uint64_t)0, KVREG_NATS_PUB_OPT_INSTANCE, INSTANCE,
                 KVREG_NATS_PUB_OPT_BATCH_US, (uint64_t)0, KVREG_NATS_PUB_OPT_RETRY_MS, (uint64_t)RETRY_MS,
                 KVREG_NATS_PUB_OPT_LINGER_MS, (uint64_t)300, 0);
    wait_stat(&e, KVREG_NATS_PUB_STAT_ERRORS, 1, 10000);
    const int64_t t_fail = nats_now_ms(); /* batch 0's resend comes RETRY_MS after this, or later */
    assert_int_equal(pub_stat(&e, KVREG_NATS_PUB_STAT_BATCHES), 1);
    assert_int_equal(pub_stat(&e, KVREG_NATS_PUB_STAT_EVENTS_SENT), N_BIG);
    for (uint64_t i = 0; i < FOLLOW_UPS; i++) assert_int_equal(reg_hash(e.gpu, FOLLOW_UP + i, &blk), KVREG_OK);
    wait_stat(&e, KVREG_NATS_PUB_STAT_EVENTS_SENT, N_BIG + FOLLOW_UPS, 10000);
    wait_stat(&e, KVREG_NATS_PUB_STAT_ERRORS, pub_stat(&e, KVREG_NATS_PUB_STAT_BATCHES), 10000);

    /* Back with a 16 KiB max_payload, and a stream that takes the subject. */
    nats_server_kill(&server, SIGTERM);
    char conf[300];
    snprintf(conf, sizeof conf, "%s/server.conf", server.dir);
    FILE *f = fopen(conf, "w");
    assert_non_null(f);
    fprintf(f, "max_payload: %d\n", MAX_PAYLOAD);
    fclose(f);
    nats_server_restart(&server);
    add_stream("SB2", "sb.ev.>");
    /* The test's premise: nothing was resent while the server was away (a resend then would
     * sit in libnats' reconnect buffer and reach the new server whole). */
    assert_int_equal(pub_stat(&e, KVREG_NATS_PUB_STAT_RETRIES), 0);
    assert_true(nats_now_ms() - t_fail < RETRY_MS - 1500);

    replica r;
    replica_prepare(&r, "SB2", "sb-r", 1);
    assert_int_equal(kvreg_nats_consumer_set(r.con, KVREG_NATS_CON_OPT_REORDER_MS, 300), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_start(r.con), KVREG_OK);
    wait_all_held(&r, &e, BASE, N_BIG, t_fail + RETRY_MS + 5000 - nats_now_ms());
    assert_int_equal(count_kind(&r, KVREG_NATS_NOTICE_LOSS), 0);
    assert_int_equal(con_stat(&r, KVREG_NATS_CON_STAT_LOST), 0);
    assert_int_equal(pub_stat(&e, KVREG_NATS_PUB_STAT_BATCHES_REFUSED), 1);
    assert_int_equal(pub_stat(&e, KVREG_NATS_PUB_STAT_RESYNCS), 1);
    engine_finish(&e); /* every batch acknowledged, seq 0's empty one too */
    replica_close(&r);
    engine_close(&e);
    nats_server_destroy(&server);
    server = main_server;
}

/* ------------------------------------------------------------------------ the stream's limit */
#define STREAM_MAX 6000 /* a stream's max_msg_size: under max_payload (16 KiB), over the headers */

/* A stream whose max_msg_size is below the server's max_payload: the publisher must split
 * batches to fit it from the start (the stream refuses anything bigger, headers counted). The
 * first batch's N_FIRST events (about 16 KB of payload) go out in several; a replica gets
 * every event with no LOSS, and nothing is refused. (Until 0.6's last change only max_payload
 * split batches: the stream refused the first batch at every resend, for ever.) */
static void test_stream_max_msg_size(void **state) {
    (void)state;
    put_stream("SM", "sm.ev.>", STREAM_MAX, 0);
    engine e;
    kvreg_block blk;
    engine_open(&e, 1 << 16, 0);
    for (uint64_t i = 0; i < N_FIRST; i++) assert_int_equal(reg_hash(e.gpu, BASE + i, &blk), KVREG_OK);
    engine_start(&e, "SM", "sm.ev", FORMAT, WORKER, KVREG_NATS_PUB_OPT_MAX_EVENTS, (uint64_t)N_FIRST,
                 KVREG_NATS_PUB_OPT_CREATE_STREAM, (uint64_t)0, KVREG_NATS_PUB_OPT_INSTANCE, INSTANCE,
                 KVREG_NATS_PUB_OPT_BATCH_US, (uint64_t)0, KVREG_NATS_PUB_OPT_RETRY_MS, (uint64_t)50,
                 KVREG_NATS_PUB_OPT_LINGER_MS, (uint64_t)2000, 0);
    wait_stat(&e, KVREG_NATS_PUB_STAT_EVENTS_SENT, N_FIRST, 10000);
    const uint64_t first_batches = pub_stat(&e, KVREG_NATS_PUB_STAT_BATCHES);
    for (uint64_t i = 0; i < FOLLOW_UPS; i++) assert_int_equal(reg_hash(e.gpu, FOLLOW_UP + i, &blk), KVREG_OK);
    replica r;
    replica_prepare(&r, "SM", "sm-r", 1);
    assert_int_equal(kvreg_nats_consumer_set(r.con, KVREG_NATS_CON_OPT_REORDER_MS, 500), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_start(r.con), KVREG_OK);
    wait_all_held(&r, &e, BASE, N_FIRST, 5000);
    assert_int_equal(count_kind(&r, KVREG_NATS_NOTICE_LOSS), 0);
    assert_true(first_batches * STREAM_MAX >= payload_bytes(WORKER, BASE, N_FIRST));
    engine_finish(&e);
    assert_int_equal(pub_stat(&e, KVREG_NATS_PUB_STAT_ERRORS), 0); /* nothing refused */
    assert_int_equal(pub_stat(&e, KVREG_NATS_PUB_STAT_RESYNCS), 0);
    assert_int_equal(pub_stat(&e, KVREG_NATS_PUB_STAT_EVENTS_SENT), N_FIRST + FOLLOW_UPS);
    replica_close(&r);
    engine_close(&e);
}

/* The stream's limit lowered while a publisher runs: the batch made before the publisher
 * knew is refused by the stream (its error says why); it goes out again with no events under
 * its seq, the publisher learns the new limit, and the worker resyncs in batches that fit it.
 * A replica ends with every block, with no LOSS notice and nothing left unacknowledged. (Until
 * 0.6's last change the batch was resent until stop, and a replica gave it up with a LOSS
 * notice: its blocks were never in the index.) */
static void test_stream_limit_lowered(void **state) {
    (void)state;
    put_stream("SL", "sl.ev.>", -1, 0);
    engine e;
    kvreg_block blk;
    engine_open(&e, 1 << 16, 0);
    engine_start(&e, "SL", "sl.ev", FORMAT, WORKER, KVREG_NATS_PUB_OPT_MAX_EVENTS, (uint64_t)N_FIRST,
                 KVREG_NATS_PUB_OPT_CREATE_STREAM, (uint64_t)0, KVREG_NATS_PUB_OPT_INSTANCE, INSTANCE,
                 KVREG_NATS_PUB_OPT_BATCH_US, (uint64_t)0, KVREG_NATS_PUB_OPT_RETRY_MS, (uint64_t)50,
                 KVREG_NATS_PUB_OPT_LINGER_MS, (uint64_t)2000, 0);
    for (uint64_t i = 0; i < FOLLOW_UPS; i++) assert_int_equal(reg_hash(e.gpu, FOLLOW_UP + i, &blk), KVREG_OK);
    wait_stat(&e, KVREG_NATS_PUB_STAT_ACKED, 1, 10000);
    put_stream("SL", "sl.ev.>", STREAM_MAX, 1);
    /* N_FIRST events at once: one batch of about 16 KB, made against the old (no) limit. */
    kvreg_block_desc d[N_FIRST];
    kvreg_block h[N_FIRST];
    memset(d, 0, sizeof d);
    for (uint64_t i = 0; i < N_FIRST; i++) {
        d[i].sequence_hash = BASE + i;
        d[i].block_hash = (BASE + i) ^ BLOCK_XOR;
    }
    assert_int_equal(kvreg_register_batch(e.gpu, d, N_FIRST, h, NULL, NULL), KVREG_OK);
    wait_stat(&e, KVREG_NATS_PUB_STAT_ERRORS, 1, 10000);
    replica r;
    replica_prepare(&r, "SL", "sl-r", 1);
    assert_int_equal(kvreg_nats_consumer_set(r.con, KVREG_NATS_CON_OPT_REORDER_MS, 500), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_start(r.con), KVREG_OK);
    wait_all_held(&r, &e, BASE, N_FIRST, 8000);
    assert_int_equal(count_kind(&r, KVREG_NATS_NOTICE_LOSS), 0);
    /* The N_FIRST events may have been polled in one batch or two (each over the limit). */
    const uint64_t refused = pub_stat(&e, KVREG_NATS_PUB_STAT_BATCHES_REFUSED);
    assert_true(refused >= 1 && refused <= 2);
    assert_true(pub_stat(&e, KVREG_NATS_PUB_STAT_RESYNCS) >= 1 && pub_stat(&e, KVREG_NATS_PUB_STAT_RESYNCS) <= refused);
    engine_finish(&e);
    replica_close(&r);
    engine_close(&e);
}

int main(int argc, char **argv) {
    if (!kvreg_nats_available()) {
        const char *ci = getenv("CI");
        fprintf(stderr, "%s: libkvreg was built without NATS (libnats-dev)\n",
                ci && !strcmp(ci, "true") ? "FAIL" : "SKIP");
        return ci && !strcmp(ci, "true") ? 1 : 77;
    }
    if (argc > 1) cmocka_set_test_filter(argv[1]);
    nats_server_start_max_payload(&server, MAX_PAYLOAD);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_headers_counted),
        cmocka_unit_test(test_refused_batch),
        cmocka_unit_test(test_stream_max_msg_size),
        cmocka_unit_test(test_stream_limit_lowered),
    };
    const int rc = cmocka_run_group_tests_name("nats-max-payload", tests, NULL, NULL);
    nats_server_destroy(&server);
    nats_Close();
    return rc;
}
