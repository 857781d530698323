/* Misuse: NULL and zero arguments, out-of-range options and overflowing sizes. Every call must
 * return its documented status (never crash) and leave its objects unchanged. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <kvreg.h>

static const uint32_t toks[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};

static void t_strerror_version(void **state)
{
    (void)state;
    const char *unknown = kvreg_strerror(12345);
    assert_non_null(unknown);
    assert_non_null(kvreg_strerror(INT32_MIN));
    for (int c = 0; c >= KVREG_EOVERFLOW; c--) {
        assert_non_null(kvreg_strerror(c));
        assert_string_not_equal(kvreg_strerror(c), unknown);
    }
    assert_int_equal(kvreg_version_number(), KVREG_VERSION_NUMBER);
    assert_string_equal(kvreg_version_string(), KVREG_VERSION_STRING);
}

static void t_hash_args(void **state)
{
    (void)state;
    kvreg_block_info out[3];
    size_t n = 77;
    assert_int_equal(kvreg_hash_blocks(toks, 12, 0, 0, out, 3, &n), KVREG_EINVAL);
    assert_int_equal(kvreg_hash_blocks(toks, 12, 4, 0, out, 3, NULL), KVREG_EINVAL);
    assert_int_equal(kvreg_hash_blocks(NULL, 12, 4, 0, out, 3, &n), KVREG_EINVAL);
    assert_int_equal(kvreg_hash_blocks(NULL, 0, 4, 0, NULL, 0, &n), KVREG_OK);
    assert_int_equal(n, 0);
    /* sizing call, then a too-small array: nothing written */
    assert_int_equal(kvreg_hash_blocks(toks, 12, 4, 0, NULL, 0, &n), KVREG_ERANGE);
    assert_int_equal(n, 3);
    memset(out, 0xEE, sizeof out);
    assert_int_equal(kvreg_hash_blocks(toks, 12, 4, 0, out, 2, &n), KVREG_ERANGE);
    assert_int_equal(out[0].block_hash, UINT64_C(0xEEEEEEEEEEEEEEEE));
    /* kvreg.h (Hashing): n_tokens > SIZE_MAX / 4 is KVREG_EOVERFLOW, "nothing is read or
     * written, not even *n_blocks"; up to SIZE_MAX / 4 a count is only sized (ERANGE with no
     * room), never read */
    n = 77;
    assert_int_equal(kvreg_hash_blocks(toks, SIZE_MAX, 1, 0, NULL, 0, &n), KVREG_EOVERFLOW);
    assert_int_equal(n, 77);
    assert_int_equal(kvreg_hash_blocks(toks, SIZE_MAX / 4 + 1, 1, 0, out, 3, &n), KVREG_EOVERFLOW);
    assert_int_equal(n, 77);
    assert_int_equal(out[0].block_hash, UINT64_C(0xEEEEEEEEEEEEEEEE));
    assert_int_equal(kvreg_hash_blocks(toks, SIZE_MAX / 4, 1, 0, NULL, 0, &n), KVREG_ERANGE);
    assert_int_equal(n, SIZE_MAX / 4);
    /* ... and kvreg_block_hash answers 0 without reading */
    assert_int_equal(kvreg_block_hash(toks, SIZE_MAX / 4 + 1, 0), 0);
    assert_int_equal(kvreg_hash_blocks(toks, 5, UINT32_MAX, 0, NULL, 0, &n), KVREG_OK);
    assert_int_equal(n, 0);
}

