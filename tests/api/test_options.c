/* One configuration pattern (docs/config.md): every getter returns what was set or the
 * documented default, refuses unknown options and bad values the way its setter does; the
 * sized descriptor (kvreg_pool_block_desc) is checked by its size; every destroy function runs
 * exactly once, on replacement or when its object is freed. Expected values are the defaults
 * and ranges written in the headers, typed in here by hand. */
#define KVREG_EXPERIMENTAL
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <kvreg.h>
#include <kvreg_index.h>
#include <kvreg_nats.h>
#include <kvreg_net.h>
#include <kvreg_wire.h>

static void test_config_and_registry(void **state)
{
    kvreg_config *cfg = NULL;
    kvreg_registry *reg = NULL;
    uint64_t v = 99;
    (void)state;
    assert_int_equal(kvreg_config_new(&cfg), KVREG_OK);
    assert_int_equal(kvreg_config_get(cfg, KVREG_OPT_DELIVERY, &v), KVREG_OK);
    assert_int_equal(v, KVREG_DELIVERY_INLINE);
    assert_int_equal(kvreg_config_get(cfg, KVREG_OPT_POLL_CAPACITY, &v), KVREG_OK);
    assert_int_equal(v, 65536);
    assert_int_equal(kvreg_config_get(cfg, KVREG_OPT_SHARDS, &v), KVREG_OK);
    assert_int_equal(v, 64);
    assert_int_equal(kvreg_config_get(cfg, KVREG_OPT_RESERVE_BLOCKS, &v), KVREG_OK);
    assert_int_equal(v, 0);
    v = 99;
    assert_int_equal(kvreg_config_get(cfg, 7, &v), KVREG_EINVAL); /* first unknown option */
    assert_int_equal(v, 99);
    assert_int_equal(kvreg_config_get(cfg, KVREG_OPT_SHARDS, NULL), KVREG_EINVAL);
    assert_int_equal(kvreg_config_get(NULL, KVREG_OPT_SHARDS, &v), KVREG_EINVAL);

    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_SHARDS, 8), KVREG_OK);
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_SHARDS, 3), KVREG_EINVAL); /* kept 8 */
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_DELIVERY, KVREG_DELIVERY_POLL), KVREG_OK);
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_KEEP_TOKENS, 1), KVREG_OK);
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_EVENT_MODE, KVREG_EVENTS_PER_TIER), KVREG_OK);
    assert_int_equal(kvreg_config_get(cfg, KVREG_OPT_SHARDS, &v), KVREG_OK);
    assert_int_equal(v, 8);
    assert_int_equal(kvreg_registry_new(&reg, cfg), KVREG_OK);
    /* the registry keeps what it was made with, whatever happens to the config after */
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_SHARDS, 16), KVREG_OK);
    kvreg_config_free(cfg);
    assert_int_equal(kvreg_registry_get(reg, KVREG_OPT_SHARDS, &v), KVREG_OK);
    assert_int_equal(v, 8);
    assert_int_equal(kvreg_registry_get(reg, KVREG_OPT_DELIVERY, &v), KVREG_OK);
    assert_int_equal(v, KVREG_DELIVERY_POLL);
    assert_int_equal(kvreg_registry_get(reg, KVREG_OPT_KEEP_TOKENS, &v), KVREG_OK);
    assert_int_equal(v, 1);
    assert_int_equal(kvreg_registry_get(reg, KVREG_OPT_EVENT_MODE, &v), KVREG_OK);
    assert_int_equal(v, KVREG_EVENTS_PER_TIER);
    assert_int_equal(kvreg_registry_get(reg, 0, &v), KVREG_EINVAL);
    kvreg_registry_free(reg);
}

