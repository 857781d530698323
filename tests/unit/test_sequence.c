/* kvreg_sequence: eager commit, truncate/unwind/pop/reset, views, and bad input (spec §1.3-1.5). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <kvreg.h>

static kvreg_sequence *make(uint32_t bs, const uint32_t *t, size_t n) {
    kvreg_sequence *s = NULL;
    assert_int_equal(kvreg_sequence_new(&s, bs, 1337), KVREG_OK);
    assert_int_equal(kvreg_sequence_extend(s, t, n, NULL), KVREG_OK);
    return s;
}

static const uint32_t T12[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};

static void test_block_size_zero_is_einval(void **state) {
    (void)state;
    kvreg_sequence *s = (kvreg_sequence *)0x1;
    assert_int_equal(kvreg_sequence_new(&s, 0, 0), KVREG_EINVAL);
    assert_int_equal(kvreg_sequence_new(NULL, 4, 0), KVREG_EINVAL);
}

static void test_eager_commit(void **state) {
    (void)state;
    kvreg_sequence *s = NULL;
    size_t done = 99;
    assert_int_equal(kvreg_sequence_new(&s, 4, 1337), KVREG_OK);
    assert_int_equal(kvreg_sequence_extend(s, T12, 4, &done), KVREG_OK);
    assert_int_equal(done, 1); /* a full block commits at once, not on the next token */
    const uint32_t *p = NULL;
    size_t n = 99;
    assert_int_equal(kvreg_sequence_partial_tokens(s, &p, &n), KVREG_OK);
    assert_int_equal(n, 0);
    assert_int_equal(kvreg_sequence_extend(s, T12 + 4, 0, &done), KVREG_OK);
    assert_int_equal(done, 0);
    int completed = -1;
    for (int i = 4; i < 7; i++) {
        assert_int_equal(kvreg_sequence_append(s, T12[i], &completed), KVREG_OK);
        assert_int_equal(completed, 0);
    }
    assert_int_equal(kvreg_sequence_append(s, T12[7], &completed), KVREG_OK);
    assert_int_equal(completed, 1);
    assert_int_equal(kvreg_sequence_num_blocks(s), 2);
    kvreg_block_info b;
    assert_int_equal(kvreg_sequence_block(s, 1, &b), KVREG_OK);
    assert_true(b.sequence_hash == UINT64_C(4945711292740353085));
    assert_int_equal(b.has_parent, 1);
    assert_true(b.parent_sequence_hash == UINT64_C(14643705804678351452));
    kvreg_sequence_free(s);
}

static void test_extend_reports_completed_range(void **state) {
    (void)state;
    kvreg_sequence *s = NULL;
    size_t done = 0;
    assert_int_equal(kvreg_sequence_new(&s, 4, 1337), KVREG_OK);
    assert_int_equal(kvreg_sequence_extend(s, T12, 2, &done), KVREG_OK);
    assert_int_equal(done, 0);
    assert_int_equal(kvreg_sequence_extend(s, T12 + 2, 8, &done), KVREG_OK);
    assert_int_equal(done, 2);
    assert_int_equal(kvreg_sequence_total_tokens(s), 10);
    kvreg_sequence_free(s);
}

static void test_views(void **state) {
    (void)state;
    kvreg_sequence *s = make(4, T12, 10);
    const uint32_t *p = NULL;
    size_t n = 0;
    assert_int_equal(kvreg_sequence_block_tokens(s, 1, &p, &n), KVREG_OK);
    assert_int_equal(n, 4);
    assert_int_equal(p[0], 5);
    assert_int_equal(p[3], 8);
    assert_int_equal(kvreg_sequence_partial_tokens(s, &p, &n), KVREG_OK);
    assert_int_equal(n, 2);
    assert_int_equal(p[0], 9);
    assert_int_equal(p[1], 10);
    assert_int_equal(kvreg_sequence_block_tokens(s, 2, &p, &n), KVREG_ERANGE);
    kvreg_block_info b;
    assert_int_equal(kvreg_sequence_block(s, 2, &b), KVREG_ERANGE);
    assert_int_equal(kvreg_sequence_block_size(s), 4);
    assert_true(kvreg_sequence_salt(s) == 1337);
    kvreg_sequence_free(s);
}

static void test_truncate_keeps_surviving_hashes(void **state) {
    (void)state;
    kvreg_sequence *s = make(4, T12, 12);
    kvreg_block_info before, after;
    assert_int_equal(kvreg_sequence_block(s, 0, &before), KVREG_OK);
    assert_int_equal(kvreg_sequence_truncate(s, 6), KVREG_OK);
    assert_int_equal(kvreg_sequence_num_blocks(s), 1);
    assert_int_equal(kvreg_sequence_total_tokens(s), 6);
    assert_int_equal(kvreg_sequence_block(s, 0, &after), KVREG_OK);
    assert_true(before.sequence_hash == after.sequence_hash);
    const uint32_t *p = NULL;
    size_t n = 0;
    assert_int_equal(kvreg_sequence_partial_tokens(s, &p, &n), KVREG_OK);
    assert_int_equal(n, 2);
    assert_int_equal(p[1], 6);
    /* truncate past the end is a no-op */
    assert_int_equal(kvreg_sequence_truncate(s, 100), KVREG_OK);
    assert_int_equal(kvreg_sequence_total_tokens(s), 6);
    /* re-extending rebuilds block 1 with the same hash as before */
    assert_int_equal(kvreg_sequence_extend(s, T12 + 6, 2, NULL), KVREG_OK);
    assert_int_equal(kvreg_sequence_block(s, 1, &after), KVREG_OK);
    assert_true(after.sequence_hash == UINT64_C(4945711292740353085));
    kvreg_sequence_free(s);
}

