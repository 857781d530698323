/* Misuse of handles and pools: stale and double release, tampered handles, handles of another
 * pool or registry, use after kvreg_pool_free (ESTALE until the slot is reused), the pool limit,
 * unusual hash values, and freeing a registry that still has pools, blocks and queued events
 * (ASan/valgrind prove that path frees everything). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <kvreg.h>
#include "kvreg_answer.h"

static const uint32_t toks[4] = {1, 2, 3, 4};

static kvreg_block_desc desc_of(uint64_t h)
{
    kvreg_block_desc d;
    memset(&d, 0, sizeof d);
    d.sequence_hash = h;
    d.block_hash = h ^ 1;
    d.tokens = toks;
    d.n_tokens = 4;
    d.block_size = 4;
    return d;
}

static uint64_t stat_of(kvreg_registry *reg, uint32_t s)
{
    uint64_t v = 0;
    assert_int_equal(kvreg_registry_stat(reg, s, &v), KVREG_OK);
    return v;
}

static kvreg_block reg_ok(kvreg_pool *pool, uint64_t h)
{
    kvreg_block b = KVREG_BLOCK_NONE;
    kvreg_block_desc d = desc_of(h);
    assert_int_equal(kvreg_register(pool, &d, &b), KVREG_OK);
    assert_true(b != KVREG_BLOCK_NONE);
    return b;
}

static void t_stale_double_release(void **state)
{
    (void)state;
    kvreg_registry *reg = NULL;
    kvreg_pool *p = NULL;
    kvreg_block_info info;
    uint32_t rc = 0;
    kvreg_block a = KVREG_BLOCK_NONE;
    assert_int_equal(kvreg_registry_new(&reg, NULL), KVREG_OK);
    assert_int_equal(kvreg_pool_new(&p, reg, "p"), KVREG_OK);
    kvreg_block b = reg_ok(p, 100);
    assert_int_equal(kvreg_acquire(p, 100, &a), KVREG_OK);
    assert_true(a == b);
    assert_int_equal(kvreg_release(p, b), KVREG_OK);
    assert_int_equal(kvreg_release(p, b), KVREG_OK);
    assert_int_equal(kvreg_release(p, b), KVREG_ESTALE); /* one more release than references */
    assert_int_equal(kvreg_block_get_info(p, b, &info), KVREG_ESTALE);
    assert_int_equal(kvreg_block_refcount(p, b, &rc), KVREG_ESTALE);
    assert_int_equal(kvt_pool_has(p, 100), 0);
    /* the same hash again gets a different handle; the old one stays stale */
    kvreg_block c = reg_ok(p, 100);
    assert_true(c != b);
    assert_int_equal(kvreg_release(p, b), KVREG_ESTALE);
    assert_int_equal(kvreg_block_refcount(p, c, &rc), KVREG_OK);
    assert_int_equal(rc, 1);
    assert_int_equal(kvreg_release(p, KVREG_BLOCK_NONE), KVREG_ESTALE);
    assert_int_equal(kvreg_release(p, UINT64_MAX), KVREG_ESTALE);
    kvreg_registry_free(reg);
}

/* Every single-bit change of a live handle must be rejected: a corrupted handle may never
 * release someone else's reference. */
static void t_tampered_handles(void **state)
{
    (void)state;
    kvreg_registry *reg = NULL;
    kvreg_pool *p = NULL;
    uint32_t rc = 0;
    assert_int_equal(kvreg_registry_new(&reg, NULL), KVREG_OK);
    assert_int_equal(kvreg_pool_new(&p, reg, "p"), KVREG_OK);
    kvreg_block b = reg_ok(p, 7);
    for (int bit = 0; bit < 64; bit++) {
        kvreg_block x = b ^ (UINT64_C(1) << bit);
        assert_int_equal(kvreg_release(p, x), KVREG_ESTALE);
        assert_int_equal(kvreg_block_refcount(p, x, &rc), KVREG_ESTALE);
    }
    assert_int_equal(kvreg_block_refcount(p, b, &rc), KVREG_OK);
    assert_int_equal(rc, 1);
    kvreg_registry_free(reg);
}