static void test_pool_options(void **state)
{
    kvreg_registry *reg = NULL;
    kvreg_pool *pool = NULL;
    uint64_t v = 0;
    char buf[8];
    size_t len = 0;
    (void)state;
    assert_int_equal(kvreg_registry_new(&reg, NULL), KVREG_OK);
    assert_int_equal(kvreg_pool_new_medium(&pool, reg, "host-dram", KVREG_MEDIUM_CPU), KVREG_OK);
    assert_int_equal(kvreg_pool_get(pool, KVREG_POOL_OPT_MEDIUM, &v), KVREG_OK);
    assert_int_equal(v, KVREG_MEDIUM_CPU);
    assert_int_equal(kvreg_pool_get(pool, KVREG_POOL_OPT_ID, &v), KVREG_OK);
    assert_int_equal(v, 1); /* the first pool */
    assert_int_equal(kvreg_pool_set(pool, KVREG_POOL_OPT_MEDIUM, KVREG_MEDIUM_GPU), KVREG_ESTATE);
    assert_int_equal(kvreg_pool_set(pool, 3, 0), KVREG_EINVAL);
    assert_int_equal(kvreg_pool_get(pool, KVREG_POOL_OPT_MEDIUM, &v), KVREG_OK);
    assert_int_equal(v, KVREG_MEDIUM_CPU);
    /* "host-dram" is 9 bytes: too long for 8, length still told, nothing copied */
    memset(buf, 'x', sizeof buf);
    assert_int_equal(kvreg_pool_get_string(pool, KVREG_POOL_NAME, buf, sizeof buf, &len), KVREG_ERANGE);
    assert_int_equal(len, 9);
    assert_int_equal(buf[0], 'x');
    assert_int_equal(kvreg_pool_get_string(pool, KVREG_POOL_NAME, NULL, 0, &len), KVREG_ERANGE);
    assert_int_equal(len, 9);
    {
        char big[10];
        assert_int_equal(kvreg_pool_get_string(pool, KVREG_POOL_NAME, big, sizeof big, &len), KVREG_OK);
        assert_string_equal(big, "host-dram");
    }
    assert_int_equal(kvreg_pool_get_string(pool, 2, buf, sizeof buf, &len), KVREG_EINVAL);
    kvreg_registry_free(reg);
}

static void test_sized_desc(void **state)
{
    kvreg_registry *reg = NULL;
    kvreg_pool *pool = NULL;
    kvreg_pool_block_desc d[2] = {KVREG_POOL_BLOCK_DESC_INIT, KVREG_POOL_BLOCK_DESC_INIT};
    kvreg_block h[2] = {0, 0};
    size_t n = 7;
    (void)state;
    assert_int_equal(d[0].size, sizeof(kvreg_pool_block_desc));
    assert_int_equal(kvreg_registry_new(&reg, NULL), KVREG_OK);
    assert_int_equal(kvreg_pool_new(&pool, reg, "gpu"), KVREG_OK);
    d[0].sequence_hash = 11;
    d[0].block_hash = 11;
    d[1].sequence_hash = 12;
    d[1].block_hash = 12;
    d[1].has_parent = 1;
    d[1].parent_sequence_hash = 11;
    d[1].size = sizeof(kvreg_pool_block_desc) + 8; /* a later header's struct */
    assert_int_equal(kvreg_pool_register(pool, &d[1], &h[1]), KVREG_EINVAL);
    /* a batch with one bad size registers nothing, not even the good one before it */
    assert_int_equal(kvreg_pool_register_batch(pool, d, 2, h, NULL, &n), KVREG_EINVAL);
    assert_int_equal(n, 7);
    assert_int_equal(kvreg_pool_size(pool), 0);
    d[1].size = 0;
    assert_int_equal(kvreg_pool_register(pool, &d[1], &h[1]), KVREG_EINVAL);
    d[1].size = sizeof(kvreg_pool_block_desc);
    assert_int_equal(kvreg_pool_register_batch(pool, d, 2, h, NULL, &n), KVREG_OK);
    assert_int_equal(n, 2);
    assert_int_equal(kvreg_pool_size(pool), 2);
    {
        kvreg_block_info info;
        assert_int_equal(kvreg_pool_block_info(pool, h[1], &info), KVREG_OK);
        assert_int_equal(info.parent_sequence_hash, 11);
        assert_int_equal(info.has_parent, 1);
    }
    kvreg_registry_free(reg);
}

