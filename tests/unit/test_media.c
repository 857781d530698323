/* Media (tiers): every pool has a KVREG_MEDIUM_*, kvreg_pool_new makes GPU pools, and (in the
 * default global event mode) a Register carries the medium of the pool whose call caused it and
 * the hash's Remove the same medium, on every path an event takes: the ring straight to the callback, events a callback's own calls cause (nested),
 * events spilled out of a full ring inside a callback, and the POLL queue. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <kvreg.h>
#include <stdlib.h>
#include <string.h>

#include "recorder.h"

/* The words after medium are zero in every event the library hands out. */
static void assert_reserved_zero(const kvreg_event *e) {
    assert_int_equal(e->reserved32, 0);
    for (int i = 0; i < 3; i++) assert_true(e->reserved[i] == 0);
}

static void test_pool_medium_values(void **state) {
    (void)state;
    kvreg_registry *reg = NULL;
    kvreg_pool *g = NULL, *c = NULL, *s = NULL, *x = NULL, *bad = (kvreg_pool *)0x1;
    assert_int_equal(kvreg_registry_new(&reg, NULL), KVREG_OK);
    assert_int_equal(kvreg_pool_new(&g, reg, "gpu"), KVREG_OK);
    assert_int_equal(kvreg_pool_new_medium(&c, reg, "cpu", KVREG_MEDIUM_CPU), KVREG_OK);
    assert_int_equal(kvreg_pool_new_medium(&s, reg, "disk", KVREG_MEDIUM_STORAGE), KVREG_OK);
    assert_int_equal(kvreg_pool_new_medium(&x, reg, "ext", KVREG_MEDIUM_EXTERNAL), KVREG_OK);
    assert_int_equal(kvreg_pool_medium(g), 0);
    assert_int_equal(kvreg_pool_medium(c), 1);
    assert_int_equal(kvreg_pool_medium(s), 2);
    assert_int_equal(kvreg_pool_medium(x), 3);
    assert_int_equal(kvreg_pool_medium(NULL), 0);
    assert_string_equal(kvreg_pool_name(c), "cpu");
    /* Beyond the known media, or NULL arguments: EINVAL, *out untouched, no pool made. */
    assert_int_equal(kvreg_pool_new_medium(&bad, reg, "bad", 4), KVREG_EINVAL);
    assert_int_equal(kvreg_pool_new_medium(&bad, reg, "bad", UINT32_MAX), KVREG_EINVAL);
    assert_ptr_equal(bad, (kvreg_pool *)0x1);
    assert_int_equal(kvreg_pool_new_medium(NULL, reg, "bad", 0), KVREG_EINVAL);
    assert_int_equal(kvreg_pool_new_medium(&bad, NULL, "bad", 0), KVREG_EINVAL);
    uint64_t pools = 0;
    assert_int_equal(kvreg_registry_stat(reg, KVREG_STAT_POOLS, &pools), KVREG_OK);
    assert_true(pools == 4);
    kvreg_registry_free(reg);
}

/* INLINE: Register carries the medium of the pool that registered first; the second pool
 * taking the hash emits nothing; the Remove, caused by the pool whose release (or
 * kvreg_pool_free) took the hash out of its last pool, carries the Register's medium. */
static void test_inline_events_carry_medium(void **state) {
    (void)state;
    recorder *rec = calloc(1, sizeof *rec);
    kvreg_registry *reg = recorder_registry(rec, 0);
    kvreg_pool *cpu = NULL, *disk = NULL, *gpu = NULL;
    kvreg_block a = 0, b = 0, c = 0;
    assert_int_equal(kvreg_pool_new_medium(&cpu, reg, "cpu", KVREG_MEDIUM_CPU), KVREG_OK);
    assert_int_equal(kvreg_pool_new_medium(&disk, reg, "disk", KVREG_MEDIUM_STORAGE), KVREG_OK);
    assert_int_equal(kvreg_pool_new(&gpu, reg, "gpu"), KVREG_OK);

    kvreg_block_desc d = hash_desc(11, 1, 0, 0);
    assert_int_equal(kvreg_register(cpu, &d, &a), KVREG_OK);
    assert_int_equal(kvreg_register(disk, &d, &b), KVREG_OK);
    assert_int_equal(rec->n, 1);
    assert_int_equal(rec->events[0].kind, KVREG_EVENT_REGISTER);
    assert_int_equal(rec->events[0].medium, KVREG_MEDIUM_CPU);
    assert_int_equal(rec->events[0].pool_id, kvreg_pool_id(cpu));
    assert_reserved_zero(&rec->events[0]);
    assert_int_equal(kvreg_release(cpu, a), KVREG_OK);
    assert_int_equal(rec->n, 1);
    assert_int_equal(kvreg_release(disk, b), KVREG_OK);
    assert_int_equal(rec->n, 2);
    assert_int_equal(rec->events[1].kind, KVREG_EVENT_REMOVE);
    assert_int_equal(rec->events[1].medium, KVREG_MEDIUM_CPU); /* the Register's, not disk's */
    assert_int_equal(rec->events[1].pool_id, kvreg_pool_id(disk));
    assert_reserved_zero(&rec->events[1]);

    /* A GPU pool's events say GPU (0), and kvreg_pool_free's Removes carry the freed pool's. */
    d = hash_desc(12, 2, 0, 0);
    assert_int_equal(kvreg_register(gpu, &d, &c), KVREG_OK);
    assert_int_equal(rec->events[2].medium, KVREG_MEDIUM_GPU);
    d = hash_desc(13, 3, 0, 0);
    assert_int_equal(kvreg_register(disk, &d, &b), KVREG_OK);
    assert_int_equal(rec->events[3].medium, KVREG_MEDIUM_STORAGE);
    kvreg_pool_free(disk);
    assert_int_equal(rec->n, 5);
    assert_int_equal(rec->events[4].kind, KVREG_EVENT_REMOVE);
    assert_true(rec->events[4].sequence_hash == 13);
    assert_int_equal(rec->events[4].medium, KVREG_MEDIUM_STORAGE);
    assert_reserved_zero(&rec->events[4]);
    kvreg_registry_free(reg);
    free(rec);
}