static void t_foreign_handles(void **state)
{
    (void)state;
    kvreg_registry *r1 = NULL, *r2 = NULL;
    kvreg_pool *a = NULL, *b = NULL, *c = NULL;
    uint32_t rc = 0;
    assert_int_equal(kvreg_registry_new(&r1, NULL), KVREG_OK);
    assert_int_equal(kvreg_registry_new(&r2, NULL), KVREG_OK);
    assert_int_equal(kvreg_pool_new(&a, r1, "a"), KVREG_OK);
    assert_int_equal(kvreg_pool_new(&b, r1, "b"), KVREG_OK);
    assert_int_equal(kvreg_pool_new(&c, r2, "c"), KVREG_OK);
    /* all three hold hash 5 */
    kvreg_block ha = reg_ok(a, 5), hb = reg_ok(b, 5), hc = reg_ok(c, 5);
    assert_true(ha != hb);
    assert_int_equal(kvreg_release(b, ha), KVREG_ESTALE); /* another pool's handle */
    assert_int_equal(kvreg_release(a, hc), KVREG_ESTALE); /* another registry's */
    assert_int_equal(kvreg_release(c, ha), KVREG_ESTALE);
    assert_int_equal(kvreg_block_refcount(a, ha, &rc), KVREG_OK);
    assert_int_equal(rc, 1);
    assert_int_equal(kvreg_block_refcount(b, hb, &rc), KVREG_OK);
    assert_int_equal(rc, 1);
    assert_int_equal(kvreg_block_refcount(c, hc, &rc), KVREG_OK);
    assert_int_equal(rc, 1);
    /* one Register only: the hash is shared by a and b */
    assert_int_equal(stat_of(r1, KVREG_STAT_EVENTS_REGISTER), 1);
    assert_int_equal(kvreg_release(a, ha), KVREG_OK);
    assert_int_equal(kvt_registry_has(r1, 5), 1);
    assert_int_equal(stat_of(r1, KVREG_STAT_EVENTS_REMOVE), 0);
    assert_int_equal(kvreg_release(b, hb), KVREG_OK);
    assert_int_equal(kvt_registry_has(r1, 5), 0);
    assert_int_equal(stat_of(r1, KVREG_STAT_EVENTS_REMOVE), 1);
    assert_int_equal(kvt_registry_has(r2, 5), 1);
    kvreg_registry_free(r1);
    kvreg_registry_free(r2);
}

static void t_use_after_pool_free(void **state)
{
    (void)state;
    kvreg_registry *reg = NULL;
    kvreg_pool *p = NULL, *q = NULL;
    kvreg_block out = 9, blocks[2];
    kvreg_block_info info;
    kvreg_block_desc d = desc_of(300);
    uint64_t hs[1] = {300};
    size_t n = 9;
    int status[2];
    assert_int_equal(kvreg_registry_new(&reg, NULL), KVREG_OK);
    assert_int_equal(kvreg_pool_new(&p, reg, "victim"), KVREG_OK);
    uint32_t id = kvreg_pool_id(p);
    kvreg_block b = reg_ok(p, 300);
    reg_ok(p, 301);
    kvreg_pool_free(p);
    assert_int_equal(stat_of(reg, KVREG_STAT_EVENTS_REMOVE), 2);
    assert_int_equal(stat_of(reg, KVREG_STAT_POOLS), 0);
    assert_int_equal(kvt_registry_has(reg, 300), 0);
    assert_int_equal(kvreg_register(p, &d, &out), KVREG_ESTALE);
    assert_int_equal(out, 9);
    assert_int_equal(kvreg_acquire(p, 300, &out), KVREG_ESTALE);
    assert_int_equal(kvreg_release(p, b), KVREG_ESTALE);
    assert_int_equal(kvt_pool_has(p, 300), KVREG_ESTALE);
    assert_int_equal(kvreg_pool_match(p, hs, 1, &n), KVREG_ESTALE);
    assert_int_equal(kvreg_block_get_info(p, b, &info), KVREG_ESTALE);
    assert_int_equal(kvreg_pool_size(p), 0);
    assert_string_equal(kvreg_pool_name(p), "victim"); /* valid until the registry is freed */
    /* kvreg_register_batch "Returns KVREG_OK unless the arguments themselves are bad"; per
     * block it reports "the status kvreg_register would return": ESTALE, no handle */
    blocks[0] = 9;
    status[0] = 9;
    n = 9;
    assert_int_equal(kvreg_register_batch(p, &d, 1, blocks, status, &n), KVREG_OK);
    assert_int_equal(status[0], KVREG_ESTALE);
    assert_int_equal(blocks[0], KVREG_BLOCK_NONE);
    assert_int_equal(n, 0);
    kvreg_pool_free(p); /* again: a no-op */
    assert_int_equal(stat_of(reg, KVREG_STAT_EVENTS_REMOVE), 2);
    assert_int_equal(stat_of(reg, KVREG_STAT_HASHES), 0);

    /* ids are reused least-recently first: the freed id comes back only after every other */
    assert_int_equal(kvreg_pool_new(&q, reg, "next"), KVREG_OK);
    assert_true(kvreg_pool_id(q) != id);
    assert_int_equal(kvreg_register(p, &d, &out), KVREG_ESTALE);
    kvreg_registry_free(reg);
}

