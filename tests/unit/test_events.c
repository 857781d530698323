/* Events: the five event tests of the design we replaced (Dynamo's block registry), restated
 * through the C API, then ordering, batching, re-entrancy, callback replacement and the POLL
 * queue: one Register per hash, a Remove only after its last pool lets go, a call's events
 * together and in order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <kvreg.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "recorder.h"
#include "kvreg_answer.h"

static const uint32_t T12[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};

typedef struct fixture {
    recorder rec;
    kvreg_registry *reg;
    kvreg_pool *pool;
    kvreg_sequence *seq;
    uint64_t h0, h1;
} fixture;

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    kvreg_block_info b;
    f->reg = recorder_registry(&f->rec, 0);
    if (kvreg_pool_new(&f->pool, f->reg, "G1")) return -1;
    if (kvreg_sequence_new(&f->seq, 4, 1337) || kvreg_sequence_extend(f->seq, T12, 10, NULL)) return -1;
    kvreg_sequence_block(f->seq, 0, &b);
    f->h0 = b.sequence_hash;
    kvreg_sequence_block(f->seq, 1, &b);
    f->h1 = b.sequence_hash;
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    kvreg_registry_free(f->reg);
    kvreg_sequence_free(f->seq);
    free(f);
    return 0;
}

/* seed: test_mock_event_manager_with_single_publish_handle */
static void test_seed_single_handle_register_then_remove(void **state) {
    fixture *f = *state;
    kvreg_block h = 0;
    assert_int_equal(kvreg_register_sequence_block(f->pool, f->seq, 0, &h), KVREG_OK);
    assert_int_equal(f->rec.calls, 1);
    assert_int_equal(f->rec.call_sizes[0], 1);
    assert_int_equal(f->rec.events[0].kind, KVREG_EVENT_REGISTER);
    assert_true(f->rec.events[0].sequence_hash == UINT64_C(14643705804678351452));
    assert_int_equal(kvreg_release(f->pool, h), KVREG_OK);
    assert_int_equal(f->rec.calls, 2);
    assert_int_equal(f->rec.call_sizes[1], 1);
    assert_int_equal(f->rec.events[1].kind, KVREG_EVENT_REMOVE);
    assert_true(f->rec.events[1].sequence_hash == UINT64_C(14643705804678351452));
    assert_int_equal(f->rec.n, 2); /* and nothing more */
}

/* seed: test_mock_event_manager_single_publish_handle_removed — a second reference keeps the
 * registration alive; Remove comes only when the last one goes, each event exactly once. */
static void test_seed_extra_reference_delays_remove(void **state) {
    fixture *f = *state;
    kvreg_block h = 0, h2 = 0;
    assert_int_equal(kvreg_register_sequence_block(f->pool, f->seq, 0, &h), KVREG_OK);
    assert_int_equal(kvreg_acquire(f->pool, f->h0, &h2), KVREG_OK);
    assert_int_equal(f->rec.n, 1);
    assert_int_equal(kvreg_release(f->pool, h), KVREG_OK);
    assert_int_equal(f->rec.n, 1);
    assert_int_equal(kvreg_release(f->pool, h2), KVREG_OK);
    assert_int_equal(f->rec.n, 2);
    assert_int_equal(f->rec.events[1].kind, KVREG_EVENT_REMOVE);
    assert_int_equal(f->rec.calls, 2);
}

/* seed: test_mock_event_manager_publisher_multiple_handles_removed — two registrations in one
 * batch arrive as ONE callback with both Registers, in input order; Removes come separately. */
static void test_seed_batch_of_two(void **state) {
    fixture *f = *state;
    kvreg_block h[2];
    size_t n = 0;
    assert_int_equal(kvreg_register_sequence(f->pool, f->seq, 0, 2, h, NULL, &n), KVREG_OK);
    assert_int_equal(n, 2);
    assert_int_equal(f->rec.calls, 1);
    assert_int_equal(f->rec.call_sizes[0], 2);
    assert_true(f->rec.events[0].sequence_hash == f->h0);
    assert_true(f->rec.events[1].sequence_hash == f->h1);
    assert_int_equal(kvreg_release(f->pool, h[0]), KVREG_OK);
    assert_int_equal(f->rec.calls, 2);
    assert_true(f->rec.events[2].sequence_hash == f->h0 && f->rec.events[2].kind == KVREG_EVENT_REMOVE);
    assert_int_equal(kvreg_release(f->pool, h[1]), KVREG_OK);
    assert_int_equal(f->rec.calls, 3);
    assert_true(f->rec.events[3].sequence_hash == f->h1 && f->rec.events[3].kind == KVREG_EVENT_REMOVE);
    assert_int_equal(f->rec.n, 4);
}