static void t_sequence_args(void **state)
{
    (void)state;
    kvreg_sequence *seq = NULL;
    size_t done = 99, n = 99;
    uint32_t tok = 0;
    kvreg_block_info info;
    const uint32_t *view = NULL;
    int completed = 5;
    assert_int_equal(kvreg_sequence_new(NULL, 4, 0), KVREG_EINVAL);
    assert_int_equal(kvreg_sequence_new(&seq, 0, 0), KVREG_EINVAL);
    assert_null(seq);
    kvreg_sequence_free(NULL);
    assert_int_equal(kvreg_sequence_num_blocks(NULL), 0);
    assert_int_equal(kvreg_sequence_total_tokens(NULL), 0);
    assert_int_equal(kvreg_sequence_block_size(NULL), 0);
    assert_int_equal(kvreg_sequence_salt(NULL), 0);
    /* kvreg.h: "KVREG_EINVAL: seq NULL" (extend; append: "errors as extend"); for the rest,
     * a NULL object is the status table's "bad argument: NULL" */
    assert_int_equal(kvreg_sequence_extend(NULL, toks, 4, &done), KVREG_EINVAL);
    assert_int_equal(done, 99);
    assert_int_equal(kvreg_sequence_append(NULL, 1, &completed), KVREG_EINVAL);
    assert_int_equal(completed, 5);
    assert_int_equal(kvreg_sequence_truncate(NULL, 0), KVREG_EINVAL);
    assert_int_equal(kvreg_sequence_unwind(NULL, 0), KVREG_EINVAL);
    assert_int_equal(kvreg_sequence_pop(NULL, &tok), KVREG_EINVAL);
    assert_int_equal(kvreg_sequence_reset(NULL), KVREG_EINVAL);
    assert_int_equal(kvreg_sequence_block(NULL, 0, &info), KVREG_EINVAL);

    assert_int_equal(kvreg_sequence_new(&seq, 4, 1337), KVREG_OK);
    assert_int_equal(kvreg_sequence_pop(seq, &tok), KVREG_ENOENT);
    assert_int_equal(kvreg_sequence_extend(seq, NULL, 4, &done), KVREG_EINVAL);
    assert_int_equal(kvreg_sequence_extend(seq, toks, 10, NULL), KVREG_OK);
    assert_int_equal(kvreg_sequence_extend(seq, NULL, 0, &done), KVREG_OK);
    assert_int_equal(done, 0);
    /* kvreg.h (Sequences, size limit): at most PTRDIFF_MAX / 4 tokens; an extend past it is
     * KVREG_EOVERFLOW before a token is read (toks is far shorter) and changes nothing, not
     * even *n_completed */
    done = 99;
    assert_int_equal(kvreg_sequence_extend(seq, toks, SIZE_MAX / 2, &done), KVREG_EOVERFLOW);
    assert_int_equal(done, 99);
    assert_int_equal(kvreg_sequence_extend(seq, toks, SIZE_MAX, &done), KVREG_EOVERFLOW);
    assert_int_equal(kvreg_sequence_extend(seq, toks, (size_t)PTRDIFF_MAX / 4 - 10 + 1, &done),
                     KVREG_EOVERFLOW);
    assert_int_equal(done, 99);
    assert_int_equal(kvreg_sequence_total_tokens(seq), 10);
    assert_int_equal(kvreg_sequence_num_blocks(seq), 2);
    assert_int_equal(kvreg_sequence_unwind(seq, SIZE_MAX), KVREG_ERANGE);
    assert_int_equal(kvreg_sequence_unwind(seq, 11), KVREG_ERANGE);
    assert_int_equal(kvreg_sequence_total_tokens(seq), 10);
    assert_int_equal(kvreg_sequence_truncate(seq, SIZE_MAX), KVREG_OK);
    assert_int_equal(kvreg_sequence_total_tokens(seq), 10);
    assert_int_equal(kvreg_sequence_block(seq, SIZE_MAX, &info), KVREG_ERANGE);
    assert_int_equal(kvreg_sequence_block(seq, 2, &info), KVREG_ERANGE);
    assert_int_equal(kvreg_sequence_block_tokens(seq, SIZE_MAX, &view, &n), KVREG_ERANGE);
    assert_int_equal(kvreg_sequence_block(seq, 0, NULL), KVREG_EINVAL);
    assert_int_equal(kvreg_sequence_partial_tokens(seq, &view, &n), KVREG_OK);
    assert_int_equal(n, 2);
    assert_int_equal(view[0], 9);
    assert_int_equal(kvreg_sequence_append(seq, 11, NULL), KVREG_OK);
    assert_int_equal(kvreg_sequence_append(seq, 12, &completed), KVREG_OK);
    assert_int_equal(completed, 1);
    kvreg_sequence_free(seq);
}