/* A freed pool's slot comes back (kvreg_pool_free: "the first 1024 pools get fresh slots; after
 * that freed slots are reused least-recently first"), so the old pointer then names the new
 * pool; the old incarnation's handles must stay stale. With one shard (KVREG_OPT_SHARDS 1)
 * and one block live at a time, every registration takes the record the previous release
 * freed, so here the old handle and the new one name the same hash, in the same pool slot
 * (same id), in the same record: only the pool's incarnation and the record's generation
 * tell them apart. */
static void t_slot_reuse(void **state)
{
    (void)state;
    kvreg_registry *reg = NULL;
    kvreg_config *cfg = NULL;
    kvreg_pool *p = NULL, *q = NULL;
    kvreg_block_info info;
    uint32_t rc = 0;
    assert_int_equal(kvreg_config_new(&cfg), KVREG_OK);
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_SHARDS, 1), KVREG_OK);
    assert_int_equal(kvreg_registry_new(&reg, cfg), KVREG_OK);
    kvreg_config_free(cfg);
    assert_int_equal(kvreg_pool_new(&p, reg, "first"), KVREG_OK);
    const uint32_t id = kvreg_pool_id(p);
    kvreg_block old = reg_ok(p, 77);
    kvreg_pool_free(p);
    /* pools 2 .. 1024 are fresh; pool 1025 takes the least recently freed slot: p's */
    for (unsigned i = 2; i <= 1024; i++) {
        assert_int_equal(kvreg_pool_new(&q, reg, "cycle"), KVREG_OK);
        assert_true(q != p);
        assert_int_equal(kvreg_release(p, old), KVREG_ESTALE);
        kvreg_pool_free(q);
    }
    assert_int_equal(kvreg_pool_new(&q, reg, "cycle"), KVREG_OK);
    assert_ptr_equal(q, p); /* the reuse happened */
    assert_int_equal(kvreg_pool_id(q), id);
    assert_string_equal(kvreg_pool_name(q), "cycle");

    /* same hash, same pool slot and id, same (only) record of the only shard */
    kvreg_block fresh = reg_ok(q, 77);
    assert_true(fresh != old);
    assert_int_equal(kvreg_release(q, old), KVREG_ESTALE);
    assert_int_equal(kvreg_block_get_info(q, old, &info), KVREG_ESTALE);
    assert_int_equal(kvreg_block_refcount(q, fresh, &rc), KVREG_OK);
    assert_int_equal(rc, 1);
    /* cycle the record through the same and another hash, more than 2^16 times: every
     * earlier handle stays stale, one hash is registered, and the current handle works */
    kvreg_block prev = fresh, first_78 = KVREG_BLOCK_NONE;
    for (unsigned i = 0; i < 70000; i++) {
        const uint64_t h = i % 3 == 0 ? 78 : 77;
        assert_int_equal(kvreg_release(q, prev), KVREG_OK);
        kvreg_block cur = reg_ok(q, h);
        if (first_78 == KVREG_BLOCK_NONE && h == 78)
            first_78 = cur;
        else
            assert_int_equal(kvreg_release(q, first_78), KVREG_ESTALE);
        assert_true(cur != prev && cur != old && cur != fresh);
        assert_int_equal(kvreg_release(q, prev), KVREG_ESTALE);
        assert_int_equal(kvreg_release(q, old), KVREG_ESTALE);
        assert_int_equal(kvreg_block_get_info(q, cur, &info), KVREG_OK);
        assert_true(info.sequence_hash == h);
        prev = cur;
    }
    assert_int_equal(stat_of(reg, KVREG_STAT_HASHES), 1);
    assert_int_equal(kvreg_block_refcount(q, prev, &rc), KVREG_OK);
    assert_int_equal(rc, 1);
    assert_int_equal(kvreg_pool_size(q), 1);
    kvreg_registry_free(reg);
}

