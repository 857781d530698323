/* KVREG_INDEX_STAT_BLOCKS and kvreg_index_workers on hand-computed cases, and BLOCKS against a
 * distinct count the test keeps itself on random contents (one shard: long clusters that wrap
 * around the table's end). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include <kvreg_index.h>

static kvreg_index *new_index(int own, uint64_t shards)
{
    kvreg_index *idx = NULL;
    kvreg_index_config *cfg = NULL;
    assert_int_equal(kvreg_index_config_new(&cfg), KVREG_OK);
    assert_int_equal(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_BLOCK_SIZE, 2), KVREG_OK);
    assert_int_equal(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_SHARDS, shards), KVREG_OK);
    assert_int_equal(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_HASHES,
                                            own ? KVREG_INDEX_HASHES_OWN : KVREG_INDEX_HASHES_ENGINE), KVREG_OK);
    assert_int_equal(kvreg_index_new(&idx, cfg), KVREG_OK);
    kvreg_index_config_free(cfg);
    return idx;
}

static void store(kvreg_index *idx, uint64_t id, uint32_t dp, uint64_t seq, uint32_t medium, const uint64_t *h,
                  size_t n)
{
    kvreg_wire_event e;
    memset(&e, 0, sizeof e);
    e.type = KVREG_WIRE_STORED;
    e.medium = medium;
    e.block_hashes = h;
    e.n_block_hashes = n;
    assert_int_equal(kvreg_index_apply(idx, id, dp, seq, &e, 1, NULL), KVREG_OK);
}

static uint64_t stat(const kvreg_index *idx, uint32_t which)
{
    uint64_t v = 0;
    assert_int_equal(kvreg_index_stat(idx, which, &v), KVREG_OK);
    return v;
}

static void test_own_hand(void **state)
{
    kvreg_index *idx = new_index(1, 4);
    const uint64_t a[2] = {0x10, 0x20}, b[2] = {0x20, 0x30};
    kvreg_index_worker_info w[4];
    size_t n = 99;
    (void)state;
    assert_int_equal(stat(idx, KVREG_INDEX_STAT_BLOCKS), 0);
    assert_int_equal(kvreg_index_workers(idx, NULL, 0, sizeof w[0], &n), KVREG_OK);
    assert_int_equal(n, 0);
    store(idx, 1, 0, 0, KVREG_MEDIUM_GPU, a, 2);
    store(idx, 1, 0, 1, KVREG_MEDIUM_CPU, a + 1, 1);
    store(idx, 2, 5, 0, KVREG_MEDIUM_CPU, b, 1);
    store(idx, 2, 5, 7, KVREG_MEDIUM_STORAGE, b + 1, 1); /* a gap: next seq 8 */
    assert_int_equal(kvreg_index_clear_worker(idx, 0, 0, KVREG_INDEX_SEQ_NONE), KVREG_OK);
    /* blocks 0x10, 0x20, 0x30; entries (0x10,w1) (0x20,w1) (0x20,w2) (0x30,w2) */
    assert_int_equal(stat(idx, KVREG_INDEX_STAT_BLOCKS), 3);
    assert_int_equal(stat(idx, KVREG_INDEX_STAT_ENTRIES), 4);

    assert_int_equal(kvreg_index_workers(idx, w, 2, sizeof w[0], &n), KVREG_ERANGE);
    assert_int_equal(n, 3);
    memset(w, 0xee, sizeof w);
    assert_int_equal(kvreg_index_workers(idx, w, 4, sizeof w[0], &n), KVREG_OK);
    assert_int_equal(n, 3);
    assert_true(w[0].worker_id == 0 && w[0].dp_rank == 0);
    assert_true(w[0].next_seq == KVREG_INDEX_SEQ_NONE);
    assert_int_equal(w[0].entries, 0);
    assert_true(w[1].worker_id == 1 && w[1].dp_rank == 0);
    assert_int_equal(w[1].next_seq, 2);
    assert_int_equal(w[1].entries, 2);
    assert_int_equal(w[1].tier_entries[KVREG_MEDIUM_GPU], 2);
    assert_int_equal(w[1].tier_entries[KVREG_MEDIUM_CPU], 1);
    assert_int_equal(w[1].tier_entries[KVREG_MEDIUM_STORAGE], 0);
    assert_int_equal(w[1].mapped_hashes, 0);
    assert_int_equal(w[1].reserved32, 0);
    assert_int_equal(w[1].reserved[2], 0);
    assert_int_equal(w[1].partition, 0);
    assert_true(w[2].worker_id == 2 && w[2].dp_rank == 5);
    assert_int_equal(w[2].next_seq, 8);
    assert_int_equal(w[2].entries, 2);
    assert_int_equal(w[2].tier_entries[KVREG_MEDIUM_GPU], 0);
    assert_int_equal(w[2].tier_entries[KVREG_MEDIUM_CPU], 1);
    assert_int_equal(w[2].tier_entries[KVREG_MEDIUM_STORAGE], 1);

    /* an older caller's struct (up to mapped_hashes): its stride, nothing written beyond */
    {
        const size_t small = offsetof(kvreg_index_worker_info, mapped_hashes) + 8;
        unsigned char buf[3 * sizeof(kvreg_index_worker_info)];
        kvreg_index_worker_info x;
        memset(buf, 0xab, sizeof buf);
        assert_int_equal(kvreg_index_workers(idx, buf, 3, small, &n), KVREG_OK);
        memcpy(&x, buf + 2 * small, small);
        assert_true(x.worker_id == 2 && x.entries == 2 && x.next_seq == 8);
        assert_int_equal(buf[3 * small], 0xab);
        assert_int_equal(kvreg_index_workers(idx, buf, 3, small - 1, &n), KVREG_EINVAL);
    }
    assert_int_equal(kvreg_index_workers(idx, NULL, 1, sizeof w[0], &n), KVREG_EINVAL);
    assert_int_equal(kvreg_index_workers(NULL, w, 4, sizeof w[0], &n), KVREG_EINVAL);
    assert_int_equal(kvreg_index_workers(idx, w, 4, sizeof w[0], NULL), KVREG_EINVAL);

    assert_int_equal(kvreg_index_remove_worker(idx, 1, 0), KVREG_OK); /* 0x10 gone, 0x20 stays */
    assert_int_equal(stat(idx, KVREG_INDEX_STAT_BLOCKS), 2);
    kvreg_index_free(idx);
}

