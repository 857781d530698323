/* kvreg_registry_snapshot: one Register per registered hash (parents before children, event_id
 * KVREG_EVENT_ID_SNAPSHOT, the medium and id of a pool holding it, its stored tokens), a
 * position P such that snapshot + events >= P rebuild the registry, a snapshot that outlives
 * the registry, and snapshots taken from a callback and in POLL mode. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <kvreg.h>
#include <stdlib.h>
#include <string.h>

#include "recorder.h"

static uint64_t stat(kvreg_registry *reg, uint32_t which) {
    uint64_t v = UINT64_MAX;
    assert_int_equal(kvreg_registry_stat(reg, which, &v), KVREG_OK);
    return v;
}

/* Tokens of hash h: {h, h+1, h+2, h+3}, so each hash's are its own. */
static void tokens_of(uint64_t h, uint32_t t[4]) {
    for (uint32_t i = 0; i < 4; i++) t[i] = (uint32_t)h + i;
}

static int find(const kvreg_event *ev, size_t n, uint64_t h) {
    for (size_t i = 0; i < n; i++)
        if (ev[i].sequence_hash == h) return (int)i;
    return -1;
}

static kvreg_block reg_tok(kvreg_pool *p, uint64_t h, int has_parent, uint64_t parent) {
    uint32_t t[4];
    kvreg_block b = 0;
    tokens_of(h, t);
    kvreg_block_desc d = hash_desc(h, h ^ 0xB10C, has_parent, parent);
    d.tokens = t;
    d.n_tokens = 4;
    assert_int_equal(kvreg_register(p, &d, &b), KVREG_OK);
    return b;
}

/* A chain 1 <- 2 <- 3 <- 4 registered children first (so storage order is not the answer),
 * a hash whose parent is not registered, a hash two pools share, and one that came and went. */
static void test_contents_order_position(void **state) {
    (void)state;
    recorder *rec = calloc(1, sizeof *rec);
    kvreg_registry *reg = recorder_registry(rec, 1);
    kvreg_pool *gpu = NULL, *cpu = NULL;
    kvreg_snapshot *snap = NULL;
    const kvreg_event *ev = NULL;
    size_t n = 99;
    assert_int_equal(kvreg_pool_new(&gpu, reg, "gpu"), KVREG_OK);
    assert_int_equal(kvreg_pool_new_medium(&cpu, reg, "cpu", KVREG_MEDIUM_CPU), KVREG_OK);
    for (uint64_t h = 4; h >= 2; h--) reg_tok(cpu, h, 1, h - 1);
    reg_tok(cpu, 1, 0, 0);
    reg_tok(gpu, 10, 1, 99);
    reg_tok(gpu, 3, 1, 2); /* shared with cpu: no event */
    kvreg_block gone = reg_tok(gpu, 50, 0, 0);
    assert_int_equal(kvreg_release(gpu, gone), KVREG_OK);
    assert_int_equal(rec->n, 7);

    assert_int_equal(kvreg_registry_snapshot(reg, &snap), KVREG_OK);
    assert_true(kvreg_snapshot_position(snap) == 7); /* the next event's id */
    assert_int_equal(kvreg_snapshot_events(snap, &ev, &n), KVREG_OK);
    assert_int_equal(n, 5);
    assert_int_equal(rec->n, 7); /* a snapshot emits nothing */
    for (uint64_t h = 1; h <= 4; h++) {
        const int i = find(ev, n, h);
        assert_true(i >= 0);
        if (h > 1) assert_true(find(ev, n, h - 1) < i); /* parent first */
        assert_int_equal(ev[i].has_parent, h > 1);
        assert_true(ev[i].parent_sequence_hash == (h > 1 ? h - 1 : 0));
    }
    assert_true(find(ev, n, 50) < 0);
    for (size_t i = 0; i < n; i++) {
        uint32_t t[4];
        const uint64_t h = ev[i].sequence_hash;
        assert_int_equal(ev[i].kind, KVREG_EVENT_REGISTER);
        assert_true(ev[i].event_id == KVREG_EVENT_ID_SNAPSHOT);
        assert_true(ev[i].block_hash == (h ^ 0xB10C));
        tokens_of(h, t);
        assert_int_equal(ev[i].n_tokens, 4);
        assert_non_null(ev[i].tokens);
        assert_memory_equal(ev[i].tokens, t, sizeof t);
        assert_int_equal(ev[i].reserved32, 0);
        assert_true(ev[i].reserved[0] == 0 && ev[i].reserved[1] == 0 && ev[i].reserved[2] == 0);
        /* pool_id and medium name a pool that holds it */
        if (h == 10) {
            assert_int_equal(ev[i].pool_id, kvreg_pool_id(gpu));
            assert_int_equal(ev[i].medium, KVREG_MEDIUM_GPU);
        } else if (h == 3) {
            assert_true(ev[i].pool_id == kvreg_pool_id(gpu) || ev[i].pool_id == kvreg_pool_id(cpu));
            assert_int_equal(ev[i].medium, ev[i].pool_id == kvreg_pool_id(cpu) ? KVREG_MEDIUM_CPU : KVREG_MEDIUM_GPU);
        } else {
            assert_int_equal(ev[i].pool_id, kvreg_pool_id(cpu));
            assert_int_equal(ev[i].medium, KVREG_MEDIUM_CPU);
        }
    }
    int ten = find(ev, n, 10);
    assert_int_equal(ev[ten].has_parent, 1);
    assert_true(ev[ten].parent_sequence_hash == 99);

    /* Independent of the registry: clear and free it, then read the snapshot (ASan and
     * valgrind would see a read of freed memory). */
    assert_int_equal(kvreg_registry_clear(reg), KVREG_OK);
    kvreg_registry_free(reg);
    assert_int_equal(kvreg_snapshot_events(snap, &ev, &n), KVREG_OK);
    assert_int_equal(n, 5);
    for (size_t i = 0; i < n; i++) {
        uint32_t t[4];
        tokens_of(ev[i].sequence_hash, t);
        assert_memory_equal(ev[i].tokens, t, sizeof t);
    }
    kvreg_snapshot_free(snap);
    free(rec);
}