static void t_config_args(void **state)
{
    (void)state;
    kvreg_config *cfg = NULL;
    assert_int_equal(kvreg_config_new(NULL), KVREG_EINVAL);
    kvreg_config_free(NULL);
    assert_int_equal(kvreg_config_set(NULL, KVREG_OPT_DELIVERY, 0), KVREG_EINVAL);
    assert_int_equal(kvreg_config_set_event_fn(NULL, NULL, NULL, NULL), KVREG_EINVAL);
    assert_int_equal(kvreg_config_new(&cfg), KVREG_OK);
    assert_int_equal(kvreg_config_set(cfg, 0, 0), KVREG_EINVAL);
    assert_int_equal(kvreg_config_set(cfg, 7, 0), KVREG_EINVAL); /* the first unknown option */
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_EVENT_MODE, 2), KVREG_EINVAL);
    assert_int_equal(kvreg_config_set(cfg, UINT32_MAX, 0), KVREG_EINVAL);
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_DELIVERY, 2), KVREG_EINVAL);
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_KEEP_TOKENS, 2), KVREG_EINVAL);
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_POLL_CAPACITY, 0), KVREG_EINVAL);
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_POLL_CAPACITY, (UINT64_C(1) << 32) + 1), KVREG_EINVAL);
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_POLL_CAPACITY, UINT64_C(1) << 32), KVREG_OK);
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_POLL_CAPACITY, 1), KVREG_OK);
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_RESERVE_BLOCKS, UINT64_MAX), KVREG_EINVAL);
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_RESERVE_BLOCKS, 0), KVREG_OK);
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_SHARDS, 0), KVREG_EINVAL);
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_SHARDS, 3), KVREG_EINVAL);
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_SHARDS, 8192), KVREG_EINVAL);
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_SHARDS, 4096), KVREG_OK);
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_SHARDS, 1), KVREG_OK);
    kvreg_config_free(cfg);
}

static void t_registry_args(void **state)
{
    (void)state;
    kvreg_registry *reg = NULL;
    kvreg_pool *pool = NULL;
    kvreg_event ev[2];
    size_t n = 9;
    uint64_t v = 9;
    assert_int_equal(kvreg_registry_new(NULL, NULL), KVREG_EINVAL);
    kvreg_registry_free(NULL);
    assert_int_equal(kvreg_registry_set_event_fn(NULL, NULL, NULL, NULL), KVREG_EINVAL);
    assert_int_equal(kvreg_registry_poll(NULL, ev, 2, &n), KVREG_EINVAL);
    assert_true(kvreg_registry_contains(NULL, 1, &(int){0}) < 0);
    assert_int_equal(kvreg_registry_stat(NULL, KVREG_STAT_HASHES, &v), KVREG_EINVAL);
    assert_int_equal(kvreg_pool_new(&pool, NULL, "x"), KVREG_EINVAL);
    assert_null(pool);
    kvreg_pool_free(NULL);
    assert_int_equal(kvreg_pool_id(NULL), 0);
    assert_string_equal(kvreg_pool_name(NULL), "");
    assert_int_equal(kvreg_pool_size(NULL), 0);

    assert_int_equal(kvreg_registry_new(&reg, NULL), KVREG_OK);
    assert_int_equal(kvreg_pool_new(NULL, reg, "x"), KVREG_EINVAL);
    assert_int_equal(kvreg_registry_stat(reg, 0, &v), KVREG_EINVAL);
    assert_int_equal(kvreg_registry_stat(reg, 10, &v), KVREG_EINVAL);
    assert_int_equal(kvreg_registry_stat(reg, KVREG_STAT_HASHES, NULL), KVREG_EINVAL);
    assert_int_equal(v, 9);
    assert_int_equal(kvreg_registry_poll(reg, ev, 2, &n), KVREG_EINVAL); /* INLINE mode */
    assert_int_equal(kvreg_registry_stat(reg, KVREG_STAT_POOLS, &v), KVREG_OK);
    assert_int_equal(v, 0);
    kvreg_registry_free(reg);
}

/* Registry + pool for the block tests. */
typedef struct fixture {
    kvreg_registry *reg;
    kvreg_pool *pool;
    kvreg_block_desc d;
} fixture;

static int setup(void **state)
{
    static fixture f;
    memset(&f, 0, sizeof f);
    assert_int_equal(kvreg_registry_new(&f.reg, NULL), KVREG_OK);
    assert_int_equal(kvreg_pool_new(&f.pool, f.reg, "p"), KVREG_OK);
    f.d.sequence_hash = 42;
    f.d.block_hash = 42;
    f.d.tokens = toks;
    f.d.n_tokens = 4;
    f.d.block_size = 4;
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    kvreg_registry_free(f->reg);
    return 0;
}