/* seed: test_publisher_empty_drop */
static void test_seed_empty_batch_emits_nothing(void **state) {
    fixture *f = *state;
    size_t n = 7;
    assert_int_equal(kvreg_register_batch(f->pool, NULL, 0, NULL, NULL, &n), KVREG_OK);
    assert_int_equal(n, 0);
    assert_int_equal(kvreg_release_batch(f->pool, NULL, 0, NULL, NULL), KVREG_OK);
    assert_int_equal(f->rec.calls, 0);
}

/* seed: test_publisher_publish_multiple_times — publish, then drop the only reference:
 * Register then Remove; publishing again emits nothing. */
static void test_seed_publish_then_drop(void **state) {
    fixture *f = *state;
    kvreg_block h = 0;
    kvreg_block_desc d = seq_desc(f->seq, 0);
    assert_int_equal(kvreg_register_batch(f->pool, &d, 1, &h, NULL, NULL), KVREG_OK);
    assert_int_equal(kvreg_release_batch(f->pool, &h, 1, NULL, NULL), KVREG_OK);
    assert_int_equal(f->rec.n, 2);
    assert_int_equal(f->rec.events[0].kind, KVREG_EVENT_REGISTER);
    assert_int_equal(f->rec.events[1].kind, KVREG_EVENT_REMOVE);
    assert_int_equal(kvreg_register_batch(f->pool, NULL, 0, NULL, NULL, NULL), KVREG_OK);
    assert_int_equal(f->rec.n, 2);
}

static void test_event_fields_and_ids(void **state) {
    fixture *f = *state;
    kvreg_block h[2];
    assert_int_equal(kvreg_register_sequence(f->pool, f->seq, 0, 2, h, NULL, NULL), KVREG_OK);
    const kvreg_event *e = f->rec.events;
    assert_int_equal(e[0].event_id, 0);
    assert_int_equal(e[1].event_id, 1);
    assert_int_equal(e[0].has_parent, 0);
    assert_true(e[0].parent_sequence_hash == 0);
    assert_int_equal(e[1].has_parent, 1);
    assert_true(e[1].parent_sequence_hash == f->h0); /* parent announced before child */
    assert_true(e[1].block_hash == UINT64_C(16777012769546811212));
    assert_int_equal(e[1].n_tokens, 4);
    assert_int_equal(f->rec.tokens[1][0], 5);
    assert_int_equal(e[1].pool_id, kvreg_pool_id(f->pool));
    assert_int_equal(e[1].reserved32, 0);
    for (size_t i = 0; i < sizeof e[1].reserved / sizeof e[1].reserved[0]; i++)
        assert_true(e[1].reserved[i] == 0);
    uint64_t next = 0;
    assert_int_equal(kvreg_registry_stat(f->reg, KVREG_STAT_NEXT_EVENT_ID, &next), KVREG_OK);
    assert_int_equal(next, 2);
    assert_int_equal(kvreg_release_batch(f->pool, h, 2, NULL, NULL), KVREG_OK);
    assert_int_equal(f->rec.calls, 2); /* one call for the release batch */
    assert_int_equal(e[2].event_id, 2);
    assert_int_equal(e[3].event_id, 3);
}

/* Re-entrancy: a callback releases the block whose Register it is handed. The Remove is
 * delivered after the callback returns, on the same thread, in order. */
typedef struct reenter {
    recorder rec;
    kvreg_pool *pool;
    kvreg_block handle;
    int release_rc, set_fn_rc, acquire_rc;
    int depth, max_depth;
} reenter;

