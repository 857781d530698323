/* kvreg_registry_clear: one Cleared event instead of a Remove per hash, every handle stale,
 * every pool empty and usable, the statistics and the stored tokens back to zero; from inside
 * a callback and in POLL mode; an empty registry still emits its Cleared event. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <kvreg.h>
#include <stdlib.h>
#include <string.h>

#include "recorder.h"

static const uint32_t TOK[4] = {5, 6, 7, 8};

static uint64_t stat(kvreg_registry *reg, uint32_t which) {
    uint64_t v = UINT64_MAX;
    assert_int_equal(kvreg_registry_stat(reg, which, &v), KVREG_OK);
    return v;
}

static void assert_cleared_event(const kvreg_event *e) {
    assert_int_equal(e->kind, KVREG_EVENT_CLEARED);
    assert_int_equal(e->pool_id, 0);
    assert_int_equal(e->medium, 0);
    assert_true(e->sequence_hash == 0 && e->block_hash == 0 && e->parent_sequence_hash == 0);
    assert_int_equal(e->has_parent, 0);
    assert_int_equal(e->n_tokens, 0);
    assert_int_equal(e->reserved32, 0);
    assert_true(e->reserved[0] == 0 && e->reserved[1] == 0 && e->reserved[2] == 0);
}

static kvreg_block_desc tok_desc(uint64_t h) {
    kvreg_block_desc d = hash_desc(h, h + 100, h > 1, h - 1);
    d.tokens = TOK;
    d.n_tokens = 4;
    return d;
}

/* Everything a clear promises, on a registry with two pools sharing some hashes, extra
 * references, and stored tokens. */
static void test_clear_drops_everything_with_one_event(void **state) {
    (void)state;
    recorder *rec = calloc(1, sizeof *rec);
    kvreg_registry *reg = recorder_registry(rec, 1);
    kvreg_pool *gpu = NULL, *cpu = NULL;
    kvreg_block hg[6] = {0}, hc[8] = {0}, extra = 0;
    assert_int_equal(kvreg_pool_new(&gpu, reg, "gpu"), KVREG_OK);
    assert_int_equal(kvreg_pool_new_medium(&cpu, reg, "cpu", KVREG_MEDIUM_CPU), KVREG_OK);
    for (uint64_t h = 1; h <= 5; h++) {
        kvreg_block_desc d = tok_desc(h);
        assert_int_equal(kvreg_register(gpu, &d, &hg[h]), KVREG_OK);
    }
    for (uint64_t h = 3; h <= 7; h++) {
        kvreg_block_desc d = tok_desc(h);
        assert_int_equal(kvreg_register(cpu, &d, &hc[h]), KVREG_OK);
    }
    assert_int_equal(kvreg_acquire(gpu, 2, &extra), KVREG_OK);
    assert_int_equal(rec->n, 7); /* 7 distinct hashes */
    assert_true(stat(reg, KVREG_STAT_HASHES) == 7);
    assert_true(stat(reg, KVREG_STAT_TOKEN_BYTES) == 7 * 4 * sizeof(uint32_t));

    assert_int_equal(kvreg_registry_clear(reg), KVREG_OK);
    assert_int_equal(rec->n, 8); /* exactly one event, delivered before the call returned */
    assert_cleared_event(&rec->events[7]);
    assert_true(rec->events[7].event_id == 7);
    assert_true(stat(reg, KVREG_STAT_NEXT_EVENT_ID) == 8);
    assert_true(stat(reg, KVREG_STAT_EVENTS_CLEARED) == 1);
    assert_true(stat(reg, KVREG_STAT_EVENTS_REMOVE) == 0);
    assert_true(stat(reg, KVREG_STAT_EVENTS_REGISTER) == 7);
    assert_true(stat(reg, KVREG_STAT_HASHES) == 0);
    assert_true(stat(reg, KVREG_STAT_TOKEN_BYTES) == 0);
    assert_true(stat(reg, KVREG_STAT_POOLS) == 2);
    assert_int_equal(kvreg_pool_size(gpu), 0);
    assert_int_equal(kvreg_pool_size(cpu), 0);

    for (uint64_t h = 1; h <= 7; h++) {
        int present = -1;
        kvreg_block b = 0;
        assert_int_equal(kvreg_registry_contains(reg, h, &present), KVREG_OK);
        assert_int_equal(present, 0);
        assert_int_equal(kvreg_pool_contains(gpu, h, &present), KVREG_OK);
        assert_int_equal(present, 0);
        assert_int_equal(kvreg_acquire(cpu, h, &b), KVREG_ENOENT);
    }
    /* Every handle is stale, for every query. */
    for (uint64_t h = 1; h <= 5; h++) {
        kvreg_block_info info;
        uint32_t rc = 0, tok[4];
        size_t nt = 0;
        assert_int_equal(kvreg_block_get_info(gpu, hg[h], &info), KVREG_ESTALE);
        assert_int_equal(kvreg_block_refcount(gpu, hg[h], &rc), KVREG_ESTALE);
        assert_int_equal(kvreg_block_tokens(gpu, hg[h], tok, 4, &nt), KVREG_ESTALE);
        assert_int_equal(kvreg_release(gpu, hg[h]), KVREG_ESTALE);
    }
    for (uint64_t h = 3; h <= 7; h++) assert_int_equal(kvreg_release(cpu, hc[h]), KVREG_ESTALE);
    assert_int_equal(kvreg_release(gpu, extra), KVREG_ESTALE);
    assert_int_equal(rec->n, 8); /* stale releases emit nothing */

    /* Freeing a cleared pool has nothing to remove. */
    kvreg_pool_free(cpu);
    assert_int_equal(rec->n, 8);
    kvreg_registry_free(reg);
    free(rec);
}

