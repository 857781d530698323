/* kvreg_sequence: eager commit (a block is hashed as soon as its last token arrives),
 * truncate/unwind/pop/reset, views, extending from the sequence's own views, appends against one
 * extend, and bad or impossible sizes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <kvreg.h>
#include <stdlib.h>
#include <string.h>

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
    assert_int_equal(kvreg_sequence_extend(s, T12, SIZE_MAX, NULL), KVREG_EOVERFLOW);
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

/* Block 1 of T12 ({5, 6, 7, 8}) at salt 1337: a public vector (tests/vectors/public.json). */
#define HASH_5678 UINT64_C(16777012769546811212)

static uintptr_t block0_address(const kvreg_sequence *s) {
    const uint32_t *p = NULL;
    size_t n = 0;
    assert_int_equal(kvreg_sequence_block_tokens(s, 0, &p, &n), KVREG_OK);
    return (uintptr_t)p; /* kept as an integer: the pointer itself dies with the next change */
}

/* Appending one token at a time must not copy the whole sequence each time. The address of
 * block 0's tokens changes only when the token storage moves, so with geometric growth it moves
 * O(log n) times over n appends; storage sized exactly per call moves on every append. */
static void test_appends_move_storage_logarithmically(void **state) {
    (void)state;
    kvreg_sequence *s = make(16, T12, 12);
    assert_int_equal(kvreg_sequence_extend(s, T12, 4, NULL), KVREG_OK);
    uintptr_t at = block0_address(s);
    size_t moves = 0;
    for (uint32_t i = 0; i < 50000; i++) {
        assert_int_equal(kvreg_sequence_append(s, i, NULL), KVREG_OK);
        const uintptr_t now = block0_address(s);
        moves += now != at;
        at = now;
    }
    /* doubling needs 12 moves from 16 to 50016 tokens; 40 still allows growth by 1.25x */
    assert_true(moves <= 40);
    assert_int_equal(kvreg_sequence_total_tokens(s), 50016);
    kvreg_sequence_free(s);
}

