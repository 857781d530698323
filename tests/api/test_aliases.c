/* Every 0.x name kept as an alias (KVREG_DEPRECATED in the headers) against its regular name:
 * one scenario runs twice on fresh registries, once through the old names and once through
 * the new, and both runs must give the same trace (statuses, handles' infos, refcounts,
 * tokens, events). The trace's key values are also checked against hand-known answers, so
 * two equally wrong runs cannot pass. This file calls deprecated names on purpose
 * (-Wno-deprecated-declarations in meson.build). */
#define KVREG_EXPERIMENTAL
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <kvreg.h>
#include <kvreg_nats.h>
#include <kvreg_net.h>
#include <kvreg_wire.h>

#define BS 4u
#define NB 3u
#define TRACE_MAX 256

typedef struct trace {
    uint64_t v[TRACE_MAX];
    size_t n;
} trace;

static void put(trace *t, uint64_t x)
{
    assert_true(t->n < TRACE_MAX);
    t->v[t->n++] = x;
}

/* One set of pool calls; `old` picks the names. The descriptors differ in type only. */
typedef struct api {
    int old;
} api;

static int reg_one(const api *a, kvreg_pool *p, const kvreg_block_info *b, const uint32_t *tok,
                   kvreg_block *out)
{
    if (a->old) {
        kvreg_block_desc d = {b->sequence_hash, b->block_hash, b->parent_sequence_hash,
                              b->has_parent, BS, tok, BS};
        return kvreg_register(p, &d, out);
    }
    kvreg_pool_block_desc d = KVREG_POOL_BLOCK_DESC_INIT;
    d.sequence_hash = b->sequence_hash;
    d.block_hash = b->block_hash;
    d.parent_sequence_hash = b->parent_sequence_hash;
    d.has_parent = b->has_parent;
    d.block_size = BS;
    d.tokens = tok;
    d.n_tokens = BS;
    return kvreg_pool_register(p, &d, out);
}

static int reg_batch(const api *a, kvreg_pool *p, const kvreg_block_info *b, const uint32_t *tok,
                     size_t n, kvreg_block *out, int *st, size_t *nreg)
{
    size_t i;
    if (a->old) {
        kvreg_block_desc d[NB];
        for (i = 0; i < n; i++) {
            kvreg_block_desc x = {b[i].sequence_hash, b[i].block_hash, b[i].parent_sequence_hash,
                                  b[i].has_parent, BS, tok + i * BS, BS};
            d[i] = x;
        }
        return kvreg_register_batch(p, d, n, out, st, nreg);
    }
    kvreg_pool_block_desc d[NB];
    for (i = 0; i < n; i++) {
        kvreg_pool_block_desc x = KVREG_POOL_BLOCK_DESC_INIT;
        x.sequence_hash = b[i].sequence_hash;
        x.block_hash = b[i].block_hash;
        x.parent_sequence_hash = b[i].parent_sequence_hash;
        x.has_parent = b[i].has_parent;
        x.block_size = BS;
        x.tokens = tok + i * BS;
        x.n_tokens = BS;
        d[i] = x;
    }
    return kvreg_pool_register_batch(p, d, n, out, st, nreg);
}

#define CALL(a, oldf, newf, ...) ((a)->old ? oldf(__VA_ARGS__) : newf(__VA_ARGS__))

static void put_block(trace *t, const api *a, kvreg_pool *p, kvreg_block h)
{
    kvreg_block_info info;
    uint32_t refs = 0, tok[BS + 1];
    size_t nt = 0;
    put(t, (uint64_t)CALL(a, kvreg_block_get_info, kvreg_pool_block_info, p, h, &info));
    put(t, info.sequence_hash);
    put(t, info.parent_sequence_hash);
    put(t, (uint64_t)CALL(a, kvreg_block_refcount, kvreg_pool_block_refcount, p, h, &refs));
    put(t, refs);
    put(t, (uint64_t)CALL(a, kvreg_block_tokens, kvreg_pool_block_tokens, p, h, tok, BS + 1, &nt));
    put(t, nt);
    put(t, nt ? tok[0] : 0);
}

static void on_events(const kvreg_event *ev, size_t n, void *ud)
{
    trace *t = ud;
    size_t i;
    for (i = 0; i < n; i++) {
        put(t, ev[i].kind);
        put(t, ev[i].sequence_hash);
    }
}