/* ENGINE mode: two engine hashes of one worker naming the same content are one entry, one
 * block, two mapped hashes. */
static void test_engine_hand(void **state)
{
    kvreg_index *idx = new_index(0, 4);
    const uint32_t tokens[2] = {5, 6};
    const uint64_t e1[1] = {111}, e2[1] = {222};
    kvreg_wire_event e;
    kvreg_index_worker_info w[1];
    size_t n = 0;
    (void)state;
    memset(&e, 0, sizeof e);
    e.type = KVREG_WIRE_STORED;
    e.medium = KVREG_MEDIUM_GPU;
    e.block_hashes = e1;
    e.n_block_hashes = 1;
    e.token_ids = tokens;
    e.n_token_ids = 2;
    assert_int_equal(kvreg_index_apply(idx, 9, 1, 0, &e, 1, NULL), KVREG_OK);
    e.block_hashes = e2;
    e.medium = KVREG_MEDIUM_CPU;
    assert_int_equal(kvreg_index_apply(idx, 9, 1, 1, &e, 1, NULL), KVREG_OK);
    assert_int_equal(stat(idx, KVREG_INDEX_STAT_BLOCKS), 1);
    assert_int_equal(kvreg_index_workers(idx, w, 1, sizeof w[0], &n), KVREG_OK);
    assert_int_equal(n, 1);
    assert_int_equal(w[0].entries, 1);
    assert_int_equal(w[0].tier_entries[KVREG_MEDIUM_GPU], 1);
    assert_int_equal(w[0].tier_entries[KVREG_MEDIUM_CPU], 1);
    assert_int_equal(w[0].mapped_hashes, 2);
    assert_int_equal(w[0].next_seq, 2);
    kvreg_index_free(idx);
}