static void reenter_fn(const kvreg_event *ev, size_t n, void *ud) {
    reenter *r = ud;
    r->depth++;
    if (r->depth > r->max_depth) r->max_depth = r->depth;
    recorder_fn(ev, n, &r->rec);
    if (ev[0].kind == KVREG_EVENT_REGISTER) {
        kvreg_block extra = 0;
        r->acquire_rc = kvreg_acquire(r->pool, ev[0].sequence_hash, &extra);
        if (r->acquire_rc == KVREG_OK) kvreg_release(r->pool, extra);
        r->release_rc = kvreg_release(r->pool, r->handle);
        r->set_fn_rc = kvreg_registry_set_event_fn(NULL, NULL, NULL, NULL);
    }
    r->depth--;
}

static void test_release_from_inside_callback(void **state) {
    (void)state;
    reenter *r = calloc(1, sizeof *r);
    kvreg_config *cfg = NULL;
    kvreg_registry *reg = NULL;
    assert_int_equal(kvreg_config_new(&cfg), KVREG_OK);
    assert_int_equal(kvreg_config_set_event_fn(cfg, reenter_fn, r, NULL), KVREG_OK);
    assert_int_equal(kvreg_registry_new(&reg, cfg), KVREG_OK);
    kvreg_config_free(cfg);
    assert_int_equal(kvreg_pool_new(&r->pool, reg, "p"), KVREG_OK);
    kvreg_block_desc d = hash_desc(77, 78, 0, 0);
    kvreg_block h = 0;
    /* the callback cannot know the new handle yet: its release must fail cleanly (ESTALE),
     * while acquire/release of another reference from inside the callback works */
    r->handle = KVREG_BLOCK_NONE;
    assert_int_equal(kvreg_register(r->pool, &d, &h), KVREG_OK);
    assert_int_equal(r->release_rc, KVREG_ESTALE);
    assert_int_equal(r->acquire_rc, KVREG_OK); /* the block is visible from the callback */
    assert_int_equal(kvreg_release(r->pool, h), KVREG_OK);
    assert_int_equal(r->rec.n, 2);
    assert_int_equal(r->max_depth, 1); /* never re-entered the callback recursively */
    assert_int_equal(r->set_fn_rc, KVREG_EINVAL);
    kvreg_registry_free(reg);
    free(r);
}

/* A callback that releases the block it was told about: register with a known handle by
 * registering in a second pool first. Checks the Remove is delivered after, same thread. */
typedef struct chain {
    recorder rec;
    kvreg_registry *reg;
    kvreg_pool *a;
    kvreg_block ha;
    int armed; /* act on the next Register only */
    int busy_rc;
    int freed_pool;
} chain;

static void chain_fn(const kvreg_event *ev, size_t n, void *ud) {
    chain *c = ud;
    recorder_fn(ev, n, &c->rec);
    if (ev[0].kind == KVREG_EVENT_REGISTER && c->armed) {
        c->armed = 0;
        kvreg_release(c->a, c->ha); /* last reference of this hash -> Remove, deferred */
        c->ha = KVREG_BLOCK_NONE;
        c->busy_rc = kvreg_registry_set_event_fn(c->reg, NULL, NULL, NULL);
        kvreg_pool_free(c->a); /* allowed from a callback */
        c->freed_pool = 1;
    }
}

static void test_reentrant_release_and_pool_free(void **state) {
    (void)state;
    chain *c = calloc(1, sizeof *c);
    kvreg_config *cfg = NULL;
    kvreg_pool *b = NULL;
    assert_int_equal(kvreg_config_new(&cfg), KVREG_OK);
    assert_int_equal(kvreg_config_set_event_fn(cfg, chain_fn, c, NULL), KVREG_OK);
    assert_int_equal(kvreg_registry_new(&c->reg, cfg), KVREG_OK);
    kvreg_config_free(cfg);
    assert_int_equal(kvreg_pool_new(&c->a, c->reg, "a"), KVREG_OK);
    assert_int_equal(kvreg_pool_new(&b, c->reg, "b"), KVREG_OK);
    kvreg_block_desc d1 = hash_desc(1, 1, 0, 0), d2 = hash_desc(2, 2, 1, 1);
    kvreg_block hb = 0;
    c->ha = KVREG_BLOCK_NONE;
    assert_int_equal(kvreg_register(c->a, &d1, &c->ha), KVREG_OK); /* event 0: Register(1) */
    assert_int_equal(c->rec.n, 1);
    c->armed = 1;
    /* registering 2 in B triggers the callback, which releases 1 from A and frees A */
    assert_int_equal(kvreg_register(b, &d2, &hb), KVREG_OK);
    assert_int_equal(c->busy_rc, KVREG_EBUSY);
    assert_int_equal(c->freed_pool, 1);
    assert_int_equal(c->rec.n, 3);
    assert_int_equal(c->rec.events[1].kind, KVREG_EVENT_REGISTER);
    assert_true(c->rec.events[1].sequence_hash == 2);
    assert_int_equal(c->rec.events[2].kind, KVREG_EVENT_REMOVE);
    assert_true(c->rec.events[2].sequence_hash == 1);
    assert_int_equal(c->rec.events[2].event_id, 2);
    assert_int_equal(kvt_registry_has(c->reg, 1), 0);
    assert_int_equal(kvt_registry_has(c->reg, 2), 1);
    kvreg_registry_free(c->reg);
    free(c);
}