static void scenario(const api *a, trace *t, trace *events)
{
    uint32_t tokens[NB * BS + 2];
    kvreg_block_info info[NB];
    kvreg_config *cfg = NULL;
    kvreg_registry *reg = NULL;
    kvreg_pool *p = NULL;
    kvreg_sequence *seq = NULL;
    kvreg_block h[NB], again[NB], seqh[NB];
    int st[NB];
    uint64_t hashes[NB + 1];
    size_t n = 0, i;

    for (i = 0; i < NB * BS + 2; i++)
        tokens[i] = (uint32_t)(100 + i);
    assert_int_equal(kvreg_hash_blocks(tokens, NB * BS, BS, 7, info, NB, &n), KVREG_OK);
    assert_int_equal(n, NB);
    assert_int_equal(kvreg_config_new(&cfg), KVREG_OK);
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_KEEP_TOKENS, 1), KVREG_OK);
    assert_int_equal(kvreg_config_set_event_fn(cfg, on_events, events, NULL), KVREG_OK);
    assert_int_equal(kvreg_registry_new(&reg, cfg), KVREG_OK);
    kvreg_config_free(cfg);
    assert_int_equal(kvreg_pool_new(&p, reg, "gpu"), KVREG_OK);

    /* register one, then the same again (EEXIST), then a batch holding it and two more */
    put(t, (uint64_t)reg_one(a, p, &info[0], tokens, &h[0]));
    put(t, (uint64_t)reg_one(a, p, &info[0], tokens, &again[0]));
    put(t, (uint64_t)reg_batch(a, p, info, tokens, NB, again, st, &n));
    put(t, n);
    for (i = 0; i < NB; i++)
        put(t, (uint64_t)st[i]);
    h[1] = again[1];
    h[2] = again[2];
    for (i = 0; i < NB; i++)
        put_block(t, a, p, h[i]);

    /* acquire one, and the prefix of (h0, h1, unknown) */
    put(t, (uint64_t)CALL(a, kvreg_acquire, kvreg_pool_acquire, p, info[0].sequence_hash, &again[0]));
    put(t, again[0] == h[0]);
    for (i = 0; i < 2; i++)
        hashes[i] = info[i].sequence_hash;
    hashes[2] = 12345;
    put(t, (uint64_t)CALL(a, kvreg_acquire_prefix, kvreg_pool_acquire_prefix, p, hashes, 3, again, &n));
    put(t, n);
    put_block(t, a, p, h[0]);
    /* release them: one, then a batch of two, then a stale one */
    put(t, (uint64_t)CALL(a, kvreg_release, kvreg_pool_release, p, h[0]));
    put(t, (uint64_t)CALL(a, kvreg_release_batch, kvreg_pool_release_batch, p, again, 2, st, &n));
    put(t, n);
    put_block(t, a, p, h[0]);

    /* a sequence: its third block, then blocks 0..1 (held already: EEXIST), then the partial */
    assert_int_equal(kvreg_sequence_new(&seq, BS, 7), KVREG_OK);
    assert_int_equal(kvreg_sequence_extend(seq, tokens, NB * BS + 2, NULL), KVREG_OK);
    put(t, (uint64_t)CALL(a, kvreg_register_sequence_block, kvreg_pool_register_sequence_block, p,
                          seq, 2, &seqh[0]));
    put(t, (uint64_t)CALL(a, kvreg_register_sequence_block, kvreg_pool_register_sequence_block, p,
                          seq, NB, &seqh[0]));
    put(t, (uint64_t)CALL(a, kvreg_register_sequence, kvreg_pool_register_sequence, p, seq, 0, 2,
                          seqh, st, &n));
    put(t, n);
    put(t, (uint64_t)st[0]);
    put(t, (uint64_t)CALL(a, kvreg_register_sequence, kvreg_pool_register_sequence, p, seq, 2, 2,
                          seqh, st, &n));

    kvreg_sequence_free(seq);
    kvreg_registry_free(reg);
}

static void test_pool_aliases(void **state)
{
    static trace t_old, t_new, e_old, e_new;
    api a_old = {1}, a_new = {0};
    (void)state;
    memset(&t_old, 0, sizeof t_old);
    memset(&t_new, 0, sizeof t_new);
    memset(&e_old, 0, sizeof e_old);
    memset(&e_new, 0, sizeof e_new);
    scenario(&a_old, &t_old, &e_old);
    scenario(&a_new, &t_new, &e_new);
    assert_int_equal(t_old.n, t_new.n);
    assert_memory_equal(t_old.v, t_new.v, t_old.n * sizeof t_old.v[0]);
    assert_int_equal(e_old.n, e_new.n);
    assert_memory_equal(e_old.v, e_new.v, e_old.n * sizeof e_old.v[0]);

    /* Hand-known answers (the trace's layout is the order of put() calls above). */
    assert_int_equal(t_new.v[0], KVREG_OK);
    assert_int_equal((int)t_new.v[1], KVREG_EEXIST);
    assert_int_equal(t_new.v[2], KVREG_OK);
    assert_int_equal(t_new.v[3], 2); /* the batch registered 2 of 3 */
    assert_int_equal((int)t_new.v[4], KVREG_EEXIST);
    assert_int_equal(t_new.v[5], KVREG_OK);
    /* block 0 (put_block: 8 values from index 7): info ok, no parent, refcount 1, 4 tokens
     * starting at 100; block 1's tokens start at 104 */
    assert_int_equal(t_new.v[7], KVREG_OK);
    assert_int_equal(t_new.v[9], 0);
    assert_int_equal(t_new.v[11], 1);
    assert_int_equal(t_new.v[13], BS);
    assert_int_equal(t_new.v[14], 100);
    assert_int_equal(t_new.v[14 + 8], 104);
    /* 3 Registers (one per hash), then after the releases no Remove (h0 still held once) */
    assert_int_equal(e_new.n, 2 * 3);
    assert_int_equal(e_new.v[0], KVREG_EVENT_REGISTER);
}

