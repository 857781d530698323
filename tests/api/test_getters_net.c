/* kvreg_publisher_get / _get_string and kvreg_subscriber_get / _get_string (issue 37): every
 * option's documented default (typed in from kvreg_net.h by hand), set then read back,
 * unknown options and NULL arguments, the string buffer rules; for the publisher also what
 * is in effect once it runs (the topic's instance suffix), read from another thread. */
#define _POSIX_C_SOURCE 200809L
#define KVREG_EXPERIMENTAL
#include <pthread.h>

#include "getters_check.h"

#include <kvreg_net.h>
#include <kvreg_wire.h>

GETTER_OPS(pub_ops, kvreg_publisher);

GETTER_OPS(sub_ops, kvreg_subscriber);

static const u64_case pub_u64[] = {
    {KVREG_PUB_OPT_HWM, 100000, 5},
    {KVREG_PUB_OPT_DP_RANK, 0, 3},
    {KVREG_PUB_OPT_BUFFER_STEPS, 10000, 77},
    {KVREG_PUB_OPT_LINGER_MS, 2000, 10},
    {KVREG_PUB_OPT_REPLAY_LINGER_MS, 0, 250},
    {KVREG_PUB_OPT_MAX_EVENTS, 1024, 16},
    {KVREG_PUB_OPT_FORMAT, KVREG_WIRE_VLLM, KVREG_WIRE_VLLM_LEGACY},
    {KVREG_PUB_OPT_REPLAY_POLL_MS, 5, 9},
    {KVREG_PUB_OPT_BLOCK_SIZE, 0, 16},
    {KVREG_PUB_OPT_BATCH_US, 1000, 0},
    {KVREG_PUB_OPT_TOPIC_INSTANCE, 0, 1},
    {KVREG_PUB_OPT_REPLAY_MAX, 8, 3},
    {KVREG_PUB_OPT_REPLAY_MAX_BYTES, 32u << 20, 64u << 10},
};
static const uint32_t pub_u64_unknown[] = {0, 12, 19, 22, UINT32_MAX};
static const str_case pub_str[] = {
    {KVREG_PUB_ENDPOINT, "tcp://*:5557", "tcp://127.0.0.1:*"},
    {KVREG_PUB_REPLAY_ENDPOINT, NULL, "tcp://127.0.0.1:*"},
    {KVREG_PUB_TOPIC, "", "kv@pod-1@model-a"},
    {KVREG_PUB_LORA_NAME, NULL, "sql-lora"},
};
static const uint32_t pub_str_unknown[] = {0, 5, UINT32_MAX};

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

static void test_publisher_options(void **state)
{
    kvreg_registry *reg = poll_registry();
    kvreg_publisher *pub = NULL;
    uint64_t v = 0;
    (void)state;
    assert_int_equal(kvreg_publisher_new(&pub, reg), KVREG_OK);
    check_u64(&pub_ops, pub, pub_u64, sizeof pub_u64 / sizeof pub_u64[0], pub_u64_unknown,
              sizeof pub_u64_unknown / sizeof pub_u64_unknown[0]);
    /* a value the setter refuses changes nothing */
    assert_int_equal(kvreg_publisher_set(pub, KVREG_PUB_OPT_DP_RANK, 65536), KVREG_EINVAL);
    assert_int_equal(kvreg_publisher_get(pub, KVREG_PUB_OPT_DP_RANK, &v), KVREG_OK);
    assert_int_equal(v, 3);
    check_strings(&pub_ops, pub, pub_str, sizeof pub_str / sizeof pub_str[0], pub_str_unknown,
                  sizeof pub_str_unknown / sizeof pub_str_unknown[0]);
    /* NULL sets the nullable ones back to "none", the topic back to "" */
    assert_int_equal(kvreg_publisher_set_string(pub, KVREG_PUB_REPLAY_ENDPOINT, NULL), KVREG_OK);
    assert_int_equal(kvreg_publisher_set_string(pub, KVREG_PUB_LORA_NAME, NULL), KVREG_OK);
    assert_int_equal(kvreg_publisher_set_string(pub, KVREG_PUB_TOPIC, NULL), KVREG_OK);
    check_string(&pub_ops, pub, KVREG_PUB_REPLAY_ENDPOINT, NULL);
    check_string(&pub_ops, pub, KVREG_PUB_LORA_NAME, NULL);
    check_string(&pub_ops, pub, KVREG_PUB_TOPIC, "");
    /* an empty endpoint is refused and the one before stays */
    assert_int_equal(kvreg_publisher_set_string(pub, KVREG_PUB_ENDPOINT, ""), KVREG_EINVAL);
    check_string(&pub_ops, pub, KVREG_PUB_ENDPOINT, "tcp://127.0.0.1:*");
    {
        char buf[4];
        size_t len = 0;
        assert_int_equal(kvreg_publisher_get_string(NULL, KVREG_PUB_TOPIC, buf, sizeof buf, &len), KVREG_EINVAL);
    }
    kvreg_publisher_free(pub);
    kvreg_registry_free(reg);
}