static void test_set_event_fn_replaces_and_destroys(void **state) {
    fixture *f = *state;
    recorder *second = calloc(1, sizeof *second);
    kvreg_block h = 0;
    assert_int_equal(kvreg_register_sequence_block(f->pool, f->seq, 0, &h), KVREG_OK);
    assert_int_equal(kvreg_registry_set_event_fn(f->reg, recorder_fn, second, recorder_destroy), KVREG_OK);
    assert_int_equal(f->rec.destroyed, 1); /* the old user_data is released at once */
    assert_int_equal(kvreg_release(f->pool, h), KVREG_OK);
    assert_int_equal(f->rec.n, 1);
    assert_int_equal(second->n, 1);
    assert_int_equal(second->events[0].event_id, 1);
    /* clearing: events are then counted as dropped (ids still advance) */
    assert_int_equal(kvreg_registry_set_event_fn(f->reg, NULL, NULL, NULL), KVREG_OK);
    assert_int_equal(second->destroyed, 1);
    assert_int_equal(kvreg_register_sequence_block(f->pool, f->seq, 0, &h), KVREG_OK);
    uint64_t dropped = 0;
    assert_int_equal(kvreg_registry_stat(f->reg, KVREG_STAT_EVENTS_DROPPED, &dropped), KVREG_OK);
    assert_int_equal(dropped, 1);
    assert_int_equal(kvreg_release(f->pool, h), KVREG_OK);
    f->rec.destroyed = 0; /* teardown expects nothing more from the first recorder */
    free(second);
}

static void test_poll_mode_drains_in_order(void **state) {
    fixture *f = *state;
    kvreg_registry *reg = poll_registry(16);
    kvreg_pool *p = NULL;
    kvreg_block h[2];
    kvreg_event ev[8];
    size_t n = 0;
    assert_int_equal(kvreg_pool_new(&p, reg, "p"), KVREG_OK);
    assert_int_equal(kvreg_registry_poll(reg, ev, 8, &n), KVREG_OK);
    assert_int_equal(n, 0);
    assert_int_equal(kvreg_register_sequence(p, f->seq, 0, 2, h, NULL, NULL), KVREG_OK);
    assert_int_equal(kvreg_release(p, h[1]), KVREG_OK);
    uint64_t queued = 0;
    assert_int_equal(kvreg_registry_stat(reg, KVREG_STAT_EVENTS_QUEUED, &queued), KVREG_OK);
    assert_int_equal(queued, 3);
    assert_int_equal(kvreg_registry_poll(reg, ev, 2, &n), KVREG_OK);
    assert_int_equal(n, 2);
    assert_int_equal(ev[0].event_id, 0);
    assert_true(ev[0].sequence_hash == f->h0);
    assert_int_equal(ev[1].n_tokens, 4);
    assert_int_equal(ev[1].tokens[3], 8); /* valid until the next poll */
    assert_int_equal(kvreg_registry_poll(reg, ev, 8, &n), KVREG_OK);
    assert_int_equal(n, 1);
    assert_int_equal(ev[0].kind, KVREG_EVENT_REMOVE);
    assert_int_equal(ev[0].event_id, 2);
    /* inline-only and poll-only calls are refused in the other mode */
    assert_int_equal(kvreg_registry_set_event_fn(reg, recorder_fn, &f->rec, NULL), KVREG_EINVAL);
    assert_int_equal(kvreg_registry_poll(f->reg, ev, 8, &n), KVREG_EINVAL);
    kvreg_release(p, h[0]);
    kvreg_registry_free(reg);
}

