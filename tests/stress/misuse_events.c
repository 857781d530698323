/* Misuse around events: calls from inside a callback (the re-entrancy contract at
 * kvreg_registry_set_event_fn), replacing and clearing the callback, and a full POLL queue
 * (drop + count + event_id gap). */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <kvreg.h>
#include "kvreg_answer.h"

static kvreg_block_desc desc_of(uint64_t h)
{
    kvreg_block_desc d;
    memset(&d, 0, sizeof d);
    d.sequence_hash = h;
    d.block_hash = h + 1000;
    return d;
}

static uint64_t stat_of(kvreg_registry *reg, uint32_t s)
{
    uint64_t v = 0;
    assert_int_equal(kvreg_registry_stat(reg, s, &v), KVREG_OK);
    return v;
}

/* ---- re-entrancy ------------------------------------------------------------------------ */
typedef struct rec {
    kvreg_registry *reg;
    kvreg_pool *pool, *victim;
    pthread_t thread;
    int depth, max_depth, calls;
    uint64_t ids[32];
    uint32_t kinds[32];
    uint64_t hashes[32];
    size_t n;
    int set_fn_status, poll_status;
    kvreg_block from_cb;
} rec;

/* On Register(1): query, acquire+release, register 2 and 3 (as a batch), free the victim pool
 * (holding 10), and try the two forbidden calls. All from inside the callback. */
static void reentrant_fn(const kvreg_event *ev, size_t n, void *ud)
{
    rec *r = ud;
    assert_true(pthread_equal(r->thread, pthread_self()));
    r->depth++;
    r->calls++;
    if (r->depth > r->max_depth)
        r->max_depth = r->depth;
    for (size_t i = 0; i < n; i++) {
        assert_true(r->n < 32);
        r->ids[r->n] = ev[i].event_id;
        r->kinds[r->n] = ev[i].kind;
        r->hashes[r->n++] = ev[i].sequence_hash;
        if (ev[i].kind != KVREG_EVENT_REGISTER || ev[i].sequence_hash != 1)
            continue;
        kvreg_block b = 0, out[2];
        kvreg_block_desc d[2] = {desc_of(2), desc_of(3)};
        int status[2];
        assert_int_equal(kvt_registry_has(r->reg, 1), 1);
        assert_int_equal(kvt_pool_has(r->pool, 1), 1);
        assert_int_equal(kvreg_acquire(r->pool, 1, &b), KVREG_OK);
        assert_int_equal(kvreg_release(r->pool, b), KVREG_OK);
        assert_int_equal(kvreg_register_batch(r->pool, d, 2, out, status, NULL), KVREG_OK);
        assert_int_equal(status[0], KVREG_OK);
        assert_int_equal(status[1], KVREG_OK);
        r->from_cb = out[0];
        kvreg_pool_free(r->victim);
        r->set_fn_status = kvreg_registry_set_event_fn(r->reg, NULL, NULL, NULL);
        r->poll_status = kvreg_registry_poll(r->reg, NULL, 0, NULL);
        /* events caused here come after this callback returns */
        assert_int_equal(r->n, 1);
    }
    r->depth--;
}