static void test_unwind(void **state) {
    (void)state;
    kvreg_sequence *s = make(4, T12, 10);
    assert_int_equal(kvreg_sequence_unwind(s, 11), KVREG_ERANGE);
    assert_int_equal(kvreg_sequence_total_tokens(s), 10); /* unchanged */
    assert_int_equal(kvreg_sequence_unwind(s, 3), KVREG_OK);
    assert_int_equal(kvreg_sequence_total_tokens(s), 7);
    assert_int_equal(kvreg_sequence_num_blocks(s), 1);
    assert_int_equal(kvreg_sequence_unwind(s, 7), KVREG_OK); /* n == total is allowed */
    assert_int_equal(kvreg_sequence_total_tokens(s), 0);
    assert_int_equal(kvreg_sequence_num_blocks(s), 0);
    kvreg_sequence_free(s);
}

static void test_pop_and_reset(void **state) {
    (void)state;
    kvreg_sequence *s = make(4, T12, 5);
    uint32_t t = 0;
    assert_int_equal(kvreg_sequence_pop(s, &t), KVREG_OK);
    assert_int_equal(t, 5);
    assert_int_equal(kvreg_sequence_num_blocks(s), 1);
    assert_int_equal(kvreg_sequence_pop(s, &t), KVREG_OK); /* dissolves block 0 */
    assert_int_equal(t, 4);
    assert_int_equal(kvreg_sequence_num_blocks(s), 0);
    assert_int_equal(kvreg_sequence_total_tokens(s), 3);
    assert_int_equal(kvreg_sequence_reset(s), KVREG_OK);
    assert_int_equal(kvreg_sequence_total_tokens(s), 0);
    assert_int_equal(kvreg_sequence_pop(s, &t), KVREG_ENOENT);
    assert_int_equal(kvreg_sequence_block_size(s), 4);
    kvreg_sequence_free(s);
}

static void test_null_arguments(void **state) {
    (void)state;
    kvreg_sequence *s = make(4, T12, 4);
    uint32_t t;
    const uint32_t *p;
    size_t n;
    kvreg_block_info b;
    assert_int_equal(kvreg_sequence_extend(NULL, T12, 1, NULL), KVREG_EINVAL);
    assert_int_equal(kvreg_sequence_extend(s, NULL, 1, NULL), KVREG_EINVAL);
    assert_int_equal(kvreg_sequence_extend(s, NULL, 0, NULL), KVREG_OK);
    assert_int_equal(kvreg_sequence_extend(s, T12, SIZE_MAX, NULL), KVREG_ERANGE);
    assert_int_equal(kvreg_sequence_append(NULL, 1, NULL), KVREG_EINVAL);
    assert_int_equal(kvreg_sequence_truncate(NULL, 0), KVREG_EINVAL);
    assert_int_equal(kvreg_sequence_unwind(NULL, 0), KVREG_EINVAL);
    assert_int_equal(kvreg_sequence_pop(NULL, &t), KVREG_EINVAL);
    assert_int_equal(kvreg_sequence_pop(s, NULL), KVREG_EINVAL);
    assert_int_equal(kvreg_sequence_reset(NULL), KVREG_EINVAL);
    assert_int_equal(kvreg_sequence_block(NULL, 0, &b), KVREG_EINVAL);
    assert_int_equal(kvreg_sequence_block(s, 0, NULL), KVREG_EINVAL);
    assert_int_equal(kvreg_sequence_block_tokens(s, 0, NULL, &n), KVREG_EINVAL);
    assert_int_equal(kvreg_sequence_partial_tokens(NULL, &p, &n), KVREG_EINVAL);
    assert_int_equal(kvreg_sequence_num_blocks(NULL), 0);
    assert_int_equal(kvreg_sequence_total_tokens(NULL), 0);
    assert_int_equal(kvreg_sequence_block_size(NULL), 0);
    kvreg_sequence_free(NULL);
    kvreg_sequence_free(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_block_size_zero_is_einval),
        cmocka_unit_test(test_eager_commit),
        cmocka_unit_test(test_extend_reports_completed_range),
        cmocka_unit_test(test_views),
        cmocka_unit_test(test_truncate_keeps_surviving_hashes),
        cmocka_unit_test(test_unwind),
        cmocka_unit_test(test_pop_and_reset),
        cmocka_unit_test(test_null_arguments),
    };
    return cmocka_run_group_tests_name("sequence", tests, NULL, NULL);
}