/* Reads every option many times from a second thread while the publisher runs. */
static void *read_while_running(void *arg)
{
    const kvreg_publisher *pub = arg;
    size_t round, i;
    for (round = 0; round < 200; round++) {
        for (i = 0; i < sizeof pub_u64 / sizeof pub_u64[0]; i++) {
            uint64_t v = 0;
            if (kvreg_publisher_get(pub, pub_u64[i].option, &v) != KVREG_OK) return (void *)1;
        }
        {
            char buf[128];
            size_t len = 0;
            if (kvreg_publisher_get_string(pub, KVREG_PUB_TOPIC, buf, sizeof buf, &len) != KVREG_OK)
                return (void *)1;
        }
    }
    return NULL;
}

static void test_publisher_running(void **state)
{
    static const char hex[] = "0123456789abcdef";
    kvreg_registry *reg = poll_registry();
    kvreg_publisher *pub = NULL;
    uint64_t v = 0;
    char buf[128];
    size_t len = 0, i;
    pthread_t t;
    void *res = (void *)1;
    (void)state;
    assert_int_equal(kvreg_publisher_new(&pub, reg), KVREG_OK);
    assert_int_equal(kvreg_publisher_set_string(pub, KVREG_PUB_ENDPOINT, "tcp://127.0.0.1:*"), KVREG_OK);
    assert_int_equal(kvreg_publisher_set_string(pub, KVREG_PUB_TOPIC, "t"), KVREG_OK);
    assert_int_equal(kvreg_publisher_set(pub, KVREG_PUB_OPT_TOPIC_INSTANCE, 1), KVREG_OK);
    assert_int_equal(kvreg_publisher_set(pub, KVREG_PUB_OPT_LINGER_MS, 0), KVREG_OK);
    check_string(&pub_ops, pub, KVREG_PUB_TOPIC, "t"); /* no suffix before start */
    assert_int_equal(kvreg_publisher_start(pub), KVREG_OK);

    /* the topic in effect: "t|kvreg-instance=" and 16 lowercase hex digits */
    assert_int_equal(kvreg_publisher_get_string(pub, KVREG_PUB_TOPIC, buf, sizeof buf, &len), KVREG_OK);
    assert_int_equal(len, 2 + 15 + 16);
    assert_memory_equal(buf, "t|kvreg-instance=", 17);
    for (i = 17; i < len; i++) assert_non_null(memchr(hex, buf[i], 16));
    /* the options as set, and no more settable */
    assert_int_equal(kvreg_publisher_get(pub, KVREG_PUB_OPT_LINGER_MS, &v), KVREG_OK);
    assert_int_equal(v, 0);
    assert_int_equal(kvreg_publisher_get(pub, KVREG_PUB_OPT_HWM, &v), KVREG_OK);
    assert_int_equal(v, 100000);
    assert_int_equal(kvreg_publisher_set(pub, KVREG_PUB_OPT_HWM, 5), KVREG_ESTATE);
    assert_int_equal(kvreg_publisher_get(pub, KVREG_PUB_OPT_HWM, &v), KVREG_OK);
    assert_int_equal(v, 100000);
    check_string(&pub_ops, pub, KVREG_PUB_ENDPOINT, "tcp://127.0.0.1:*"); /* as given */

    assert_int_equal(pthread_create(&t, NULL, read_while_running, pub), 0);
    assert_int_equal(pthread_join(t, &res), 0);
    assert_null(res);

    assert_int_equal(kvreg_publisher_stop(pub), KVREG_OK);
    assert_int_equal(kvreg_publisher_get(pub, KVREG_PUB_OPT_TOPIC_INSTANCE, &v), KVREG_OK);
    assert_int_equal(v, 1);
    kvreg_publisher_free(pub);
    kvreg_registry_free(reg);
}