/* Pools are usable afterwards; a handle from before the clear is never taken for the block
 * registered again in its place (generations), and the new blocks emit Register / Remove. */
static void test_pools_reusable_and_old_handles_stay_stale(void **state) {
    (void)state;
    recorder *rec = calloc(1, sizeof *rec);
    kvreg_registry *reg = recorder_registry(rec, 0);
    kvreg_pool *gpu = NULL;
    kvreg_block before[4] = {0}, after[4] = {0};
    assert_int_equal(kvreg_pool_new(&gpu, reg, "gpu"), KVREG_OK);
    for (uint64_t h = 0; h < 4; h++) {
        kvreg_block_desc d = hash_desc(10 + h, h, 0, 0);
        assert_int_equal(kvreg_register(gpu, &d, &before[h]), KVREG_OK);
    }
    assert_int_equal(kvreg_registry_clear(reg), KVREG_OK);
    for (uint64_t h = 0; h < 4; h++) {
        kvreg_block_desc d = hash_desc(10 + h, h, 0, 0);
        assert_int_equal(kvreg_register(gpu, &d, &after[h]), KVREG_OK);
        assert_true(after[h] != before[h]);
    }
    assert_int_equal(rec->n, 9);
    for (size_t i = 5; i < 9; i++) {
        assert_int_equal(rec->events[i].kind, KVREG_EVENT_REGISTER);
        assert_true(rec->events[i].event_id == i);
    }
    assert_int_equal(kvreg_pool_size(gpu), 4);
    for (uint64_t h = 0; h < 4; h++) {
        uint32_t rc = 0;
        assert_int_equal(kvreg_release(gpu, before[h]), KVREG_ESTALE);
        assert_int_equal(kvreg_block_refcount(gpu, after[h], &rc), KVREG_OK);
        assert_int_equal(rc, 1); /* the stale release did not touch the new block */
    }
    for (uint64_t h = 0; h < 4; h++) assert_int_equal(kvreg_release(gpu, after[h]), KVREG_OK);
    assert_int_equal(rec->n, 13);
    assert_int_equal(rec->events[12].kind, KVREG_EVENT_REMOVE);
    /* A pool made after the clear works too. */
    kvreg_pool *late = NULL;
    kvreg_block b = 0;
    kvreg_block_desc d = hash_desc(99, 9, 0, 0);
    assert_int_equal(kvreg_pool_new(&late, reg, "late"), KVREG_OK);
    assert_int_equal(kvreg_register(late, &d, &b), KVREG_OK);
    assert_int_equal(kvreg_pool_size(late), 1);
    kvreg_registry_free(reg);
    free(rec);
}

/* Decision (documented in kvreg.h): every clear emits its Cleared event, also when nothing
 * was registered, so a consumer can count resets. */
static void test_clear_of_empty_registry_still_emits(void **state) {
    (void)state;
    recorder *rec = calloc(1, sizeof *rec);
    kvreg_registry *reg = recorder_registry(rec, 0);
    assert_int_equal(kvreg_registry_clear(reg), KVREG_OK);
    assert_int_equal(kvreg_registry_clear(reg), KVREG_OK);
    assert_int_equal(rec->n, 2);
    assert_cleared_event(&rec->events[0]);
    assert_cleared_event(&rec->events[1]);
    assert_true(rec->events[0].event_id == 0 && rec->events[1].event_id == 1);
    assert_true(stat(reg, KVREG_STAT_EVENTS_CLEARED) == 2);
    assert_int_equal(kvreg_registry_clear(NULL), KVREG_EINVAL);
    kvreg_registry_free(reg);
    free(rec);
}

/* From a callback: the clear's event comes after the event being delivered and before the
 * events of the callback's later calls, all delivered by this thread before the outer call
 * returns; the hash registered before the clear is gone, the one after it stays. */