static uint64_t stat_of(kvreg_registry *reg, uint32_t s)
{
    uint64_t v = 0;
    assert_int_equal(kvreg_registry_stat(reg, s, &v), KVREG_OK);
    return v;
}

static void t_block_args(void **state)
{
    fixture *f = *state;
    kvreg_block b = 7, out[2] = {7, 7};
    kvreg_block_info info;
    uint32_t rc = 0, tk[4];
    size_t n = 5;
    uint64_t hs[2] = {42, 43};
    int status[2];
    kvreg_block_desc bad = f->d;

    assert_int_equal(kvreg_register(NULL, &f->d, &b), KVREG_EINVAL);
    assert_int_equal(kvreg_register(f->pool, NULL, &b), KVREG_EINVAL);
    assert_int_equal(kvreg_register(f->pool, &f->d, NULL), KVREG_EINVAL);
    bad.n_tokens = 3;
    assert_int_equal(kvreg_register(f->pool, &bad, &b), KVREG_ESTATE);
    bad.n_tokens = 5;
    assert_int_equal(kvreg_register(f->pool, &bad, &b), KVREG_EINVAL);
    bad.n_tokens = SIZE_MAX; /* overflowing: rejected against block_size, never read */
    assert_int_equal(kvreg_register(f->pool, &bad, &b), KVREG_EINVAL);
    bad.tokens = NULL;
    bad.n_tokens = 4;
    assert_int_equal(kvreg_register(f->pool, &bad, &b), KVREG_EINVAL);
    assert_int_equal(b, 7);
    assert_int_equal(kvreg_register_batch(NULL, &f->d, 1, out, status, &n), KVREG_EINVAL);
    assert_int_equal(kvreg_register_batch(f->pool, NULL, 1, out, status, &n), KVREG_EINVAL);
    assert_int_equal(kvreg_register_batch(f->pool, &f->d, 1, NULL, status, &n), KVREG_EINVAL);
    assert_int_equal(n, 5);
    assert_int_equal(kvreg_register_sequence(f->pool, NULL, 0, 1, out, status, &n), KVREG_EINVAL);
    assert_int_equal(kvreg_register_sequence_block(f->pool, NULL, 0, &b), KVREG_EINVAL);
    assert_int_equal(kvreg_acquire(NULL, 42, &b), KVREG_EINVAL);
    assert_int_equal(kvreg_acquire(f->pool, 42, NULL), KVREG_EINVAL);
    assert_int_equal(kvreg_acquire_prefix(NULL, hs, 2, out, &n), KVREG_EINVAL);
    assert_int_equal(kvreg_acquire_prefix(f->pool, NULL, 2, out, &n), KVREG_EINVAL);
    assert_int_equal(kvreg_acquire_prefix(f->pool, hs, 2, NULL, &n), KVREG_EINVAL);
    assert_int_equal(kvreg_release(NULL, 1), KVREG_EINVAL);
    assert_int_equal(kvreg_release_batch(NULL, out, 1, status, &n), KVREG_EINVAL);
    assert_int_equal(kvreg_release_batch(f->pool, NULL, 1, status, &n), KVREG_EINVAL);
    assert_true(kvreg_pool_contains(NULL, 42, &(int){0}) < 0);
    assert_int_equal(kvreg_pool_match(NULL, hs, 2, &n), KVREG_EINVAL);
    assert_int_equal(kvreg_pool_match(f->pool, NULL, 2, &n), KVREG_EINVAL);
    assert_int_equal(kvreg_pool_match(f->pool, hs, 2, NULL), KVREG_EINVAL);
    assert_int_equal(n, 5);

    /* with a live block: NULL outputs and the block-level queries */
    assert_int_equal(kvreg_register(f->pool, &f->d, &b), KVREG_OK);
    assert_int_equal(kvreg_block_get_info(NULL, b, &info), KVREG_EINVAL);
    assert_int_equal(kvreg_block_get_info(f->pool, b, NULL), KVREG_EINVAL);
    assert_int_equal(kvreg_block_refcount(NULL, b, &rc), KVREG_EINVAL);
    assert_int_equal(kvreg_block_refcount(f->pool, b, NULL), KVREG_EINVAL);
    assert_int_equal(kvreg_block_tokens(NULL, b, tk, 4, &n), KVREG_EINVAL);
    assert_int_equal(kvreg_block_tokens(f->pool, b, tk, 4, NULL), KVREG_EINVAL);
    assert_int_equal(kvreg_block_tokens(f->pool, b, tk, 4, &n), KVREG_ENOENT); /* not kept */
    assert_int_equal(kvreg_block_refcount(f->pool, b, &rc), KVREG_OK);
    assert_int_equal(rc, 1);
    assert_int_equal(kvreg_release(f->pool, b), KVREG_OK);
    assert_int_equal(stat_of(f->reg, KVREG_STAT_HASHES), 0);
}