static const u64_case sub_u64[] = {
    {KVREG_SUB_OPT_FORMAT, KVREG_WIRE_VLLM, KVREG_WIRE_SGLANG},
    {KVREG_SUB_OPT_FROM_SEQ, UINT64_MAX, 7},
    {KVREG_SUB_OPT_REPLAY_TIMEOUT_MS, 2000, 1},
    {KVREG_SUB_OPT_RCVHWM, 100000, 0},
    {KVREG_SUB_OPT_MAX_WAITING, 100000, 1},
    {KVREG_SUB_OPT_MAX_MSG_SIZE, 16u << 20, 4096},
    {KVREG_SUB_OPT_MAX_PUBLISHERS, 10000, 2},
    {KVREG_SUB_OPT_IDLE_MS, 600000, 0},
    {KVREG_SUB_OPT_MAX_HELD_BYTES, 256u << 20, 1000},
    {KVREG_SUB_OPT_RCV_BYTES, 64u << 20, 0},
    {KVREG_SUB_OPT_MALFORMED_PAUSE_MS, 10, 0},
    {KVREG_SUB_OPT_MAX_HELD_BYTES_PUBLISHER, 0, 1000},
};
static const uint32_t sub_u64_unknown[] = {0, 13, UINT32_MAX};
static const str_case sub_str[] = {{KVREG_SUB_TOPIC, "", "kv@pod-1@model-a"}};
static const uint32_t sub_str_unknown[] = {0, 2, UINT32_MAX};

static void test_subscriber_options(void **state)
{
    kvreg_subscriber *sub = NULL;
    uint64_t v = 0;
    (void)state;
    assert_int_equal(kvreg_subscriber_new(&sub), KVREG_OK);
    check_u64(&sub_ops, sub, sub_u64, sizeof sub_u64 / sizeof sub_u64[0], sub_u64_unknown,
              sizeof sub_u64_unknown / sizeof sub_u64_unknown[0]);
    /* MAX_MSG_SIZE 0 ("no limit") reads back as 0 */
    assert_int_equal(kvreg_subscriber_set(sub, KVREG_SUB_OPT_MAX_MSG_SIZE, 0), KVREG_OK);
    assert_int_equal(kvreg_subscriber_get(sub, KVREG_SUB_OPT_MAX_MSG_SIZE, &v), KVREG_OK);
    assert_int_equal(v, 0);
    /* a format the decoder refuses changes nothing */
    assert_int_not_equal(kvreg_subscriber_set(sub, KVREG_SUB_OPT_FORMAT, 99), KVREG_OK);
    assert_int_equal(kvreg_subscriber_get(sub, KVREG_SUB_OPT_FORMAT, &v), KVREG_OK);
    assert_int_equal(v, KVREG_WIRE_SGLANG);
    /* MALFORMED_PAUSE_MS: up to 60 s; one past it changes nothing */
    assert_int_equal(kvreg_subscriber_set(sub, KVREG_SUB_OPT_MALFORMED_PAUSE_MS, 60000), KVREG_OK);
    assert_int_equal(kvreg_subscriber_set(sub, KVREG_SUB_OPT_MALFORMED_PAUSE_MS, 60001), KVREG_EINVAL);
    assert_int_equal(kvreg_subscriber_get(sub, KVREG_SUB_OPT_MALFORMED_PAUSE_MS, &v), KVREG_OK);
    assert_int_equal(v, 60000);
    check_strings(&sub_ops, sub, sub_str, 1, sub_str_unknown, sizeof sub_str_unknown / sizeof sub_str_unknown[0]);
    assert_int_equal(kvreg_subscriber_set_string(sub, KVREG_SUB_TOPIC, NULL), KVREG_OK);
    check_string(&sub_ops, sub, KVREG_SUB_TOPIC, "");
    /* once an endpoint is added the options are fixed, and still read */
    assert_int_equal(kvreg_subscriber_set_string(sub, KVREG_SUB_TOPIC, "kv@"), KVREG_OK);
    assert_int_equal(kvreg_subscriber_add(sub, "tcp://127.0.0.1:*", NULL, NULL), KVREG_OK);
    assert_int_equal(kvreg_subscriber_set(sub, KVREG_SUB_OPT_IDLE_MS, 5), KVREG_ESTATE);
    assert_int_equal(kvreg_subscriber_get(sub, KVREG_SUB_OPT_IDLE_MS, &v), KVREG_OK);
    assert_int_equal(v, 0);
    check_string(&sub_ops, sub, KVREG_SUB_TOPIC, "kv@");
    kvreg_subscriber_free(sub);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_publisher_options),
        cmocka_unit_test(test_publisher_running),
        cmocka_unit_test(test_subscriber_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