/* POLL: the queued copies carry the medium too. */
static void test_poll_events_carry_medium(void **state) {
    (void)state;
    kvreg_registry *reg = poll_registry(64);
    kvreg_pool *ext = NULL, *cpu = NULL;
    kvreg_block a = 0, b = 0;
    kvreg_event ev[8];
    size_t n = 0;
    assert_int_equal(kvreg_pool_new_medium(&ext, reg, "ext", KVREG_MEDIUM_EXTERNAL), KVREG_OK);
    assert_int_equal(kvreg_pool_new_medium(&cpu, reg, "cpu", KVREG_MEDIUM_CPU), KVREG_OK);
    kvreg_block_desc d = hash_desc(21, 1, 0, 0);
    assert_int_equal(kvreg_register(ext, &d, &a), KVREG_OK);
    assert_int_equal(kvreg_register(cpu, &d, &b), KVREG_OK);
    assert_int_equal(kvreg_release(ext, a), KVREG_OK);
    assert_int_equal(kvreg_release(cpu, b), KVREG_OK);
    assert_int_equal(kvreg_registry_poll(reg, ev, 8, &n), KVREG_OK);
    assert_int_equal(n, 2);
    assert_int_equal(ev[0].kind, KVREG_EVENT_REGISTER);
    assert_int_equal(ev[0].medium, KVREG_MEDIUM_EXTERNAL);
    assert_int_equal(ev[1].kind, KVREG_EVENT_REMOVE);
    assert_int_equal(ev[1].medium, KVREG_MEDIUM_EXTERNAL); /* the Register's; cpu let go last */
    assert_int_equal(ev[1].pool_id, kvreg_pool_id(cpu));
    assert_reserved_zero(&ev[0]);
    assert_reserved_zero(&ev[1]);
    kvreg_registry_free(reg);
}

/* Inside a callback: the callback's own registrations (nested events) and, when they are more
 * than the ring holds, the events spilled out of the ring carry their pool's medium. */
#define NESTED_BLOCKS 5000 /* more than the event ring's 4096 slots: forces spilling */
typedef struct nested_ctx {
    kvreg_pool *cpu;
    int done;
    size_t by_medium[KVREG_MEDIUM_COUNT];
    size_t bad_reserved;
    size_t registers;
    size_t nested_ok;
    kvreg_block blocks[NESTED_BLOCKS];
    kvreg_block_desc descs[NESTED_BLOCKS];
} nested_ctx;

static void nested_fn(const kvreg_event *events, size_t n, void *ud) {
    nested_ctx *c = ud;
    for (size_t i = 0; i < n; i++) {
        if (events[i].kind != KVREG_EVENT_REGISTER) continue;
        c->registers++;
        if (events[i].medium < KVREG_MEDIUM_COUNT) c->by_medium[events[i].medium]++;
        if (events[i].reserved32 || events[i].reserved[0] || events[i].reserved[1] || events[i].reserved[2])
            c->bad_reserved++;
    }
    if (!c->done) {
        c->done = 1;
        for (size_t i = 0; i < NESTED_BLOCKS; i++) c->descs[i] = hash_desc(1000 + i, i, 0, 0);
        /* no cmocka assertion here: it would longjmp through library frames */
        kvreg_register_batch(c->cpu, c->descs, NESTED_BLOCKS, c->blocks, NULL, &c->nested_ok);
    }
}

static void test_nested_and_spilled_events_carry_medium(void **state) {
    (void)state;
    nested_ctx *c = calloc(1, sizeof *c);
    kvreg_registry *reg = NULL;
    kvreg_pool *disk = NULL;
    kvreg_block h = 0;
    assert_int_equal(kvreg_registry_new(&reg, NULL), KVREG_OK);
    assert_int_equal(kvreg_registry_set_event_fn(reg, nested_fn, c, NULL), KVREG_OK);
    assert_int_equal(kvreg_pool_new_medium(&c->cpu, reg, "cpu", KVREG_MEDIUM_CPU), KVREG_OK);
    assert_int_equal(kvreg_pool_new_medium(&disk, reg, "disk", KVREG_MEDIUM_STORAGE), KVREG_OK);
    kvreg_block_desc d = hash_desc(7, 7, 0, 0);
    assert_int_equal(kvreg_register(disk, &d, &h), KVREG_OK);
    assert_int_equal(kvreg_registry_flush(reg), KVREG_OK);
    assert_int_equal(c->nested_ok, NESTED_BLOCKS);
    assert_int_equal(c->registers, NESTED_BLOCKS + 1);
    assert_int_equal(c->by_medium[KVREG_MEDIUM_STORAGE], 1);
    assert_int_equal(c->by_medium[KVREG_MEDIUM_CPU], NESTED_BLOCKS);
    assert_int_equal(c->by_medium[KVREG_MEDIUM_GPU], 0);
    assert_int_equal(c->bad_reserved, 0);
    kvreg_registry_free(reg);
    free(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_medium_values),
        cmocka_unit_test(test_inline_events_carry_medium),
        cmocka_unit_test(test_poll_events_carry_medium),
        cmocka_unit_test(test_nested_and_spilled_events_carry_medium),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
