/* Suite nats: router replicas past the plain consumer. Worker liveness (a key-value bucket with
 * a TTL), snapshots in the object store (chunked under a small max_payload; a corrupt newest one
 * falls back to the previous one, then to a full replay), replicas killed and restarted at
 * random points, and a consumer that is slow. Every index is checked against the engine's own
 * registry (what its pools hold), and replicas against each other by kvreg_index_digest.
 * The server runs with max_payload 16 KiB so snapshots and batches must be split. */
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
#include <time.h>

#include <cmocka.h>
#include <nats/nats.h>

#include "nats_world.h"

#define MAX_PAYLOAD 16384

static int long_run;

static int count_kind(const replica *r, uint32_t kind) {
    int n = 0;
    for (int i = 0; i < r->n_notices && i < MAX_NOTICES; i++) n += r->kinds[i] == kind;
    return n;
}

/* ----------------------------------------------------------------------------- liveness */
/* Two engines heartbeat every 100 ms into a bucket with a 1 s TTL. One stops: its worker leaves
 * the replica's index (an EXPIRED notice) after the TTL and within a bound; the other stays. */
static void test_liveness(void **state) {
    (void)state;
    engine a, b;
    engine_open(&a, 1 << 12, 0);
    engine_open(&b, 1 << 12, 0);
    assert_int_equal(kvreg_nats_publisher_set_string(a.pub, KVREG_NATS_LIVENESS_BUCKET, "LIVE"), KVREG_OK);
    assert_int_equal(kvreg_nats_publisher_set_string(b.pub, KVREG_NATS_LIVENESS_BUCKET, "LIVE"), KVREG_OK);
    engine_start(&a, "LIV", "liv.ev", KVREG_WIRE_DYNAMO_MSGPACK, 1, KVREG_NATS_PUB_OPT_HEARTBEAT_MS, (uint64_t)100,
                 KVREG_NATS_PUB_OPT_LIVENESS_TTL_MS, (uint64_t)1000, 0);
    engine_start(&b, "LIV", "liv.ev", KVREG_WIRE_DYNAMO_MSGPACK, 2, KVREG_NATS_PUB_OPT_HEARTBEAT_MS, (uint64_t)100,
                 KVREG_NATS_PUB_OPT_LIVENESS_TTL_MS, (uint64_t)1000, 0);
    kvreg_block blk;
    for (uint64_t h = 0; h < 10; h++) {
        assert_int_equal(reg_hash(a.gpu, 100 + h, &blk), KVREG_OK);
        assert_int_equal(reg_hash(b.gpu, 200 + h, &blk), KVREG_OK);
    }
    replica r;
    replica_prepare(&r, "LIV", "live-r", 1);
    assert_int_equal(kvreg_nats_consumer_set_string(r.con, KVREG_NATS_LIVENESS_BUCKET, "LIVE"), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_set(r.con, KVREG_NATS_CON_OPT_LIVENESS_CHECK_MS, 50), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_start(r.con), KVREG_OK);
    int64_t deadline = nats_now_ms() + 10000;
    while (!index_holds(r.idx, 109, 1) || !index_holds(r.idx, 209, 2)) {
        assert_true(nats_now_ms() < deadline);
        assert_int_equal(kvreg_nats_consumer_run(r.con, 50), KVREG_OK);
    }
    /* Both alive for longer than the TTL: nobody expires while heartbeating. */
    const int64_t alive_until = nats_now_ms() + 1500;
    while (nats_now_ms() < alive_until) assert_int_equal(kvreg_nats_consumer_run(r.con, 50), KVREG_OK);
    assert_int_equal(con_stat(&r, KVREG_NATS_CON_STAT_EXPIRED), 0);

    engine_finish(&a); /* a's heartbeats stop */
    const int64_t stopped = nats_now_ms();
    deadline = stopped + 5000;
    while (con_stat(&r, KVREG_NATS_CON_STAT_EXPIRED) == 0) {
        assert_true(nats_now_ms() < deadline);
        assert_int_equal(kvreg_nats_consumer_run(r.con, 50), KVREG_OK);
    }
    const int64_t took = nats_now_ms() - stopped;
    fprintf(stderr, "liveness: worker 1 removed %lld ms after its publisher stopped (TTL 1000 ms)\n",
            (long long)took);
    assert_true(took >= 900); /* not before its key could have expired */
    assert_int_equal(count_kind(&r, KVREG_NATS_NOTICE_EXPIRED), 1);
    for (uint64_t h = 0; h < 10; h++) {
        assert_false(index_holds(r.idx, 100 + h, 1));
        assert_true(index_holds(r.idx, 200 + h, 2));
    }
    /* b keeps heartbeating: it stays past another TTL. */
    const int64_t more = nats_now_ms() + 1200;
    while (nats_now_ms() < more) assert_int_equal(kvreg_nats_consumer_run(r.con, 50), KVREG_OK);
    assert_int_equal(con_stat(&r, KVREG_NATS_CON_STAT_EXPIRED), 1);
    assert_true(index_holds(r.idx, 205, 2));
    engine_finish(&b);
    replica_close(&r);
    engine_close(&a);
    engine_close(&b);
}

int main(int argc, char **argv) {
    if (!kvreg_nats_available()) {
        const char *ci = getenv("CI");
        fprintf(stderr, "%s: libkvreg was built without NATS (libnats-dev)\n",
                ci && !strcmp(ci, "true") ? "FAIL" : "SKIP");
        return ci && !strcmp(ci, "true") ? 1 : 77;
    }
    long_run = argc > 1 && !strcmp(argv[1], "--long");
    nats_server_start_max_payload(&server, MAX_PAYLOAD);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_liveness),
    };
    const int rc = cmocka_run_group_tests_name(long_run ? "nats-replica-long" : "nats-replica", tests, NULL, NULL);
    nats_server_destroy(&server);
    nats_Close();
    return rc;
}