static void test_poll_full_queue_drops_and_counts(void **state) {
    (void)state;
    kvreg_registry *reg = poll_registry(2);
    kvreg_pool *p = NULL;
    kvreg_block h[3];
    kvreg_event ev[4];
    size_t n = 0;
    uint64_t dropped = 0;
    assert_int_equal(kvreg_pool_new(&p, reg, "p"), KVREG_OK);
    for (uint64_t i = 0; i < 3; i++) {
        kvreg_block_desc d = hash_desc(100 + i, i, 0, 0);
        assert_int_equal(kvreg_register(p, &d, &h[i]), KVREG_OK); /* state changes regardless */
    }
    assert_int_equal(kvreg_registry_stat(reg, KVREG_STAT_EVENTS_DROPPED, &dropped), KVREG_OK);
    assert_int_equal(dropped, 1);
    assert_int_equal(kvt_registry_has(reg, 102), 1);
    assert_int_equal(kvreg_registry_poll(reg, ev, 4, &n), KVREG_OK);
    assert_int_equal(n, 2);
    assert_int_equal(ev[0].event_id, 0);
    assert_int_equal(ev[1].event_id, 1);
    assert_int_equal(kvreg_release(p, h[0]), KVREG_OK);
    assert_int_equal(kvreg_registry_poll(reg, ev, 4, &n), KVREG_OK);
    assert_int_equal(n, 1);
    assert_int_equal(ev[0].event_id, 3); /* id 2 was dropped: the consumer sees the gap */
    kvreg_registry_free(reg);
}

static void test_config_rejects_callback_in_poll_mode(void **state) {
    fixture *f = *state;
    kvreg_config *cfg = NULL;
    kvreg_registry *reg = NULL;
    assert_int_equal(kvreg_config_new(&cfg), KVREG_OK);
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_DELIVERY, KVREG_DELIVERY_POLL), KVREG_OK);
    assert_int_equal(kvreg_config_set_event_fn(cfg, recorder_fn, &f->rec, recorder_destroy), KVREG_OK);
    assert_int_equal(kvreg_registry_new(&reg, cfg), KVREG_EINVAL);
    assert_int_equal(f->rec.destroyed, 0); /* on failure the caller keeps user_data */
    kvreg_config_free(cfg);
}

/* Two threads, each with its own pool, hammer the same few hashes. Whatever the interleaving,
 * the delivered stream has contiguous ids and strictly alternating Register/Remove per hash,
 * and every callback sees only events its own thread caused. */
#define MT_HASHES 8
#define MT_ROUNDS 20000

typedef struct mt {
    kvreg_pool *pool[2];
    int state[MT_HASHES]; /* 0 = absent, 1 = registered, per the event stream */
    uint64_t next_id;
    int bad;
    uint64_t events;
} mt;

static void mt_fn(const kvreg_event *ev, size_t n, void *ud) {
    mt *m = ud;
    for (size_t i = 0; i < n; i++) {
        size_t k = (size_t)(ev[i].sequence_hash - 1000);
        if (ev[i].event_id != m->next_id) m->bad = 1;
        m->next_id = ev[i].event_id + 1;
        if (k >= MT_HASHES) { m->bad = 1; continue; }
        if (ev[i].kind == KVREG_EVENT_REGISTER) {
            if (m->state[k] != 0) m->bad = 1;
            m->state[k] = 1;
        } else {
            if (m->state[k] != 1) m->bad = 1;
            m->state[k] = 0;
        }
        m->events++;
    }
}

typedef struct mt_arg {
    mt *m;
    int t;
} mt_arg;

