/* kvreg_nats_publisher_get / _get_string and kvreg_nats_consumer_get / _get_string (issue
 * 37): every option's documented default (typed in from kvreg_nats.h by hand), set then read
 * back, unknown options and NULL arguments, the string buffer rules. _new connects nothing,
 * so no server is needed. In a library built without NATS: every getter is the stub's
 * KVREG_ENOTSUP. */
#define KVREG_EXPERIMENTAL
#include "getters_check.h"

#include <kvreg_index.h>
#include <kvreg_nats.h>
#include <kvreg_wire.h>

GETTER_OPS(pub_ops, kvreg_nats_publisher);

GETTER_OPS(con_ops, kvreg_nats_consumer);

static const u64_case pub_u64[] = {
    {KVREG_NATS_PUB_OPT_FORMAT, KVREG_WIRE_VLLM, KVREG_WIRE_DYNAMO_MSGPACK},
    {KVREG_NATS_PUB_OPT_WORKER_ID, 0, 42},
    {KVREG_NATS_PUB_OPT_DP_RANK, 0, 2147483647},
    {KVREG_NATS_PUB_OPT_MAX_IN_FLIGHT, 256, 1},
    {KVREG_NATS_PUB_OPT_ACK_TIMEOUT_MS, 5000, 10},
    {KVREG_NATS_PUB_OPT_RETRY_MS, 100, 60000},
    {KVREG_NATS_PUB_OPT_MAX_EVENTS, 1024, 1},
    {KVREG_NATS_PUB_OPT_BLOCK_SIZE, 0, 16},
    {KVREG_NATS_PUB_OPT_BATCH_US, 1000, 0},
    {KVREG_NATS_PUB_OPT_LINGER_MS, 5000, 0},
    {KVREG_NATS_PUB_OPT_INSTANCE, 0, 12345}, /* 0: drawn at start */
    {KVREG_NATS_PUB_OPT_CREATE_STREAM, 1, 0},
    {KVREG_NATS_PUB_OPT_MAX_AGE_S, 3600, 60},
    {KVREG_NATS_PUB_OPT_DUPLICATE_WINDOW_MS, 120000, 1000},
    {KVREG_NATS_PUB_OPT_CONNECT_TIMEOUT_MS, 2000, 100},
    {KVREG_NATS_PUB_OPT_HEARTBEAT_MS, 1000, 10},
    {KVREG_NATS_PUB_OPT_LIVENESS_TTL_MS, 5000, 100},
};
static const uint32_t pub_u64_unknown[] = {0, 18, UINT32_MAX};
static const str_case pub_str[] = {
    {KVREG_NATS_URL, "nats://127.0.0.1:4222", "nats://127.0.0.1:1,nats://127.0.0.1:2"},
    {KVREG_NATS_STREAM, "KVREG_EVENTS", "S2"},
    {KVREG_NATS_SUBJECT_PREFIX, "kvreg.events", "p.q"},
    {KVREG_NATS_NAMESPACE, "default", "ns"},
    {KVREG_NATS_COMPONENT, "backend", "engine"},
    {KVREG_NATS_SUBJECT, NULL, "p.q.whole"},
    {KVREG_NATS_LORA_NAME, NULL, "sql-lora"},
    {KVREG_NATS_LIVENESS_BUCKET, NULL, "live"},
};
/* 8 .. 11 are the consumer's */
static const uint32_t pub_str_unknown[] = {0, 8, 9, 10, 11, 13, UINT32_MAX};

static const u64_case con_u64[] = {
    {KVREG_NATS_CON_OPT_FETCH_BATCH, 256, 65536},
    {KVREG_NATS_CON_OPT_ACK_WAIT_MS, 5000, 100},
    {KVREG_NATS_CON_OPT_MAX_ACK_PENDING, 65536, 1},
    {KVREG_NATS_CON_OPT_REORDER_WINDOW, 4096, 1},
    {KVREG_NATS_CON_OPT_REORDER_MS, 30000, 0},
    {KVREG_NATS_CON_OPT_MAX_MSG_BYTES, 67108864, 1},
    {KVREG_NATS_CON_OPT_RESUME, 0, 1},
    {KVREG_NATS_CON_OPT_CONNECT_TIMEOUT_MS, 2000, 1},
    {KVREG_NATS_CON_OPT_SNAPSHOT_EVENTS, 0, 1000},
    {KVREG_NATS_CON_OPT_SNAPSHOT_MS, 0, 500},
    {KVREG_NATS_CON_OPT_SNAPSHOT_KEEP, 2, 16},
    {KVREG_NATS_CON_OPT_SNAPSHOT_PURGE, 0, 1},
    {KVREG_NATS_CON_OPT_SNAPSHOT_CHUNK_BYTES, 131072, 256},
    {KVREG_NATS_CON_OPT_RESTORE, 1, 0},
    {KVREG_NATS_CON_OPT_LIVENESS_CHECK_MS, 1000, 10},
    {KVREG_NATS_CON_OPT_SNAPSHOT_ORPHAN_MS, 60000, 0},
    {KVREG_NATS_CON_OPT_MAX_HELD_BYTES, 268435456, 1},
};
static const uint32_t con_u64_unknown[] = {0, 18, UINT32_MAX};
static const str_case con_str[] = {
    {KVREG_NATS_URL, "nats://127.0.0.1:4222", "nats://127.0.0.1:1"},
    {KVREG_NATS_DURABLE, "kvreg-router", "replica-2"},
    {KVREG_NATS_FILTER, NULL, "kvreg.events.default.>"},
    {KVREG_NATS_SNAPSHOT_BUCKET, NULL, "snaps"},
    {KVREG_NATS_SNAPSHOT_NAME, "KVREG_EVENTS", "snap"}, /* default: the stream's name */
    {KVREG_NATS_LIVENESS_BUCKET, NULL, "live"},
    {KVREG_NATS_STREAM, "KVREG_EVENTS", "S2"},
};
/* 3 .. 7 are the publisher's */
static const uint32_t con_str_unknown[] = {0, 3, 4, 5, 6, 7, 13, UINT32_MAX};