static void t_reentrancy(void **state)
{
    (void)state;
    rec r;
    kvreg_block b = 0;
    kvreg_block_desc d = desc_of(1), v = desc_of(10);
    memset(&r, 0, sizeof r);
    r.thread = pthread_self();
    assert_int_equal(kvreg_registry_new(&r.reg, NULL), KVREG_OK);
    assert_int_equal(kvreg_pool_new(&r.pool, r.reg, "p"), KVREG_OK);
    assert_int_equal(kvreg_pool_new(&r.victim, r.reg, "victim"), KVREG_OK);
    assert_int_equal(kvreg_register(r.victim, &v, &b), KVREG_OK); /* no callback yet: dropped */
    assert_int_equal(kvreg_registry_set_event_fn(r.reg, reentrant_fn, &r, NULL), KVREG_OK);
    assert_int_equal(kvreg_register(r.pool, &d, &b), KVREG_OK);
    /* everything was delivered before the outer call returned, in order, never nested */
    assert_int_equal(r.max_depth, 1);
    assert_int_equal(r.set_fn_status, KVREG_EBUSY);
    assert_int_equal(r.poll_status, KVREG_EINVAL);
    assert_int_equal(r.n, 4);
    for (size_t i = 0; i < r.n; i++)
        assert_int_equal(r.ids[i], 1 + i); /* id 0 went to the dropped Register(10) */
    assert_int_equal(r.kinds[0], KVREG_EVENT_REGISTER);
    assert_int_equal(r.hashes[0], 1);
    assert_int_equal(r.kinds[1], KVREG_EVENT_REGISTER);
    assert_int_equal(r.hashes[1], 2);
    assert_int_equal(r.kinds[2], KVREG_EVENT_REGISTER);
    assert_int_equal(r.hashes[2], 3);
    assert_int_equal(r.kinds[3], KVREG_EVENT_REMOVE);
    assert_int_equal(r.hashes[3], 10);
    assert_int_equal(kvt_pool_has(r.pool, 2), 1);
    assert_int_equal(kvreg_release(r.pool, r.from_cb), KVREG_OK);
    assert_int_equal(r.n, 5);
    assert_int_equal(r.kinds[4], KVREG_EVENT_REMOVE);
    assert_int_equal(stat_of(r.reg, KVREG_STAT_NEXT_EVENT_ID), 6);
    kvreg_registry_free(r.reg);
}

/* ---- replacing and clearing the callback ---------------------------------------------- */
typedef struct counter {
    int events, destroyed;
} counter;

static void count_fn(const kvreg_event *ev, size_t n, void *ud)
{
    (void)ev;
    ((counter *)ud)->events += (int)n;
}

static void count_destroy(void *ud)
{
    ((counter *)ud)->destroyed++;
}

static void t_replace_callback(void **state)
{
    (void)state;
    counter a = {0, 0}, b = {0, 0};
    kvreg_registry *reg = NULL;
    kvreg_config *cfg = NULL;
    kvreg_pool *p = NULL;
    kvreg_block h = 0;
    kvreg_block_desc d1 = desc_of(1), d2 = desc_of(2), d3 = desc_of(3);
    assert_int_equal(kvreg_config_new(&cfg), KVREG_OK);
    assert_int_equal(kvreg_config_set_event_fn(cfg, count_fn, &a, count_destroy), KVREG_OK);
    assert_int_equal(kvreg_registry_new(&reg, cfg), KVREG_OK);
    kvreg_config_free(cfg); /* the registry owns a now; freeing the config must not destroy it */
    assert_int_equal(a.destroyed, 0);
    assert_int_equal(kvreg_pool_new(&p, reg, "p"), KVREG_OK);
    assert_int_equal(kvreg_register(p, &d1, &h), KVREG_OK);
    assert_int_equal(a.events, 1);
    assert_int_equal(kvreg_registry_set_event_fn(reg, count_fn, &b, count_destroy), KVREG_OK);
    assert_int_equal(a.destroyed, 1);
    assert_int_equal(kvreg_register(p, &d2, &h), KVREG_OK);
    assert_int_equal(a.events, 1);
    assert_int_equal(b.events, 1);
    /* cleared: events are counted and dropped, and their ids are used up */
    assert_int_equal(kvreg_registry_set_event_fn(reg, NULL, NULL, NULL), KVREG_OK);
    assert_int_equal(b.destroyed, 1);
    assert_int_equal(kvreg_register(p, &d3, &h), KVREG_OK);
    assert_int_equal(stat_of(reg, KVREG_STAT_EVENTS_DROPPED), 1);
    assert_int_equal(stat_of(reg, KVREG_STAT_NEXT_EVENT_ID), 3);
    assert_int_equal(stat_of(reg, KVREG_STAT_EVENTS_REGISTER), 3);
    kvreg_registry_free(reg);
    assert_int_equal(a.destroyed, 1);
    assert_int_equal(b.destroyed, 1);
}