/* Without KEEP_TOKENS the snapshot has no tokens; an empty registry gives an empty snapshot at
 * the current position; bad arguments. */
static void test_empty_no_tokens_and_arguments(void **state) {
    (void)state;
    kvreg_registry *reg = NULL;
    kvreg_pool *pool = NULL;
    kvreg_snapshot *snap = NULL, *keep = (kvreg_snapshot *)0x1;
    const kvreg_event *ev = NULL;
    size_t n = 99;
    assert_int_equal(kvreg_registry_new(&reg, NULL), KVREG_OK);
    assert_int_equal(kvreg_registry_snapshot(reg, &snap), KVREG_OK);
    assert_true(kvreg_snapshot_position(snap) == 0);
    assert_int_equal(kvreg_snapshot_events(snap, &ev, &n), KVREG_OK);
    assert_int_equal(n, 0);
    kvreg_snapshot_free(snap);

    assert_int_equal(kvreg_pool_new(&pool, reg, "p"), KVREG_OK);
    kvreg_block b = reg_tok(pool, 5, 0, 0);
    assert_int_equal(kvreg_release(pool, b), KVREG_OK);
    reg_tok(pool, 6, 0, 0);
    assert_int_equal(kvreg_registry_snapshot(reg, &snap), KVREG_OK);
    assert_true(kvreg_snapshot_position(snap) == 3); /* Register 5, Remove 5, Register 6 */
    assert_int_equal(kvreg_snapshot_events(snap, &ev, &n), KVREG_OK);
    assert_int_equal(n, 1);
    assert_true(ev[0].sequence_hash == 6);
    assert_int_equal(ev[0].n_tokens, 0);
    assert_null(ev[0].tokens);

    assert_int_equal(kvreg_registry_snapshot(NULL, &keep), KVREG_EINVAL);
    assert_ptr_equal(keep, (kvreg_snapshot *)0x1);
    assert_int_equal(kvreg_registry_snapshot(reg, NULL), KVREG_EINVAL);
    assert_int_equal(kvreg_snapshot_events(NULL, &ev, &n), KVREG_EINVAL);
    assert_int_equal(kvreg_snapshot_events(snap, NULL, &n), KVREG_EINVAL);
    assert_int_equal(kvreg_snapshot_events(snap, &ev, NULL), KVREG_EINVAL);
    assert_true(kvreg_snapshot_position(NULL) == 0);
    kvreg_snapshot_free(NULL);
    kvreg_snapshot_free(snap);
    kvreg_registry_free(reg);
}

