/* Big batches (suite 'api'). kvreg.h: the events of one batch call are delivered together, in
 * input order: single-threaded, one callback call of at most KVREG_EVENTS_PER_CALL events, a
 * larger call in consecutive full chunks. Batches well past the internal buffers must keep
 * that in both delivery modes and touch no memory they do not own (ASan in CI; this test found
 * a stack overflow after the first chunk). Kept apart from the other misuse tests: a crash
 * here ends the binary. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <kvreg.h>

enum { MAX_N = 3000 };
static kvreg_block_desc descs[MAX_N];
static kvreg_block handles[MAX_N];

typedef struct calls {
    int calls;
    size_t events, largest;
    uint64_t next_id;
    int in_order;
} calls;

static void calls_fn(const kvreg_event *ev, size_t n, void *ud)
{
    calls *c = ud;
    c->calls++;
    if (n > c->largest)
        c->largest = n;
    for (size_t i = 0; i < n; i++)
        c->in_order &= ev[i].event_id == c->next_id++;
    c->events += n;
}

static void one_batch(size_t n_blocks, int poll)
{
    calls c = {0, 0, 0, 0, 1};
    int chunks = (int)((n_blocks + KVREG_EVENTS_PER_CALL - 1) / KVREG_EVENTS_PER_CALL);
    kvreg_registry *reg = NULL;
    kvreg_config *cfg = NULL;
    kvreg_pool *p = NULL;
    size_t n = 0;
    for (size_t i = 0; i < n_blocks; i++) {
        memset(&descs[i], 0, sizeof descs[i]);
        descs[i].sequence_hash = 5000 + i;
        descs[i].block_hash = i;
    }
    assert_int_equal(kvreg_config_new(&cfg), KVREG_OK);
    if (poll) {
        assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_DELIVERY, KVREG_DELIVERY_POLL), KVREG_OK);
        assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_POLL_CAPACITY, 2 * MAX_N), KVREG_OK);
    } else {
        assert_int_equal(kvreg_config_set_event_fn(cfg, calls_fn, &c, NULL), KVREG_OK);
    }
    assert_int_equal(kvreg_registry_new(&reg, cfg), KVREG_OK);
    kvreg_config_free(cfg);
    assert_int_equal(kvreg_pool_new(&p, reg, "p"), KVREG_OK);
    assert_int_equal(kvreg_register_batch(p, descs, n_blocks, handles, NULL, &n), KVREG_OK);
    assert_int_equal(n, n_blocks);
    if (!poll) {
        assert_int_equal(c.events, n_blocks);
        assert_true(c.in_order);
        assert_int_equal(c.calls, chunks);
        assert_true(c.largest <= KVREG_EVENTS_PER_CALL);
        c.calls = 0;
    }
    assert_int_equal(kvreg_release_batch(p, handles, n_blocks, NULL, &n), KVREG_OK);
    assert_int_equal(n, n_blocks);
    if (!poll) {
        assert_int_equal(c.events, 2 * n_blocks);
        assert_true(c.in_order);
        assert_int_equal(c.calls, chunks);
        assert_true(c.largest <= KVREG_EVENTS_PER_CALL);
    } else {
        uint64_t q = 0;
        assert_int_equal(kvreg_registry_stat(reg, KVREG_STAT_EVENTS_QUEUED, &q), KVREG_OK);
        assert_int_equal(q, 2 * n_blocks);
    }
    kvreg_registry_free(reg);
}

static void t_batch_1024_inline(void **state) { (void)state; one_batch(KVREG_EVENTS_PER_CALL, 0); }
static void t_batch_1025_inline(void **state) { (void)state; one_batch(KVREG_EVENTS_PER_CALL + 1, 0); }
static void t_batch_3000_inline(void **state) { (void)state; one_batch(3000, 0); }
static void t_batch_3000_poll(void **state) { (void)state; one_batch(3000, 1); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_batch_1024_inline),
        cmocka_unit_test(t_batch_1025_inline),
        cmocka_unit_test(t_batch_3000_inline),
        cmocka_unit_test(t_batch_3000_poll),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