static kvreg_registry *poll_registry(void)
{
    kvreg_config *cfg = NULL;
    kvreg_registry *reg = NULL;
    assert_int_equal(kvreg_config_new(&cfg), KVREG_OK);
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_DELIVERY, KVREG_DELIVERY_POLL), KVREG_OK);
    assert_int_equal(kvreg_registry_new(&reg, cfg), KVREG_OK);
    kvreg_config_free(cfg);
    return reg;
}

/* Time options libnats takes in int64 nanoseconds: the largest value that converts is
 * accepted, one more is KVREG_EINVAL. They used to be bounded by UINT64_MAX / 10^6 (or 10^9),
 * and a value past INT64_MAX / 10^6 was accepted by set() and then overflowed into a negative
 * duration the server refused at start (or, for SNAPSHOT_ORPHAN_MS, that made a writer at
 * work look orphaned). */
#define MAX_MS (INT64_MAX / 1000000)
static void test_nats_time_option_bounds(void **state)
{
    kvreg_registry *reg = poll_registry();
    kvreg_nats_publisher *pub = NULL;
    kvreg_nats_consumer *con = NULL;
    kvreg_index *idx = NULL;
    (void)state;
    assert_int_equal(kvreg_nats_publisher_new(&pub, reg), KVREG_OK);
    const struct {
        uint32_t opt;
        uint64_t max;
    } pub_cases[] = {{KVREG_NATS_PUB_OPT_MAX_AGE_S, INT64_MAX / 1000000000},
                     {KVREG_NATS_PUB_OPT_DUPLICATE_WINDOW_MS, MAX_MS},
                     {KVREG_NATS_PUB_OPT_LIVENESS_TTL_MS, MAX_MS}};
    for (size_t i = 0; i < sizeof pub_cases / sizeof pub_cases[0]; i++) {
        uint64_t v = 0;
        assert_int_equal(kvreg_nats_publisher_set(pub, pub_cases[i].opt, pub_cases[i].max), KVREG_OK);
        assert_int_equal(kvreg_nats_publisher_set(pub, pub_cases[i].opt, pub_cases[i].max + 1), KVREG_EINVAL);
        assert_int_equal(kvreg_nats_publisher_get(pub, pub_cases[i].opt, &v), KVREG_OK);
        assert_int_equal(v, pub_cases[i].max);
    }
    /* A LoRA name goes out as a msgpack str: UTF-8 or KVREG_EINVAL (still nil after). */
    char name[16];
    size_t len = 0;
    assert_int_equal(kvreg_nats_publisher_set_string(pub, KVREG_NATS_LORA_NAME, "lora-\xff"), KVREG_EINVAL);
    assert_int_equal(kvreg_nats_publisher_get_string(pub, KVREG_NATS_LORA_NAME, name, sizeof name, &len), KVREG_ENOENT);
    kvreg_nats_publisher_free(pub);
    assert_int_equal(kvreg_index_new(&idx, NULL), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_new(&con, idx), KVREG_OK);
    const uint32_t con_opts[] = {KVREG_NATS_CON_OPT_ACK_WAIT_MS, KVREG_NATS_CON_OPT_SNAPSHOT_MS,
                                 KVREG_NATS_CON_OPT_SNAPSHOT_ORPHAN_MS};
    for (size_t i = 0; i < sizeof con_opts / sizeof con_opts[0]; i++) {
        uint64_t v = 0;
        assert_int_equal(kvreg_nats_consumer_set(con, con_opts[i], MAX_MS), KVREG_OK);
        assert_int_equal(kvreg_nats_consumer_set(con, con_opts[i], (uint64_t)MAX_MS + 1), KVREG_EINVAL);
        assert_int_equal(kvreg_nats_consumer_get(con, con_opts[i], &v), KVREG_OK);
        assert_int_equal(v, MAX_MS);
    }
    kvreg_nats_consumer_free(con);
    kvreg_index_free(idx);
    kvreg_registry_free(reg);
}