typedef struct inner {
    kvreg_registry *reg; /* the registry the callback clears */
    kvreg_pool *pool;
    int step;
    int clear_rc, reg_rc;
    kvreg_block after;
    size_t n;
    kvreg_event ev[8];
} inner;

static void clearing_fn(const kvreg_event *events, size_t n, void *ud) {
    inner *c = ud;
    for (size_t i = 0; i < n && c->n < 8; i++) c->ev[c->n++] = events[i];
    if (c->step++ == 0) {
        kvreg_block_desc d = hash_desc(2, 2, 1, 1);
        c->clear_rc = kvreg_registry_clear(c->reg);
        c->reg_rc = kvreg_register(c->pool, &d, &c->after);
    }
}

static void test_clear_from_callback(void **state) {
    (void)state;
    inner *c = calloc(1, sizeof *c);
    kvreg_block b = 0;
    assert_int_equal(kvreg_registry_new(&c->reg, NULL), KVREG_OK);
    assert_int_equal(kvreg_registry_set_event_fn(c->reg, clearing_fn, c, NULL), KVREG_OK);
    assert_int_equal(kvreg_pool_new_medium(&c->pool, c->reg, "cpu", KVREG_MEDIUM_CPU), KVREG_OK);
    kvreg_block_desc d = hash_desc(1, 1, 0, 0);
    assert_int_equal(kvreg_register(c->pool, &d, &b), KVREG_OK);
    assert_int_equal(c->clear_rc, KVREG_OK);
    assert_int_equal(c->reg_rc, KVREG_OK);
    assert_int_equal(c->n, 3);
    assert_int_equal(c->ev[0].kind, KVREG_EVENT_REGISTER);
    assert_true(c->ev[0].sequence_hash == 1);
    assert_cleared_event(&c->ev[1]);
    assert_int_equal(c->ev[2].kind, KVREG_EVENT_REGISTER);
    assert_true(c->ev[2].sequence_hash == 2);
    assert_int_equal(c->ev[2].medium, KVREG_MEDIUM_CPU);
    for (int i = 0; i < 3; i++) assert_true(c->ev[i].event_id == (uint64_t)i);
    int present = -1;
    assert_int_equal(kvreg_registry_contains(c->reg, 1, &present), KVREG_OK);
    assert_int_equal(present, 0);
    assert_int_equal(kvreg_registry_contains(c->reg, 2, &present), KVREG_OK);
    assert_int_equal(present, 1);
    assert_int_equal(kvreg_release(c->pool, b), KVREG_ESTALE);
    assert_int_equal(kvreg_release(c->pool, c->after), KVREG_OK);
    kvreg_registry_free(c->reg);
        free(c);
}

/* POLL: the Cleared event is queued in id order between the events around it. */
static void test_clear_in_poll_mode(void **state) {
    (void)state;
    kvreg_registry *reg = poll_registry(64);
    kvreg_pool *pool = NULL;
    kvreg_block a = 0, b = 0;
    kvreg_event ev[8];
    size_t n = 0;
    assert_int_equal(kvreg_pool_new_medium(&pool, reg, "disk", KVREG_MEDIUM_STORAGE), KVREG_OK);
    kvreg_block_desc d1 = hash_desc(1, 1, 0, 0), d2 = hash_desc(2, 2, 0, 0);
    assert_int_equal(kvreg_register(pool, &d1, &a), KVREG_OK);
    assert_int_equal(kvreg_registry_clear(reg), KVREG_OK);
    assert_int_equal(kvreg_register(pool, &d2, &b), KVREG_OK);
    assert_int_equal(kvreg_release(pool, a), KVREG_ESTALE);
    assert_int_equal(kvreg_release(pool, b), KVREG_OK);
    assert_int_equal(kvreg_registry_poll(reg, ev, 8, &n), KVREG_OK);
    assert_int_equal(n, 4);
    assert_int_equal(ev[0].kind, KVREG_EVENT_REGISTER);
    assert_cleared_event(&ev[1]);
    assert_int_equal(ev[2].kind, KVREG_EVENT_REGISTER);
    assert_int_equal(ev[3].kind, KVREG_EVENT_REMOVE);
    assert_int_equal(ev[3].medium, KVREG_MEDIUM_STORAGE);
    for (size_t i = 0; i < 4; i++) assert_true(ev[i].event_id == i);
    assert_true(stat(reg, KVREG_STAT_EVENTS_CLEARED) == 1);
    assert_true(stat(reg, KVREG_STAT_EVENTS_REMOVE) == 1);
    kvreg_registry_free(reg);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clear_drops_everything_with_one_event),
        cmocka_unit_test(test_pools_reusable_and_old_handles_stay_stale),
        cmocka_unit_test(test_clear_of_empty_registry_still_emits),
        cmocka_unit_test(test_clear_from_callback),
        cmocka_unit_test(test_clear_in_poll_mode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