/* The one 0.x special setter: kvreg_wire_encoder_set_lora_name is the LoRA string option. */
static void test_wire_lora_alias(void **state)
{
    kvreg_wire_encoder *enc = NULL;
    char buf[16];
    size_t len = 0;
    (void)state;
    if (!(kvreg_features() & KVREG_FEATURE_WIRE))
        skip();
    assert_int_equal(kvreg_wire_encoder_new(&enc, KVREG_WIRE_VLLM), KVREG_OK);
    assert_int_equal(kvreg_wire_encoder_get_string(enc, KVREG_WIRE_LORA_NAME, buf, sizeof buf, &len),
                     KVREG_ENOENT);
    assert_int_equal(kvreg_wire_encoder_set_lora_name(enc, "adapter-a"), KVREG_OK);
    assert_int_equal(kvreg_wire_encoder_get_string(enc, KVREG_WIRE_LORA_NAME, buf, sizeof buf, &len),
                     KVREG_OK);
    assert_string_equal(buf, "adapter-a");
    assert_int_equal(len, 9);
    assert_int_equal(kvreg_wire_encoder_set_lora_name(enc, NULL), KVREG_OK);
    assert_int_equal(kvreg_wire_encoder_get_string(enc, KVREG_WIRE_LORA_NAME, buf, sizeof buf, &len),
                     KVREG_ENOENT);
    kvreg_wire_encoder_free(enc);
}

/* The 0.x callback setters without destroy are the _cb ones with destroy NULL: they replace
 * (and so destroy) what a _cb setter stored. */
static int destroyed;
static void count_destroy(void *p)
{
    (void)p;
    destroyed++;
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

static void test_callback_aliases(void **state)
{
    kvreg_subscriber *sub = NULL;
    kvreg_index *idx = NULL;
    kvreg_nats_consumer *con = NULL;
    int x = 0;
    (void)state;
    if (kvreg_features() & KVREG_FEATURE_ZMQ) {
        assert_int_equal(kvreg_subscriber_new(&sub), KVREG_OK);
        destroyed = 0;
        assert_int_equal(kvreg_subscriber_set_batch_cb(sub, on_batch, &x, count_destroy), KVREG_OK);
        assert_int_equal(kvreg_subscriber_set_batch_fn(sub, on_batch, &x), KVREG_OK);
        assert_int_equal(destroyed, 1);
        assert_int_equal(kvreg_subscriber_set_notice_cb(sub, on_notice, &x, count_destroy), KVREG_OK);
        assert_int_equal(kvreg_subscriber_set_notice_fn(sub, NULL, NULL), KVREG_OK);
        assert_int_equal(destroyed, 2);
        kvreg_subscriber_free(sub);
        assert_int_equal(destroyed, 2); /* the 0.x setters' user_data is borrowed */
    } else {
        assert_int_equal(kvreg_subscriber_set_batch_fn(NULL, on_batch, &x), KVREG_ENOTSUP);
    }
    if (kvreg_nats_available()) {
        assert_int_equal(kvreg_index_new(&idx, NULL), KVREG_OK);
        assert_int_equal(kvreg_nats_consumer_new(&con, idx), KVREG_OK);
        destroyed = 0;
        assert_int_equal(kvreg_nats_consumer_set_notice_cb(con, on_nats, &x, count_destroy), KVREG_OK);
        assert_int_equal(kvreg_nats_consumer_set_notice_fn(con, on_nats, &x), KVREG_OK);
        assert_int_equal(destroyed, 1);
        kvreg_nats_consumer_free(con);
        assert_int_equal(destroyed, 1);
        kvreg_index_free(idx);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_aliases),
        cmocka_unit_test(test_wire_lora_alias),
        cmocka_unit_test(test_callback_aliases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