static void test_nats_publisher_options(void **state)
{
    kvreg_registry *reg = poll_registry();
    kvreg_nats_publisher *pub = NULL;
    uint64_t v = 0;
    (void)state;
    assert_int_equal(kvreg_nats_available(), 1);
    assert_int_equal(kvreg_nats_publisher_new(&pub, reg), KVREG_OK);
    check_u64(&pub_ops, pub, pub_u64, sizeof pub_u64 / sizeof pub_u64[0], pub_u64_unknown,
              sizeof pub_u64_unknown / sizeof pub_u64_unknown[0]);
    assert_int_equal(kvreg_nats_publisher_set(pub, KVREG_NATS_PUB_OPT_MAX_IN_FLIGHT, 65537), KVREG_EINVAL);
    assert_int_equal(kvreg_nats_publisher_get(pub, KVREG_NATS_PUB_OPT_MAX_IN_FLIGHT, &v), KVREG_OK);
    assert_int_equal(v, 1);
    check_strings(&pub_ops, pub, pub_str, sizeof pub_str / sizeof pub_str[0], pub_str_unknown,
                  sizeof pub_str_unknown / sizeof pub_str_unknown[0]);
    /* NULL: back to none; an empty value where one is needed is refused, the old one stays */
    assert_int_equal(kvreg_nats_publisher_set_string(pub, KVREG_NATS_SUBJECT, NULL), KVREG_OK);
    assert_int_equal(kvreg_nats_publisher_set_string(pub, KVREG_NATS_LORA_NAME, NULL), KVREG_OK);
    check_string(&pub_ops, pub, KVREG_NATS_SUBJECT, NULL);
    check_string(&pub_ops, pub, KVREG_NATS_LORA_NAME, NULL);
    assert_int_equal(kvreg_nats_publisher_set_string(pub, KVREG_NATS_STREAM, ""), KVREG_EINVAL);
    check_string(&pub_ops, pub, KVREG_NATS_STREAM, "S2");
    kvreg_nats_publisher_free(pub);
    kvreg_registry_free(reg);
}

static void test_nats_consumer_options(void **state)
{
    kvreg_index *idx = NULL;
    kvreg_nats_consumer *con = NULL;
    (void)state;
    assert_int_equal(kvreg_nats_available(), 1);
    assert_int_equal(kvreg_index_new(&idx, NULL), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_new(&con, idx), KVREG_OK);
    check_u64(&con_ops, con, con_u64, sizeof con_u64 / sizeof con_u64[0], con_u64_unknown,
              sizeof con_u64_unknown / sizeof con_u64_unknown[0]);
    check_strings(&con_ops, con, con_str, sizeof con_str / sizeof con_str[0], con_str_unknown,
                  sizeof con_str_unknown / sizeof con_str_unknown[0]);
    /* FILTER NULL or "": none again */
    assert_int_equal(kvreg_nats_consumer_set_string(con, KVREG_NATS_FILTER, ""), KVREG_OK);
    check_string(&con_ops, con, KVREG_NATS_FILTER, NULL);
    kvreg_nats_consumer_free(con);

    /* SNAPSHOT_NAME not set follows the stream's name */
    assert_int_equal(kvreg_nats_consumer_new(&con, idx), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_set_string(con, KVREG_NATS_STREAM, "OTHER"), KVREG_OK);
    check_string(&con_ops, con, KVREG_NATS_SNAPSHOT_NAME, "OTHER");
    kvreg_nats_consumer_free(con);
    kvreg_index_free(idx);
}

/* Without NATS: the stub's answer, whatever the arguments. */
static void test_nats_stub(void **state)
{
    uint64_t v = 0;
    char buf[8];
    size_t len = 0;
    (void)state;
    assert_int_equal(kvreg_nats_available(), 0);
    assert_int_equal(kvreg_nats_publisher_get(NULL, KVREG_NATS_PUB_OPT_FORMAT, &v), KVREG_ENOTSUP);
    assert_int_equal(kvreg_nats_publisher_get_string(NULL, KVREG_NATS_URL, buf, sizeof buf, &len), KVREG_ENOTSUP);
    assert_int_equal(kvreg_nats_consumer_get(NULL, KVREG_NATS_CON_OPT_FETCH_BATCH, &v), KVREG_ENOTSUP);
    assert_int_equal(kvreg_nats_consumer_get_string(NULL, KVREG_NATS_URL, buf, sizeof buf, &len), KVREG_ENOTSUP);
}

int main(void)
{
    const struct CMUnitTest with_nats[] = {
        cmocka_unit_test(test_nats_publisher_options),
        cmocka_unit_test(test_nats_consumer_options),
        cmocka_unit_test(test_nats_time_option_bounds),
    };
    const struct CMUnitTest without[] = {cmocka_unit_test(test_nats_stub)};
    if (kvreg_nats_available()) return cmocka_run_group_tests(with_nats, NULL, NULL);
    return cmocka_run_group_tests(without, NULL, NULL);
}