static void *mt_worker(void *p) {
    mt_arg *a = p;
    uint64_t x = 0x9E3779B97F4A7C15ull * (uint64_t)(a->t + 1);
    kvreg_block held[MT_HASHES] = {0};
    for (int r = 0; r < MT_ROUNDS; r++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        size_t k = (size_t)(x % MT_HASHES);
        if (held[k]) {
            if (kvreg_release(a->m->pool[a->t], held[k]) != KVREG_OK) a->m->bad = 2;
            held[k] = 0;
        } else {
            kvreg_block_desc d = hash_desc(1000 + k, k, 0, 0);
            if (kvreg_register(a->m->pool[a->t], &d, &held[k]) != KVREG_OK) a->m->bad = 3;
        }
    }
    for (size_t k = 0; k < MT_HASHES; k++)
        if (held[k]) kvreg_release(a->m->pool[a->t], held[k]);
    return NULL;
}

static void test_two_threads_keep_per_hash_order(void **state) {
    (void)state;
    mt *m = calloc(1, sizeof *m);
    kvreg_config *cfg = NULL;
    kvreg_registry *reg = NULL;
    pthread_t th[2];
    mt_arg args[2] = {{m, 0}, {m, 1}};
    assert_int_equal(kvreg_config_new(&cfg), KVREG_OK);
    assert_int_equal(kvreg_config_set_event_fn(cfg, mt_fn, m, NULL), KVREG_OK);
    assert_int_equal(kvreg_registry_new(&reg, cfg), KVREG_OK);
    kvreg_config_free(cfg);
    assert_int_equal(kvreg_pool_new(&m->pool[0], reg, "t0"), KVREG_OK);
    assert_int_equal(kvreg_pool_new(&m->pool[1], reg, "t1"), KVREG_OK);
    for (int t = 0; t < 2; t++) assert_int_equal(pthread_create(&th[t], NULL, mt_worker, &args[t]), 0);
    for (int t = 0; t < 2; t++) assert_int_equal(pthread_join(th[t], NULL), 0);
    assert_int_equal(m->bad, 0);
    for (size_t k = 0; k < MT_HASHES; k++) assert_int_equal(m->state[k], 0);
    uint64_t next = 0;
    assert_int_equal(kvreg_registry_stat(reg, KVREG_STAT_NEXT_EVENT_ID, &next), KVREG_OK);
    assert_true(next == m->events && m->events > 0);
    kvreg_registry_free(reg);
    free(m);
}

/* A call with more events than the batch holds inline, and more than one delivery chunk:
 * every event arrives, in input order, ids contiguous, each callback at most 1024 events.
 * (Regression: after the first chunk was delivered, the next events overflowed the inline
 * buffer; found by kvreg-bench's big-batch smoke test.) */
static void test_big_batch_chunks_in_order(void **state) {
    fixture *f = *state;
    const size_t N = 3000;
    kvreg_block_desc *d = calloc(N, sizeof *d);
    kvreg_block *h = calloc(N, sizeof *h);
    size_t n = 0;
    for (size_t i = 0; i < N; i++) d[i] = hash_desc(5000 + i, i, i > 0, 5000 + i - 1);
    assert_int_equal(kvreg_register_batch(f->pool, d, N, h, NULL, &n), KVREG_OK);
    assert_int_equal(n, N);
    assert_int_equal(f->rec.n, N);
    for (size_t i = 0; i < N; i++) {
        assert_int_equal(f->rec.events[i].event_id, i);
        assert_true(f->rec.events[i].sequence_hash == 5000 + i);
    }
    for (size_t c = 0; c < f->rec.calls; c++) assert_true(f->rec.call_sizes[c] <= 1024);
    assert_true(f->rec.calls >= 3);
    assert_int_equal(kvreg_release_batch(f->pool, h, N, NULL, &n), KVREG_OK);
    assert_int_equal(n, N);
    assert_int_equal(kvt_registry_has(f->reg, 5000), 0);
    free(d);
    free(h);
}

/* Tokens of every size reach the consumer intact, across several laps of the event ring (4096
 * slots), so each slot carries in turn short blocks (kept in the slot), middling ones (in the
 * slot's part of an arena) and long ones (in a buffer of its own): 1 to 300 tokens. Token k of
 * block i is i * 1000 + k. INLINE (checked in the callback) and POLL (checked as polled). */