static int cmp64(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Random contents in one shard: BLOCKS equals the distinct hashes the test stored, and each
 * worker's entries the distinct hashes it stored. */
static void test_blocks_random(void **state)
{
    enum { W = 6, PER = 700, POOL = 1500 };
    static uint64_t h[W][PER], all[W * PER], mine[PER];
    uint64_t x = 12345;
    size_t i, j, distinct, n = 0;
    kvreg_index_worker_info info[W];
    int round;
    (void)state;
    for (round = 0; round < 4; round++) {
        kvreg_index *idx = new_index(1, round < 2 ? 1 : 16);
        for (i = 0; i < W; i++) {
            for (j = 0; j < PER; j++) {
                x = x * UINT64_C(6364136223846793005) + 1442695040888963407u;
                h[i][j] = (x >> 33) % POOL * UINT64_C(0x9E3779B97F4A7C15) + (uint64_t)round;
                all[i * PER + j] = h[i][j];
            }
            store(idx, 100 + i, 0, 0, (uint32_t)(i % 3), h[i], PER);
        }
        qsort(all, W * PER, sizeof all[0], cmp64);
        for (i = 0, distinct = 0; i < W * PER; i++)
            distinct += i == 0 || all[i] != all[i - 1];
        assert_int_equal(stat(idx, KVREG_INDEX_STAT_BLOCKS), distinct);
        assert_int_equal(kvreg_index_workers(idx, info, W, sizeof info[0], &n), KVREG_OK);
        assert_int_equal(n, W);
        for (i = 0; i < W; i++) {
            size_t own = 0;
            memcpy(mine, h[i], sizeof mine);
            qsort(mine, PER, sizeof mine[0], cmp64);
            for (j = 0; j < PER; j++)
                own += j == 0 || mine[j] != mine[j - 1];
            assert_true(info[i].worker_id == 100 + i);
            assert_int_equal(info[i].entries, own);
            assert_int_equal(info[i].tier_entries[i % 3], own);
        }
        kvreg_index_free(idx);
    }
}

/* The highest seq a batch can carry is SEQ_NONE - 1: after it the next one cannot be named, so
 * the worker accepts any seq as its start again (listed as SEQ_NONE), rather than expecting
 * SEQ_NONE itself and refusing every later batch as STALE. */
static void test_seq_at_the_top(void **state)
{
    (void)state;
    kvreg_index *idx = new_index(1, 1);
    const uint64_t h[1] = {7};
    store(idx, 1, 0, KVREG_INDEX_SEQ_NONE - 1, KVREG_MEDIUM_GPU, h, 1);
    kvreg_index_worker_info w;
    size_t n = 0;
    assert_int_equal(kvreg_index_workers(idx, &w, 1, sizeof w, &n), KVREG_OK);
    assert_int_equal(n, 1);
    assert_true(w.next_seq == KVREG_INDEX_SEQ_NONE);
    const uint64_t h2[1] = {8};
    kvreg_wire_event e;
    memset(&e, 0, sizeof e);
    e.type = KVREG_WIRE_STORED;
    e.medium = KVREG_MEDIUM_GPU;
    e.block_hashes = h2;
    e.n_block_hashes = 1;
    kvreg_index_apply_info info;
    assert_int_equal(kvreg_index_apply(idx, 1, 0, 5, &e, 1, &info), KVREG_OK);
    assert_int_equal(info.flags & (KVREG_INDEX_F_STALE | KVREG_INDEX_F_SKIPPED | KVREG_INDEX_F_GAP), 0);
    assert_true(info.expected_seq == KVREG_INDEX_SEQ_NONE);
    assert_int_equal(info.blocks_stored, 1);
    assert_int_equal(kvreg_index_workers(idx, &w, 1, sizeof w, &n), KVREG_OK);
    assert_true(w.next_seq == 6);
    kvreg_index_free(idx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_own_hand),
        cmocka_unit_test(test_engine_hand),
        cmocka_unit_test(test_blocks_random),
        cmocka_unit_test(test_seq_at_the_top),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