/* kvreg_pool_name: "Borrowed, valid until the registry is freed". That must hold for a pool
 * that was freed and whose slot a new pool then took (the name is long enough to live on the
 * heap, so a freed buffer shows under ASan/valgrind, and a reused one as changed text). */
static void t_pool_name_lifetime(void **state)
{
    (void)state;
    static const char long_name[] = "gpu-pool-with-a-name-longer-than-any-small-string-buffer";
    kvreg_registry *reg = NULL;
    kvreg_pool *p = NULL, *q = NULL;
    assert_int_equal(kvreg_registry_new(&reg, NULL), KVREG_OK);
    assert_int_equal(kvreg_pool_new(&p, reg, long_name), KVREG_OK);
    const char *name = kvreg_pool_name(p);
    assert_string_equal(name, long_name);
    kvreg_pool_free(p);
    assert_string_equal(name, long_name);
    int reused = 0;
    for (unsigned i = 0; i < 2 * KVREG_MAX_POOLS && !reused; i++) {
        assert_int_equal(kvreg_pool_new(&q, reg, "another-pool-with-a-long-name-on-the-heap-too"), KVREG_OK);
        reused = q == p;
        kvreg_pool_free(q);
    }
    assert_true(reused); /* the case this test is about did happen */
    assert_string_equal(name, long_name);
    kvreg_registry_free(reg);
}

static void t_pool_limit(void **state)
{
    (void)state;
    kvreg_registry *reg = NULL;
    kvreg_pool *pools[KVREG_MAX_POOLS], *extra = NULL;
    assert_int_equal(kvreg_registry_new(&reg, NULL), KVREG_OK);
    for (unsigned i = 0; i < KVREG_MAX_POOLS; i++) {
        assert_int_equal(kvreg_pool_new(&pools[i], reg, NULL), KVREG_OK);
        assert_true(kvreg_pool_id(pools[i]) >= 1 && kvreg_pool_id(pools[i]) <= KVREG_MAX_POOLS);
        reg_ok(pools[i], 1000 + i % 3); /* leave blocks in them: registry_free must free all */
    }
    assert_int_equal(kvreg_pool_new(&extra, reg, NULL), KVREG_EOVERFLOW);
    assert_null(extra);
    assert_int_equal(stat_of(reg, KVREG_STAT_POOLS), KVREG_MAX_POOLS);
    kvreg_pool_free(pools[17]);
    assert_int_equal(kvreg_pool_new(&extra, reg, NULL), KVREG_OK);
    assert_int_equal(kvreg_pool_id(extra), kvreg_pool_id(pools[17]));
    kvreg_registry_free(reg);
}

/* "pool ids are reused least-recently first": once every id has been used, freeing ids in the
 * order a, b, c gives them back in the order a, b, c. */
static void t_pool_id_lru(void **state)
{
    (void)state;
    kvreg_registry *reg = NULL;
    kvreg_pool *pools[KVREG_MAX_POOLS], *q = NULL;
    uint32_t order[3];
    assert_int_equal(kvreg_registry_new(&reg, NULL), KVREG_OK);
    for (unsigned i = 0; i < KVREG_MAX_POOLS; i++)
        assert_int_equal(kvreg_pool_new(&pools[i], reg, NULL), KVREG_OK);
    static const unsigned victims[3] = {200, 3, 77};
    for (int k = 0; k < 3; k++) {
        order[k] = kvreg_pool_id(pools[victims[k]]);
        kvreg_pool_free(pools[victims[k]]);
    }
    for (int k = 0; k < 3; k++) {
        assert_int_equal(kvreg_pool_new(&q, reg, NULL), KVREG_OK);
        assert_int_equal(kvreg_pool_id(q), order[k]);
    }
    kvreg_registry_free(reg);
}