static const uint32_t TOKEN_SIZES[] = {1, 15, 16, 17, 32, 63, 64, 65, 300, 16, 5};
#define N_SIZES (sizeof TOKEN_SIZES / sizeof TOKEN_SIZES[0])
#define TOKEN_BLOCKS 10000u

typedef struct token_check {
    size_t registers, bad;
} token_check;

static void check_tokens(token_check *c, const kvreg_event *ev, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (ev[i].kind != KVREG_EVENT_REGISTER) continue;
        const uint64_t b = ev[i].sequence_hash - 1;
        const uint32_t want = TOKEN_SIZES[b % N_SIZES];
        c->registers++;
        if (ev[i].n_tokens != want || !ev[i].tokens) {
            c->bad++;
            continue;
        }
        for (uint32_t k = 0; k < want; k++)
            if (ev[i].tokens[k] != (uint32_t)(b * 1000 + k)) {
                c->bad++;
                break;
            }
    }
}

static void token_check_fn(const kvreg_event *ev, size_t n, void *ud) { check_tokens(ud, ev, n); }

/* One registry (INLINE with the checking callback, or POLL drained after every call), every size
 * class through it, then the checks. */
static void register_sized_blocks(int poll) {
    token_check c = {0, 0};
    kvreg_config *cfg = NULL;
    kvreg_registry *reg = NULL;
    assert_int_equal(kvreg_config_new(&cfg), KVREG_OK);
    if (poll)
        assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_DELIVERY, KVREG_DELIVERY_POLL), KVREG_OK);
    else
        assert_int_equal(kvreg_config_set_event_fn(cfg, token_check_fn, &c, NULL), KVREG_OK);
    assert_int_equal(kvreg_registry_new(&reg, cfg), KVREG_OK);
    kvreg_config_free(cfg);
    kvreg_pool *pool = NULL;
    assert_int_equal(kvreg_pool_new(&pool, reg, "tokens"), KVREG_OK);
    uint32_t *tok = malloc(300 * sizeof *tok);
    kvreg_event *ev = malloc(KVREG_EVENTS_PER_CALL * sizeof *ev);
    for (uint64_t b = 0; b < TOKEN_BLOCKS; b++) {
        const uint32_t n = TOKEN_SIZES[b % N_SIZES];
        for (uint32_t k = 0; k < n; k++) tok[k] = (uint32_t)(b * 1000 + k);
        kvreg_block_desc d;
        memset(&d, 0, sizeof d);
        d.sequence_hash = b + 1;
        d.block_hash = b + 1;
        d.tokens = tok;
        d.n_tokens = n;
        kvreg_block h;
        assert_int_equal(kvreg_register(pool, &d, &h), KVREG_OK);
        assert_int_equal(kvreg_release(pool, h), KVREG_OK);
        /* the caller's buffer is reused at once: the events must not point into it */
        memset(tok, 0xAB, 300 * sizeof *tok);
        if (poll) {
            size_t got = 0;
            do {
                assert_int_equal(kvreg_registry_poll(reg, ev, KVREG_EVENTS_PER_CALL, &got), KVREG_OK);
                check_tokens(&c, ev, got);
            } while (got > 0);
        }
    }
    kvreg_pool_free(pool);
    kvreg_registry_free(reg);
    free(ev);
    free(tok);
    assert_int_equal(c.registers, TOKEN_BLOCKS);
    assert_int_equal(c.bad, 0);
}

static void test_tokens_of_every_size_survive_the_ring(void **state) {
    (void)state;
    register_sized_blocks(0);
    register_sized_blocks(1);
}

/* Registers blocks first .. first+n-1 of the sized-token pattern (each then released: a
 * Register and a Remove per block). */
static void register_sized_range(kvreg_pool *pool, uint32_t *tok, uint64_t first, uint64_t n) {
    for (uint64_t b = first; b < first + n; b++) {
        const uint32_t nt = TOKEN_SIZES[b % N_SIZES];
        for (uint32_t k = 0; k < nt; k++) tok[k] = (uint32_t)(b * 1000 + k);
        kvreg_block_desc d;
        memset(&d, 0, sizeof d);
        d.sequence_hash = d.block_hash = b + 1;
        d.tokens = tok;
        d.n_tokens = nt;
        kvreg_block h;
        assert_int_equal(kvreg_register(pool, &d, &h), KVREG_OK);
        assert_int_equal(kvreg_release(pool, h), KVREG_OK);
    }
}