/* Zero-length batches: the header does not say whether n == 0 is OK or EINVAL; either way
 * nothing may change and no output beyond the counters may be touched. */
static void t_zero_sizes(void **state)
{
    fixture *f = *state;
    size_t n = 5;
    int st = kvreg_register_batch(f->pool, NULL, 0, NULL, NULL, &n);
    assert_true(st == KVREG_OK || st == KVREG_EINVAL);
    if (st == KVREG_OK)
        assert_int_equal(n, 0);
    st = kvreg_release_batch(f->pool, NULL, 0, NULL, NULL);
    assert_true(st == KVREG_OK || st == KVREG_EINVAL);
    st = kvreg_acquire_prefix(f->pool, NULL, 0, NULL, &n);
    assert_true(st == KVREG_OK || st == KVREG_EINVAL);
    if (st == KVREG_OK)
        assert_int_equal(n, 0);
    st = kvreg_pool_match(f->pool, NULL, 0, &n);
    assert_true(st == KVREG_OK || st == KVREG_EINVAL);
    /* documented: count 0 with NULL outputs is a no-op */
    kvreg_sequence *seq = NULL;
    assert_int_equal(kvreg_sequence_new(&seq, 4, 0), KVREG_OK);
    assert_int_equal(kvreg_register_sequence(f->pool, seq, 0, 0, NULL, NULL, NULL), KVREG_OK);
    kvreg_sequence_free(seq);
    assert_int_equal(stat_of(f->reg, KVREG_STAT_HASHES), 0);
    assert_int_equal(stat_of(f->reg, KVREG_STAT_NEXT_EVENT_ID), 0);
}

static void t_sequence_ranges(void **state)
{
    fixture *f = *state;
    kvreg_sequence *seq = NULL;
    kvreg_block out[4];
    int status[4];
    size_t n = 9;
    assert_int_equal(kvreg_sequence_new(&seq, 4, KVREG_ROUTER_SALT), KVREG_OK);
    assert_int_equal(kvreg_sequence_extend(seq, toks, 10, NULL), KVREG_OK);
    /* first + count overflows size_t: must be ERANGE, not a wrapped small range */
    assert_int_equal(kvreg_register_sequence(f->pool, seq, SIZE_MAX, 2, out, status, &n), KVREG_ERANGE);
    assert_int_equal(kvreg_register_sequence(f->pool, seq, 1, SIZE_MAX, out, status, &n), KVREG_ERANGE);
    assert_int_equal(kvreg_register_sequence(f->pool, seq, 1, 2, out, status, &n), KVREG_ERANGE);
    assert_int_equal(kvreg_register_sequence_block(f->pool, seq, 2, &out[0]), KVREG_ESTATE);
    assert_int_equal(kvreg_register_sequence_block(f->pool, seq, 3, &out[0]), KVREG_ERANGE);
    assert_int_equal(kvreg_register_sequence_block(f->pool, seq, SIZE_MAX, &out[0]), KVREG_ERANGE);
    assert_int_equal(n, 9);
    assert_int_equal(stat_of(f->reg, KVREG_STAT_HASHES), 0);
    kvreg_sequence_free(seq);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_strerror_version),
        cmocka_unit_test(t_hash_args),
        cmocka_unit_test(t_sequence_args),
        cmocka_unit_test(t_config_args),
        cmocka_unit_test(t_registry_args),
        cmocka_unit_test_setup_teardown(t_block_args, setup, teardown),
        cmocka_unit_test_setup_teardown(t_zero_sizes, setup, teardown),
        cmocka_unit_test_setup_teardown(t_sequence_ranges, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