static void t_set_fn_in_poll_mode(void **state)
{
    (void)state;
    counter a = {0, 0};
    kvreg_registry *reg = NULL;
    kvreg_config *cfg = NULL;
    assert_int_equal(kvreg_config_new(&cfg), KVREG_OK);
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_DELIVERY, KVREG_DELIVERY_POLL), KVREG_OK);
    assert_int_equal(kvreg_registry_new(&reg, cfg), KVREG_OK);
    kvreg_config_free(cfg);
    assert_int_equal(kvreg_registry_set_event_fn(reg, count_fn, &a, count_destroy), KVREG_EINVAL);
    assert_int_equal(a.destroyed, 0); /* refused: the caller keeps user_data */
    kvreg_registry_free(reg);
    assert_int_equal(a.destroyed, 0);
}

/* ---- a full poll queue ------------------------------------------------------------------ */
static void t_full_poll_queue(void **state)
{
    (void)state;
    kvreg_registry *reg = NULL;
    kvreg_config *cfg = NULL;
    kvreg_pool *p = NULL;
    kvreg_block h[8];
    kvreg_event ev[8];
    size_t n = 0;
    assert_int_equal(kvreg_config_new(&cfg), KVREG_OK);
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_DELIVERY, KVREG_DELIVERY_POLL), KVREG_OK);
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_POLL_CAPACITY, 2), KVREG_OK);
    assert_int_equal(kvreg_registry_new(&reg, cfg), KVREG_OK);
    kvreg_config_free(cfg);
    assert_int_equal(kvreg_pool_new(&p, reg, "p"), KVREG_OK);
    for (uint64_t i = 0; i < 5; i++) {
        kvreg_block_desc d = desc_of(100 + i);
        assert_int_equal(kvreg_register(p, &d, &h[i]), KVREG_OK);
    }
    assert_int_equal(stat_of(reg, KVREG_STAT_EVENTS_QUEUED), 2);
    assert_int_equal(stat_of(reg, KVREG_STAT_EVENTS_DROPPED), 3);
    assert_int_equal(stat_of(reg, KVREG_STAT_NEXT_EVENT_ID), 5);
    assert_int_equal(stat_of(reg, KVREG_STAT_EVENTS_REGISTER), 5);
    assert_int_equal(kvreg_registry_poll(reg, ev, 8, &n), KVREG_OK);
    assert_int_equal(n, 2);
    assert_int_equal(ev[0].event_id, 0);
    assert_int_equal(ev[0].sequence_hash, 100);
    assert_int_equal(ev[1].event_id, 1);
    assert_int_equal(ev[1].sequence_hash, 101);
    /* the next event after the drops shows the gap 2..4 */
    assert_int_equal(kvreg_release(p, h[4]), KVREG_OK);
    assert_int_equal(kvreg_registry_poll(reg, ev, 1, &n), KVREG_OK);
    assert_int_equal(n, 1);
    assert_int_equal(ev[0].event_id, 5);
    assert_int_equal(ev[0].kind, KVREG_EVENT_REMOVE);
    assert_int_equal(ev[0].sequence_hash, 104);
    assert_int_equal(kvreg_registry_poll(reg, ev, 8, &n), KVREG_OK);
    assert_int_equal(n, 0);
    assert_int_equal(stat_of(reg, KVREG_STAT_EVENTS_QUEUED), 0);
    assert_int_equal(kvreg_registry_poll(reg, NULL, 8, &n), KVREG_EINVAL);
    assert_int_equal(kvreg_registry_poll(reg, ev, 8, NULL), KVREG_EINVAL);
    kvreg_registry_free(reg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_reentrancy),
        cmocka_unit_test(t_replace_callback),
        cmocka_unit_test(t_set_fn_in_poll_mode),
        cmocka_unit_test(t_full_poll_queue),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