/* POLL: a poll's events keep their tokens until the next poll, however much the engine queues
 * meanwhile. A poll that takes whole queue chunks hands out tokens that live in those chunks;
 * the queue must neither append to them nor reuse them before the next poll. Caps of 4,096
 * (several whole chunks of 1,024 events), 1,500 (one whole, then part of the next, copied) and
 * 7 (parts only). */
static void test_polled_tokens_outlive_later_events(void **state) {
    (void)state;
    static const size_t caps[3] = {4096, 1500, 7};
    kvreg_config *cfg = NULL;
    kvreg_registry *reg = NULL;
    assert_int_equal(kvreg_config_new(&cfg), KVREG_OK);
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_DELIVERY, KVREG_DELIVERY_POLL), KVREG_OK);
    assert_int_equal(kvreg_registry_new(&reg, cfg), KVREG_OK);
    kvreg_config_free(cfg);
    kvreg_pool *pool = NULL;
    assert_int_equal(kvreg_pool_new(&pool, reg, "tokens"), KVREG_OK);
    uint32_t *tok = malloc(300 * sizeof *tok);
    kvreg_event *ev = malloc(4096 * sizeof *ev);
    assert_non_null(tok);
    assert_non_null(ev);
    token_check c = {0, 0};
    uint64_t next = 0, expect_id = 0;
    for (int round = 0; round < 12; round++) {
        const size_t cap = caps[round % 3];
        register_sized_range(pool, tok, next, 1500); /* 3,000 events queued */
        next += 1500;
        size_t got = 0;
        assert_int_equal(kvreg_registry_poll(reg, ev, cap, &got), KVREG_OK);
        assert_true(got > 0 && got <= cap);
        /* the engine goes on: 2,000 more events queued before these are read */
        register_sized_range(pool, tok, next, 1000);
        next += 1000;
        memset(tok, 0xAB, 300 * sizeof *tok);
        for (size_t i = 0; i < got; i++) assert_true(ev[i].event_id == expect_id + i);
        expect_id += got;
        check_tokens(&c, ev, got);
        /* drain the rest, checking as we go */
        do {
            assert_int_equal(kvreg_registry_poll(reg, ev, cap, &got), KVREG_OK);
            for (size_t i = 0; i < got; i++) assert_true(ev[i].event_id == expect_id + i);
            expect_id += got;
            check_tokens(&c, ev, got);
        } while (got > 0);
    }
    assert_int_equal(expect_id, 2 * next);
    assert_int_equal(c.registers, next);
    assert_int_equal(c.bad, 0);
    kvreg_pool_free(pool);
    kvreg_registry_free(reg);
    free(ev);
    free(tok);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_big_batch_chunks_in_order, setup, teardown),
        cmocka_unit_test(test_tokens_of_every_size_survive_the_ring),
        cmocka_unit_test(test_polled_tokens_outlive_later_events),
        cmocka_unit_test_setup_teardown(test_seed_single_handle_register_then_remove, setup, teardown),
        cmocka_unit_test_setup_teardown(test_seed_extra_reference_delays_remove, setup, teardown),
        cmocka_unit_test_setup_teardown(test_seed_batch_of_two, setup, teardown),
        cmocka_unit_test_setup_teardown(test_seed_empty_batch_emits_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_seed_publish_then_drop, setup, teardown),
        cmocka_unit_test_setup_teardown(test_event_fields_and_ids, setup, teardown),
        cmocka_unit_test(test_release_from_inside_callback),
        cmocka_unit_test(test_reentrant_release_and_pool_free),
        cmocka_unit_test_setup_teardown(test_set_event_fn_replaces_and_destroys, setup, teardown),
        cmocka_unit_test_setup_teardown(test_poll_mode_drains_in_order, setup, teardown),
        cmocka_unit_test(test_poll_full_queue_drops_and_counts),
        cmocka_unit_test_setup_teardown(test_config_rejects_callback_in_poll_mode, setup, teardown),
        cmocka_unit_test(test_two_threads_keep_per_hash_order),
    };
    return cmocka_run_group_tests_name("events", tests, NULL, NULL);
}