/* Parents that point at each other (made-up hashes) cannot hang the ordering. */
static void test_parent_cycle_terminates(void **state) {
    (void)state;
    kvreg_registry *reg = NULL;
    kvreg_pool *pool = NULL;
    kvreg_snapshot *snap = NULL;
    const kvreg_event *ev = NULL;
    size_t n = 0;
    assert_int_equal(kvreg_registry_new(&reg, NULL), KVREG_OK);
    assert_int_equal(kvreg_pool_new(&pool, reg, "p"), KVREG_OK);
    reg_tok(pool, 1, 1, 2);
    reg_tok(pool, 2, 1, 1);
    reg_tok(pool, 3, 1, 3); /* its own parent */
    reg_tok(pool, 4, 1, 1);
    assert_int_equal(kvreg_registry_snapshot(reg, &snap), KVREG_OK);
    assert_int_equal(kvreg_snapshot_events(snap, &ev, &n), KVREG_OK);
    assert_int_equal(n, 4);
    assert_true(find(ev, n, 1) < find(ev, n, 4)); /* outside the cycle the rule still holds */
    kvreg_snapshot_free(snap);
    kvreg_registry_free(reg);
}

/* A set of hashes rebuilt from events: Register adds, Remove removes, Cleared empties. */
typedef struct hset {
    uint64_t h[64];
    size_t n;
} hset;

static void hset_apply(hset *s, const kvreg_event *e) {
    if (e->kind == KVREG_EVENT_CLEARED) {
        s->n = 0;
        return;
    }
    for (size_t i = 0; i < s->n; i++) {
        if (s->h[i] != e->sequence_hash) continue;
        if (e->kind == KVREG_EVENT_REMOVE) s->h[i] = s->h[--s->n];
        return; /* a second Register would be a bug the caller's count catches */
    }
    if (e->kind == KVREG_EVENT_REGISTER && s->n < 64) s->h[s->n++] = e->sequence_hash;
}

static void assert_set_is_registry(const hset *s, kvreg_registry *reg) {
    assert_true(stat(reg, KVREG_STAT_HASHES) == s->n);
    for (size_t i = 0; i < s->n; i++) {
        int present = 0;
        assert_int_equal(kvreg_registry_contains(reg, s->h[i], &present), KVREG_OK);
        assert_int_equal(present, 1);
    }
}

/* Resync: snapshot + every event with id >= P gives the registry's state, through later
 * registers, releases and a clear. */
static void test_snapshot_then_events_rebuild_state(void **state) {
    (void)state;
    recorder *rec = calloc(1, sizeof *rec);
    kvreg_registry *reg = recorder_registry(rec, 0);
    kvreg_pool *a = NULL, *b = NULL;
    kvreg_snapshot *s1 = NULL, *s2 = NULL;
    kvreg_block keep[8] = {0};
    assert_int_equal(kvreg_pool_new(&a, reg, "a"), KVREG_OK);
    assert_int_equal(kvreg_pool_new_medium(&b, reg, "b", KVREG_MEDIUM_CPU), KVREG_OK);
    for (uint64_t h = 1; h <= 6; h++) keep[h] = reg_tok(h & 1 ? a : b, h, 0, 0);
    assert_int_equal(kvreg_registry_snapshot(reg, &s1), KVREG_OK);
    assert_int_equal(kvreg_release(b, keep[2]), KVREG_OK);
    reg_tok(a, 7, 0, 0);
    assert_int_equal(kvreg_registry_clear(reg), KVREG_OK);
    reg_tok(b, 8, 0, 0);
    assert_int_equal(kvreg_registry_snapshot(reg, &s2), KVREG_OK);
    reg_tok(a, 9, 1, 8);
    kvreg_snapshot *snaps[2] = {s1, s2};
    for (int k = 0; k < 2; k++) {
        hset set = {{0}, 0};
        const kvreg_event *ev = NULL;
        size_t n = 0;
        assert_int_equal(kvreg_snapshot_events(snaps[k], &ev, &n), KVREG_OK);
        for (size_t i = 0; i < n; i++) hset_apply(&set, &ev[i]);
        for (size_t i = 0; i < rec->n; i++)
            if (rec->events[i].event_id >= kvreg_snapshot_position(snaps[k])) hset_apply(&set, &rec->events[i]);
        assert_int_equal(set.n, 2); /* 8 and 9 */
        assert_set_is_registry(&set, reg);
        kvreg_snapshot_free(snaps[k]);
    }
    kvreg_registry_free(reg);
    free(rec);
}