/* Hash values an implementation might use as "empty" markers are ordinary hashes. */
static void t_edge_hash_values(void **state)
{
    (void)state;
    static const uint64_t edge[4] = {0, UINT64_MAX, UINT64_C(1) << 63, 1};
    kvreg_registry *reg = NULL;
    kvreg_pool *p = NULL;
    kvreg_block b[4], a = 0;
    kvreg_block_info info;
    assert_int_equal(kvreg_registry_new(&reg, NULL), KVREG_OK);
    assert_int_equal(kvreg_pool_new(&p, reg, "p"), KVREG_OK);
    for (int i = 0; i < 4; i++)
        assert_int_equal(kvt_registry_has(reg, edge[i]), 0);
    for (int i = 0; i < 4; i++) {
        b[i] = reg_ok(p, edge[i]);
        for (int j = 0; j < 4; j++)
            assert_int_equal(kvt_pool_has(p, edge[j]), j <= i);
    }
    assert_int_equal(stat_of(reg, KVREG_STAT_HASHES), 4);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(kvreg_acquire(p, edge[i], &a), KVREG_OK);
        assert_true(a == b[i]);
        assert_int_equal(kvreg_block_get_info(p, b[i], &info), KVREG_OK);
        assert_true(info.sequence_hash == edge[i]);
        assert_int_equal(kvreg_release(p, a), KVREG_OK);
        assert_int_equal(kvreg_release(p, b[i]), KVREG_OK);
        assert_int_equal(kvt_pool_has(p, edge[i]), 0);
        assert_int_equal(kvt_registry_has(reg, edge[i]), 0);
    }
    assert_int_equal(stat_of(reg, KVREG_STAT_HASHES), 0);
    kvreg_registry_free(reg);
}

static int destroyed;
static void on_destroy(void *ud)
{
    (void)ud;
    destroyed++;
}
static void on_event(const kvreg_event *ev, size_t n, void *ud)
{
    (void)ev;
    (void)n;
    (void)ud;
}

static void t_free_with_live_objects(void **state)
{
    (void)state;
    for (int poll = 0; poll < 2; poll++) {
        kvreg_registry *reg = NULL;
        kvreg_config *cfg = NULL;
        kvreg_pool *p = NULL, *q = NULL;
        kvreg_sequence *seq = NULL;
        kvreg_block out[3];
        uint32_t t[12];
        for (uint32_t i = 0; i < 12; i++)
            t[i] = i;
        destroyed = 0;
        assert_int_equal(kvreg_config_new(&cfg), KVREG_OK);
        assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_KEEP_TOKENS, 1), KVREG_OK);
        assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_DELIVERY, (uint64_t)poll), KVREG_OK);
        if (!poll)
            assert_int_equal(kvreg_config_set_event_fn(cfg, on_event, &destroyed, on_destroy), KVREG_OK);
        assert_int_equal(kvreg_registry_new(&reg, cfg), KVREG_OK);
        kvreg_config_free(cfg);
        assert_int_equal(kvreg_pool_new(&p, reg, "p"), KVREG_OK);
        assert_int_equal(kvreg_pool_new(&q, reg, "q"), KVREG_OK);
        assert_int_equal(kvreg_sequence_new(&seq, 4, 0), KVREG_OK);
        assert_int_equal(kvreg_sequence_extend(seq, t, 12, NULL), KVREG_OK);
        assert_int_equal(kvreg_register_sequence(p, seq, 0, 3, out, NULL, NULL), KVREG_OK);
        assert_int_equal(kvreg_register_sequence(q, seq, 1, 2, out, NULL, NULL), KVREG_OK);
        kvreg_pool_free(q); /* a retired pool among the live ones */
        kvreg_sequence_free(seq);
        if (poll)
            assert_int_equal(stat_of(reg, KVREG_STAT_EVENTS_QUEUED), 3);
        assert_true(stat_of(reg, KVREG_STAT_TOKEN_BYTES) >= 3 * 4 * sizeof(uint32_t));
        kvreg_registry_free(reg); /* emits nothing; frees pools, blocks, tokens and the queue */
        assert_int_equal(destroyed, poll ? 0 : 1);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_stale_double_release),
        cmocka_unit_test(t_tampered_handles),
        cmocka_unit_test(t_foreign_handles),
        cmocka_unit_test(t_use_after_pool_free),
        cmocka_unit_test(t_slot_reuse),
        cmocka_unit_test(t_pool_name_lifetime),
        cmocka_unit_test(t_pool_limit),
        cmocka_unit_test(t_pool_id_lru),
        cmocka_unit_test(t_edge_hash_values),
        cmocka_unit_test(t_free_with_live_objects),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