static uint32_t next_token(uint64_t *x) { /* splitmix64, high half */
    uint64_t z = (*x += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return (uint32_t)((z ^ (z >> 31)) >> 32);
}

/* 100000 single-token appends build the same blocks, hashes and partial as one extend. */
static void test_appends_match_one_extend(void **state) {
    (void)state;
    enum { N = 100000, BS = 16 };
    uint32_t *t = malloc(N * sizeof *t);
    assert_non_null(t);
    uint64_t x = 42;
    for (size_t i = 0; i < N; i++) t[i] = next_token(&x);
    kvreg_sequence *one = make(BS, t, N), *many = make(BS, NULL, 0);
    size_t completed_total = 0;
    for (size_t i = 0; i < N; i++) {
        int completed = -1;
        assert_int_equal(kvreg_sequence_append(many, t[i], &completed), KVREG_OK);
        assert_int_equal(completed, (i + 1) % BS == 0);
        completed_total += (size_t)completed;
    }
    assert_int_equal(completed_total, N / BS);
    assert_int_equal(kvreg_sequence_num_blocks(many), N / BS);
    assert_int_equal(kvreg_sequence_num_blocks(one), N / BS);
    assert_int_equal(kvreg_sequence_total_tokens(many), N);
    for (size_t i = 0; i < N / BS; i++) {
        kvreg_block_info a, b;
        assert_int_equal(kvreg_sequence_block(one, i, &a), KVREG_OK);
        assert_int_equal(kvreg_sequence_block(many, i, &b), KVREG_OK);
        assert_memory_equal(&a, &b, sizeof a);
        assert_int_equal(b.position, i);
    }
    const uint32_t *p = NULL;
    size_t n = 0;
    assert_int_equal(kvreg_sequence_partial_tokens(many, &p, &n), KVREG_OK);
    assert_int_equal(n, N % BS);
    assert_memory_equal(p, t + N - N % BS, n * sizeof *p);
    kvreg_sequence_free(one);
    kvreg_sequence_free(many);
    free(t);
}

/* Extending with the sequence's own block view: the tokens read are those the view showed
 * before the call, even when the call moves the storage the view points into. */
static void test_extend_with_own_block_view(void **state) {
    (void)state;
    kvreg_sequence *s = make(4, T12, 8);
    for (int i = 0; i < 64; i++) {
        const uint32_t *p = NULL;
        size_t n = 0;
        size_t done = 0;
        assert_int_equal(kvreg_sequence_block_tokens(s, 1, &p, &n), KVREG_OK);
        assert_int_equal(kvreg_sequence_extend(s, p, n, &done), KVREG_OK);
        assert_int_equal(done, 1);
    }
    assert_int_equal(kvreg_sequence_num_blocks(s), 66);
    for (size_t i = 1; i < 66; i++) {
        const uint32_t *p = NULL;
        size_t n = 0;
        kvreg_block_info b;
        assert_int_equal(kvreg_sequence_block_tokens(s, i, &p, &n), KVREG_OK);
        assert_int_equal(p[0], 5);
        assert_int_equal(p[3], 8);
        assert_int_equal(kvreg_sequence_block(s, i, &b), KVREG_OK);
        assert_true(b.block_hash == HASH_5678);
    }
    kvreg_sequence_free(s);
}

/* The same through the partial view, which doubles the sequence until a block completes. The
 * expected tokens come from copying in the test: expected[len..] = expected[from..len). */
static void test_extend_with_own_partial_view(void **state) {
    (void)state;
    enum { BS = 64 };
    uint32_t want[256];
    size_t len = 3;
    kvreg_sequence *s = make(BS, T12, len);
    memcpy(want, T12, len * sizeof *want);
    for (int step = 0; step < 8; step++) {
        const uint32_t *p = NULL;
        size_t n = 0;
        assert_int_equal(kvreg_sequence_partial_tokens(s, &p, &n), KVREG_OK);
        if (n == 0) break;
        memcpy(want + len, want + len - n, n * sizeof *want);
        assert_int_equal(kvreg_sequence_extend(s, p, n, NULL), KVREG_OK);
        len += n;
    }
    /* 3, 6, 12, 24, 48, 96 (block 0 done, 32 left), 128 (block 1 done, none left) */
    assert_int_equal(len, 128);
    assert_int_equal(kvreg_sequence_total_tokens(s), 128);
    assert_int_equal(kvreg_sequence_num_blocks(s), 2);
    kvreg_block_info want_info[2];
    size_t nb = 0;
    assert_int_equal(kvreg_hash_blocks(want, len, BS, 1337, want_info, 2, &nb), KVREG_OK);
    for (size_t i = 0; i < 2; i++) {
        const uint32_t *p = NULL;
        size_t n = 0;
        kvreg_block_info b;
        assert_int_equal(kvreg_sequence_block_tokens(s, i, &p, &n), KVREG_OK);
        assert_memory_equal(p, want + i * BS, BS * sizeof *p);
        assert_int_equal(kvreg_sequence_block(s, i, &b), KVREG_OK);
        assert_memory_equal(&b, &want_info[i], sizeof b);
    }
    kvreg_sequence_free(s);
}

/* Sizes no sequence can ever hold are KVREG_EOVERFLOW, before reading a token or allocating:
 * T12 holds 12 tokens, so reading n of them would fault (or trip ASan). The sequence is kept. */
static void expect_overflow(uint32_t bs, size_t have, size_t n) {
    kvreg_sequence *s = make(bs, T12, have);
    const size_t blocks = kvreg_sequence_num_blocks(s);
    size_t done = 77;
    assert_int_equal(kvreg_sequence_extend(s, T12, n, &done), KVREG_EOVERFLOW);
    assert_int_equal(done, 77);
    assert_int_equal(kvreg_sequence_total_tokens(s), have);
    assert_int_equal(kvreg_sequence_num_blocks(s), blocks);
    assert_int_equal(kvreg_sequence_append(s, 13, NULL), KVREG_OK); /* still usable */
    kvreg_sequence_free(s);
}

/* A size within the limits that no allocator can provide (2^55 blocks of 32 bytes for block 64)
 * is KVREG_ENOMEM, not KVREG_EOVERFLOW, and also leaves the sequence as it was. Under ASan a
 * failed allocation must return NULL rather than abort, hence the default option below. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }

static void test_extend_enomem_keeps_sequence(void **state) {
    (void)state;
    const size_t max_tokens = (size_t)PTRDIFF_MAX / sizeof(uint32_t);
    kvreg_sequence *s = make(64, T12, 12);
    size_t done = 77;
    assert_int_equal(kvreg_sequence_extend(s, T12, max_tokens - 12, &done), KVREG_ENOMEM);
    assert_int_equal(done, 77);
    assert_int_equal(kvreg_sequence_total_tokens(s), 12);
    const uint32_t *p = NULL;
    size_t n = 0;
    assert_int_equal(kvreg_sequence_partial_tokens(s, &p, &n), KVREG_OK);
    assert_int_equal(n, 12);
    assert_memory_equal(p, T12, sizeof T12);
    assert_int_equal(kvreg_sequence_append(s, 13, NULL), KVREG_OK);
    kvreg_sequence_free(s);
}

static void test_extend_impossible_sizes(void **state) {
    (void)state;
    const size_t max_tokens = (size_t)PTRDIFF_MAX / sizeof(uint32_t);
    const size_t max_blocks = (size_t)PTRDIFF_MAX / sizeof(kvreg_block_info);
    expect_overflow(4, 10, SIZE_MAX);                   /* total + n wraps around */
    expect_overflow(4, 0, SIZE_MAX / 4 + 1);            /* n * 4 bytes wraps around */
    expect_overflow(64, 10, max_tokens - 10 + 1);       /* one token over the token limit */
    expect_overflow(64, 0, max_tokens + 1);
    expect_overflow(1, 0, max_blocks + 1);              /* tokens fit, the block array cannot */
    expect_overflow(1, 10, max_blocks - 10 + 1);
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
        cmocka_unit_test(test_appends_move_storage_logarithmically),
        cmocka_unit_test(test_appends_match_one_extend),
        cmocka_unit_test(test_extend_with_own_block_view),
        cmocka_unit_test(test_extend_with_own_partial_view),
        cmocka_unit_test(test_extend_impossible_sizes),
        cmocka_unit_test(test_extend_enomem_keeps_sequence),
    };
    return cmocka_run_group_tests_name("sequence", tests, NULL, NULL);
}