/* From a callback: the event being delivered is already in the snapshot (its id is below P),
 * in POLL mode nothing changes either. */
typedef struct snap_ctx {
    kvreg_registry *reg;
    kvreg_snapshot *snap;
    int rc;
    uint64_t delivered_id;
} snap_ctx;

static void snapping_fn(const kvreg_event *events, size_t n, void *ud) {
    snap_ctx *c = ud;
    if (c->snap || n == 0) return;
    c->delivered_id = events[n - 1].event_id;
    c->rc = kvreg_registry_snapshot(c->reg, &c->snap);
}

static void test_snapshot_from_callback_and_poll(void **state) {
    (void)state;
    snap_ctx c = {NULL, NULL, -100, 0};
    kvreg_pool *pool = NULL;
    const kvreg_event *ev = NULL;
    size_t n = 0;
    assert_int_equal(kvreg_registry_new(&c.reg, NULL), KVREG_OK);
    assert_int_equal(kvreg_registry_set_event_fn(c.reg, snapping_fn, &c, NULL), KVREG_OK);
    assert_int_equal(kvreg_pool_new(&pool, c.reg, "p"), KVREG_OK);
    reg_tok(pool, 42, 0, 0);
    assert_int_equal(c.rc, KVREG_OK);
    assert_non_null(c.snap);
    assert_true(kvreg_snapshot_position(c.snap) == c.delivered_id + 1);
    assert_int_equal(kvreg_snapshot_events(c.snap, &ev, &n), KVREG_OK);
    assert_int_equal(n, 1);
    assert_true(ev[0].sequence_hash == 42);
    kvreg_snapshot_free(c.snap);
    kvreg_registry_free(c.reg);

    /* POLL: the position counts queued, not yet polled, events as emitted. */
    kvreg_registry *reg = poll_registry(64);
    kvreg_snapshot *snap = NULL;
    kvreg_event out[4];
    assert_int_equal(kvreg_pool_new(&pool, reg, "p"), KVREG_OK);
    reg_tok(pool, 1, 0, 0);
    reg_tok(pool, 2, 1, 1);
    assert_int_equal(kvreg_registry_snapshot(reg, &snap), KVREG_OK);
    assert_true(kvreg_snapshot_position(snap) == 2);
    assert_int_equal(kvreg_snapshot_events(snap, &ev, &n), KVREG_OK);
    assert_int_equal(n, 2);
    assert_true(ev[0].sequence_hash == 1 && ev[1].sequence_hash == 2);
    assert_int_equal(kvreg_registry_poll(reg, out, 4, &n), KVREG_OK);
    assert_int_equal(n, 2); /* the snapshot took nothing out of the queue */
    kvreg_snapshot_free(snap);
    kvreg_registry_free(reg);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_contents_order_position),
        cmocka_unit_test(test_empty_no_tokens_and_arguments),
        cmocka_unit_test(test_parent_cycle_terminates),
        cmocka_unit_test(test_snapshot_then_events_rebuild_state),
        cmocka_unit_test(test_snapshot_from_callback_and_poll),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