static void test_index_and_router_config(void **state)
{
    kvreg_index_config *ic = NULL;
    kvreg_router_config rc;
    kvreg_router *r = NULL;
    uint64_t v = 0;
    double d = -1;
    (void)state;
    assert_int_equal(kvreg_index_config_new(&ic), KVREG_OK);
    assert_int_equal(kvreg_index_config_get(ic, KVREG_INDEX_OPT_BLOCK_SIZE, &v), KVREG_OK);
    assert_int_equal(v, 16);
    assert_int_equal(kvreg_index_config_get(ic, KVREG_INDEX_OPT_SALT, &v), KVREG_OK);
    assert_int_equal(v, KVREG_ROUTER_SALT);
    assert_int_equal(kvreg_index_config_get(ic, KVREG_INDEX_OPT_SHARDS, &v), KVREG_OK);
    assert_int_equal(v, 256);
    assert_int_equal(kvreg_index_config_get(ic, KVREG_INDEX_OPT_WEIGHT + KVREG_MEDIUM_CPU, &v), KVREG_OK);
    assert_int_equal(v, 800);
    assert_int_equal(kvreg_index_config_set(ic, KVREG_INDEX_OPT_BLOCK_SIZE, 32), KVREG_OK);
    assert_int_equal(kvreg_index_config_get(ic, KVREG_INDEX_OPT_BLOCK_SIZE, &v), KVREG_OK);
    assert_int_equal(v, 32);
    assert_int_equal(kvreg_index_config_get(ic, 7, &v), KVREG_EINVAL);
    assert_int_equal(kvreg_index_config_get(ic, KVREG_INDEX_OPT_WEIGHT + KVREG_MEDIUM_COUNT, &v),
                     KVREG_EINVAL);
    kvreg_index_config_free(ic);

    assert_int_equal(kvreg_router_config_init(&rc), KVREG_OK);
    assert_int_equal(kvreg_router_config_get_double(&rc, KVREG_ROUTER_OPT_OVERLAP_WEIGHT, &d), KVREG_OK);
    assert_true(d == 1.0);
    assert_int_equal(kvreg_router_config_get_double(&rc, KVREG_ROUTER_OPT_TIER_WEIGHT + KVREG_MEDIUM_STORAGE, &d),
                     KVREG_OK);
    assert_true(d == 0.5);
    assert_int_equal(kvreg_router_config_set_double(&rc, KVREG_ROUTER_OPT_TEMPERATURE, 0.25), KVREG_OK);
    assert_true(rc.temperature == 0.25); /* the option is the struct member */
    assert_int_equal(kvreg_router_config_set_double(&rc, KVREG_ROUTER_OPT_TEMPERATURE, -1.0), KVREG_EINVAL);
    assert_int_equal(kvreg_router_config_set_double(&rc, KVREG_ROUTER_OPT_TIER_WEIGHT, 1.5), KVREG_EINVAL);
    assert_true(rc.temperature == 0.25 && rc.tier_weight[0] == 1.0);
    assert_int_equal(kvreg_router_config_set(&rc, KVREG_ROUTER_OPT_POLICY, KVREG_ROUTER_POLICY_WEIGHTED),
                     KVREG_OK);
    assert_int_equal(kvreg_router_config_set(&rc, KVREG_ROUTER_OPT_POLICY, 2), KVREG_EINVAL);
    assert_int_equal(kvreg_router_config_set(&rc, KVREG_ROUTER_OPT_SEED, 42), KVREG_OK);
    assert_int_equal(kvreg_router_config_get(&rc, KVREG_ROUTER_OPT_SEED, &v), KVREG_OK);
    assert_int_equal(v, 42);
    assert_int_equal(rc.policy, KVREG_ROUTER_POLICY_WEIGHTED);
    /* a double option through the integer family is unknown there, and the reverse */
    assert_int_equal(kvreg_router_config_set(&rc, KVREG_ROUTER_OPT_TEMPERATURE, 1), KVREG_EINVAL);
    assert_int_equal(kvreg_router_config_get_double(&rc, KVREG_ROUTER_OPT_SEED, &d), KVREG_EINVAL);
    assert_int_equal(kvreg_router_new(&r, &rc), KVREG_OK);
    kvreg_router_free(r);
    rc.size = 8; /* older than any version */
    assert_int_equal(kvreg_router_config_set(&rc, KVREG_ROUTER_OPT_SEED, 1), KVREG_EINVAL);
}

static void test_wire_options(void **state)
{
    kvreg_wire_decoder *dec = NULL;
    kvreg_wire_encoder *enc = NULL;
    uint64_t v = 0;
    char buf[4];
    size_t len = 0;
    (void)state;
    if (!(kvreg_features() & KVREG_FEATURE_WIRE))
        skip();
    assert_int_equal(kvreg_wire_decoder_new(&dec, KVREG_WIRE_VLLM), KVREG_OK);
    assert_int_equal(kvreg_wire_decoder_get(dec, KVREG_WIRE_DEC_OPT_MAX_PAYLOAD, &v), KVREG_OK);
    assert_int_equal(v, 16u * 1024u * 1024u);
    assert_int_equal(kvreg_wire_decoder_get(dec, KVREG_WIRE_DEC_OPT_MAX_DEPTH, &v), KVREG_OK);
    assert_int_equal(v, 32);
    assert_int_equal(kvreg_wire_decoder_set(dec, KVREG_WIRE_DEC_OPT_MAX_EVENTS, 5), KVREG_OK);
    assert_int_equal(kvreg_wire_decoder_get(dec, KVREG_WIRE_DEC_OPT_MAX_EVENTS, &v), KVREG_OK);
    assert_int_equal(v, 5);
    assert_int_equal(kvreg_wire_decoder_get(dec, 4, &v), KVREG_EINVAL);
    kvreg_wire_decoder_free(dec);

    assert_int_equal(kvreg_wire_encoder_new(&enc, KVREG_WIRE_VLLM), KVREG_OK);
    assert_int_equal(kvreg_wire_encoder_set_string(enc, KVREG_WIRE_LORA_NAME, "lora"), KVREG_OK);
    assert_int_equal(kvreg_wire_encoder_get_string(enc, KVREG_WIRE_LORA_NAME, buf, sizeof buf, &len),
                     KVREG_ERANGE);
    assert_int_equal(len, 4);
    assert_int_equal(kvreg_wire_encoder_set_string(enc, 2, "x"), KVREG_EINVAL);
    assert_int_equal(kvreg_wire_encoder_set_string(enc, KVREG_WIRE_LORA_NAME, ""), KVREG_OK);
    assert_int_equal(kvreg_wire_encoder_get_string(enc, KVREG_WIRE_LORA_NAME, buf, sizeof buf, &len),
                     KVREG_OK);
    assert_int_equal(len, 0); /* "" is a name, not nil */
    kvreg_wire_encoder_free(enc);
}

/* destroy: exactly once when replaced, exactly once when the object is freed. */
static int destroyed_a, destroyed_b;
static void destroy_a(void *p)
{
    assert_ptr_equal(p, &destroyed_a);
    destroyed_a++;
}
static void destroy_b(void *p)
{
    assert_ptr_equal(p, &destroyed_b);
    destroyed_b++;
}
static void on_batch(const kvreg_subscriber_batch *b, void *ud)
{
    (void)b;
    (void)ud;
}
static void on_notice(const kvreg_subscriber_notice *n, void *ud)
{
    (void)n;
    (void)ud;
}
static void on_nats(const kvreg_nats_notice *n, void *ud)
{
    (void)n;
    (void)ud;
}

static void test_subscriber_destroy(void **state)
{
    kvreg_subscriber *sub = NULL;
    (void)state;
    if (!(kvreg_features() & KVREG_FEATURE_ZMQ))
        skip();
    destroyed_a = destroyed_b = 0;
    assert_int_equal(kvreg_subscriber_new(&sub), KVREG_OK);
    assert_int_equal(kvreg_subscriber_set_batch_cb(sub, on_batch, &destroyed_a, destroy_a), KVREG_OK);
    assert_int_equal(kvreg_subscriber_set_notice_cb(sub, on_notice, &destroyed_b, destroy_b), KVREG_OK);
    assert_int_equal(destroyed_a + destroyed_b, 0);
    /* replaced: the old one goes at once, the new one stays */
    assert_int_equal(kvreg_subscriber_set_batch_cb(sub, on_batch, &destroyed_b, NULL), KVREG_OK);
    assert_int_equal(destroyed_a, 1);
    assert_int_equal(kvreg_subscriber_set_batch_cb(sub, on_batch, &destroyed_a, destroy_a), KVREG_OK);
    assert_int_equal(destroyed_a, 1);
    kvreg_subscriber_free(sub); /* freed: both go, once each */
    assert_int_equal(destroyed_a, 2);
    assert_int_equal(destroyed_b, 1);
    /* an error keeps it with the caller */
    assert_int_equal(kvreg_subscriber_set_batch_cb(NULL, on_batch, &destroyed_a, destroy_a), KVREG_EINVAL);
    assert_int_equal(destroyed_a, 2);
}

static void test_nats_consumer_destroy(void **state)
{
    kvreg_index *idx = NULL;
    kvreg_nats_consumer *con = NULL;
    (void)state;
    if (!kvreg_nats_available())
        skip();
    destroyed_a = 0;
    assert_int_equal(kvreg_index_new(&idx, NULL), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_new(&con, idx), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_set_notice_cb(con, on_nats, &destroyed_a, destroy_a), KVREG_OK);
    assert_int_equal(kvreg_nats_consumer_set_notice_cb(con, on_nats, &destroyed_a, destroy_a), KVREG_OK);
    assert_int_equal(destroyed_a, 1);
    kvreg_nats_consumer_free(con);
    assert_int_equal(destroyed_a, 2);
    kvreg_index_free(idx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_and_registry),
        cmocka_unit_test(test_pool_options),
        cmocka_unit_test(test_sized_desc),
        cmocka_unit_test(test_index_and_router_config),
        cmocka_unit_test(test_wire_options),
        cmocka_unit_test(test_subscriber_destroy),
        cmocka_unit_test(test_nats_consumer_destroy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
