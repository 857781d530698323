/* Registry and pools through the C API: a hash is registered exactly while some pool holds it
 * (one Register when the first pool takes it, one Remove when the last lets go), release is
 * synchronous, EEXIST changes nothing, handles are per pool, kvreg_pool_free releases
 * everything the pool holds, and the limits kvreg.h states (KVREG_MAX_POOLS). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <kvreg.h>
#include <stdlib.h>
#include <string.h>

#include "recorder.h"
#include "kvreg_answer.h"

static const uint32_t T12[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};

typedef struct fixture {
    recorder rec;
    kvreg_registry *reg;
    kvreg_pool *a, *b;
    kvreg_sequence *seq; /* tokens 1..10, B=4, salt 1337: two blocks + partial [9,10] */
} fixture;

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    f->reg = recorder_registry(&f->rec, 0);
    if (kvreg_pool_new(&f->a, f->reg, "G1") || kvreg_pool_new(&f->b, f->reg, "G2")) return -1;
    if (kvreg_sequence_new(&f->seq, 4, 1337) || kvreg_sequence_extend(f->seq, T12, 10, NULL)) return -1;
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    kvreg_registry_free(f->reg);
    assert_int_equal(f->rec.destroyed, 1); /* destroy-notify exactly once, at free */
    kvreg_sequence_free(f->seq);
    free(f);
    return 0;
}

static uint64_t seqhash(fixture *f, size_t i) {
    kvreg_block_info b;
    assert_int_equal(kvreg_sequence_block(f->seq, i, &b), KVREG_OK);
    return b.sequence_hash;
}

static void test_register_release_one_pool(void **state) {
    fixture *f = *state;
    kvreg_block h = 0;
    kvreg_block_desc d = seq_desc(f->seq, 0);
    assert_int_equal(kvreg_register(f->a, &d, &h), KVREG_OK);
    assert_true(h != KVREG_BLOCK_NONE);
    assert_int_equal(kvt_pool_has(f->a, d.sequence_hash), 1);
    assert_int_equal(kvt_pool_has(f->b, d.sequence_hash), 0);
    assert_int_equal(kvt_registry_has(f->reg, d.sequence_hash), 1);
    assert_int_equal(kvreg_pool_size(f->a), 1);
    assert_int_equal(kvreg_release(f->a, h), KVREG_OK);
    /* synchronous: gone the moment the last reference goes (kvreg_release: "When the pool's
     * last reference goes, the hash leaves the pool at once"), no deferred cleanup */
    assert_int_equal(kvt_pool_has(f->a, d.sequence_hash), 0);
    assert_int_equal(kvt_registry_has(f->reg, d.sequence_hash), 0);
    assert_int_equal(kvreg_pool_size(f->a), 0);
    assert_int_equal(f->rec.n, 2);
    assert_int_equal(f->rec.events[0].kind, KVREG_EVENT_REGISTER);
    assert_int_equal(f->rec.events[1].kind, KVREG_EVENT_REMOVE);
}

static void test_partial_block_is_estate(void **state) {
    fixture *f = *state;
    kvreg_block h = 0;
    kvreg_block_desc d = seq_desc(f->seq, 0);
    d.n_tokens = 3; /* 3 of 4 tokens: not complete */
    assert_int_equal(kvreg_register(f->a, &d, &h), KVREG_ESTATE);
    d.n_tokens = 5;
    assert_int_equal(kvreg_register(f->a, &d, &h), KVREG_EINVAL);
    assert_int_equal(kvreg_register_sequence_block(f->a, f->seq, 2, &h), KVREG_ESTATE); /* partial */
    assert_int_equal(kvreg_register_sequence_block(f->a, f->seq, 3, &h), KVREG_ERANGE);
    assert_int_equal(kvreg_pool_size(f->a), 0);
    assert_int_equal(f->rec.n, 0);
}

static void test_eexist_leaves_state_unchanged(void **state) {
    fixture *f = *state;
    kvreg_block h1 = 0, h2 = 0;
    uint32_t rc = 0;
    assert_int_equal(kvreg_register_sequence_block(f->a, f->seq, 0, &h1), KVREG_OK);
    assert_int_equal(kvreg_register_sequence_block(f->a, f->seq, 0, &h2), KVREG_EEXIST);
    assert_true(h2 == 0);
    assert_int_equal(kvreg_block_refcount(f->a, h1, &rc), KVREG_OK);
    assert_int_equal(rc, 1);
    assert_int_equal(kvreg_pool_size(f->a), 1);
    assert_int_equal(f->rec.n, 1);
    assert_int_equal(kvreg_release(f->a, h1), KVREG_OK);
}

static void test_two_pools_share_one_registration(void **state) {
    fixture *f = *state;
    kvreg_block ha = 0, hb = 0;
    assert_int_equal(kvreg_register_sequence_block(f->a, f->seq, 0, &ha), KVREG_OK);
    assert_int_equal(kvreg_register_sequence_block(f->b, f->seq, 0, &hb), KVREG_OK);
    assert_int_equal(f->rec.n, 1); /* the second pool shares it: no second Register */
    assert_int_equal(f->rec.events[0].pool_id, kvreg_pool_id(f->a));
    assert_int_equal(kvreg_release(f->a, ha), KVREG_OK);
    assert_int_equal(f->rec.n, 1); /* B still holds it: no Remove */
    assert_int_equal(kvt_registry_has(f->reg, seqhash(f, 0)), 1);
    assert_int_equal(kvt_pool_has(f->a, seqhash(f, 0)), 0);
    assert_int_equal(kvreg_release(f->b, hb), KVREG_OK);
    assert_int_equal(f->rec.n, 2);
    assert_int_equal(f->rec.events[1].kind, KVREG_EVENT_REMOVE);
    assert_int_equal(f->rec.events[1].pool_id, kvreg_pool_id(f->b));
    assert_int_equal(kvt_registry_has(f->reg, seqhash(f, 0)), 0);
}

/* Twelve pools hold one hash (ids 1..12: pools 1 and 9, 2 and 10, ... share a bit of the
 * chain's member filter, record.hpp). Every pool's second registration is EEXIST and a
 * filter-mate's is not; members leave from the middle, the head and the end of the chain;
 * every remaining pool still finds its block (acquire, get_info, release), the hash keeps the
 * block and parent of its first registration in every pool's get_info and in the Remove, and
 * only the last release emits it. */
static void test_chain_of_many_pools(void **state) {
    (void)state;
    enum { NP = 20 }; /* more pools than the filter has bits (14): ids i and i + 14 share one */
    recorder *rec = calloc(1, sizeof *rec);
    kvreg_registry *reg = recorder_registry(rec, 0);
    kvreg_pool *p[NP];
    kvreg_block h[NP];
    const uint64_t S = 0x1234567890ABCDEFull, B = 0xB10C, PARENT = 0xFA7E4;
    for (int i = 0; i < NP; i++) {
        assert_int_equal(kvreg_pool_new(&p[i], reg, "P"), KVREG_OK);
        assert_int_equal(kvreg_pool_id(p[i]), (uint16_t)(i + 1));
    }
    /* pools join in the order 0, 14 (0's filter-mate), 1, 15, 2, ...: a mate's bit is set first */
    const int join[NP] = {0, 14, 1, 15, 2, 16, 3, 17, 4, 18, 5, 19, 6, 7, 8, 9, 10, 11, 12, 13};
    for (int k = 0; k < NP; k++) {
        const int i = join[k];
        /* later pools give other block and parent hashes: the hash keeps its first ones */
        kvreg_block_desc d = hash_desc(S, k ? B + 1 : B, 1, k ? PARENT + 1 : PARENT);
        kvreg_block again = 0;
        assert_int_equal(kvreg_register(p[i], &d, &h[i]), KVREG_OK);
        assert_int_equal(kvreg_register(p[i], &d, &again), KVREG_EEXIST);
        assert_int_equal(kvt_pool_has(p[i], S), 1);
    }
    assert_int_equal(rec->n, 1);
    assert_int_equal(rec->events[0].pool_id, 1);
    /* Leave in an order that takes the head (pool 0, the first to register), members in the
     * middle and at the end, and filter-mates of pools still in. */
    const int leave[NP] = {5, 0, 15, 7, 14, 2, 19, 1, 4, 16, 6, 13, 8, 17, 9, 18, 10, 12, 11, 3};
    for (int k = 0; k < NP; k++) {
        for (int j = k; j < NP; j++) { /* every remaining pool */
            const int i = leave[j];
            kvreg_block_info info;
            kvreg_block got = 0;
            assert_int_equal(kvreg_block_get_info(p[i], h[i], &info), KVREG_OK);
            assert_true(info.sequence_hash == S && info.block_hash == B);
            assert_true(info.has_parent == 1 && info.parent_sequence_hash == PARENT);
            assert_int_equal(kvreg_acquire(p[i], S, &got), KVREG_OK);
            assert_true(got == h[i]);
            assert_int_equal(kvreg_release(p[i], got), KVREG_OK);
            kvreg_block_desc d = hash_desc(S, B, 1, PARENT);
            assert_int_equal(kvreg_register(p[i], &d, &got), KVREG_EEXIST);
        }
        const int i = leave[k];
        assert_int_equal(kvreg_release(p[i], h[i]), KVREG_OK);
        assert_int_equal(kvt_pool_has(p[i], S), 0);
        assert_int_equal(kvreg_acquire(p[i], S, &h[i]), KVREG_ENOENT);
        assert_int_equal(kvt_registry_has(reg, S), k + 1 < NP);
        assert_int_equal(rec->n, k + 1 < NP ? 1 : 2);
    }
    assert_int_equal(rec->events[1].kind, KVREG_EVENT_REMOVE);
    assert_int_equal(rec->events[1].pool_id, 4);
    assert_true(rec->events[1].block_hash == B && rec->events[1].parent_sequence_hash == PARENT);
    /* A pool whose stale filter bit is still set (pool 15 left; pool 1 shares its bit) joins
     * a fresh chain, and the one that left comes back. */
    kvreg_block_desc d = hash_desc(S, B, 0, 0);
    assert_int_equal(kvreg_register(p[14], &d, &h[14]), KVREG_OK);
    assert_int_equal(kvreg_register(p[0], &d, &h[0]), KVREG_OK);
    assert_int_equal(kvreg_release(p[14], h[14]), KVREG_OK);
    assert_int_equal(kvreg_register(p[14], &d, &h[14]), KVREG_OK);
    assert_int_equal(kvreg_register(p[0], &d, &h[1]), KVREG_EEXIST);
    assert_int_equal(kvreg_register(p[14], &d, &h[1]), KVREG_EEXIST);
    assert_int_equal(kvreg_release(p[0], h[0]), KVREG_OK);
    assert_int_equal(kvreg_release(p[14], h[14]), KVREG_OK);
    assert_int_equal(rec->n, 4);
    assert_int_equal(kvt_registry_has(reg, S), 0);
    kvreg_registry_free(reg);
    free(rec);
}

static void test_release_then_reregister(void **state) {
    fixture *f = *state;
    kvreg_block h = 0;
    for (int round = 0; round < 3; round++) {
        assert_int_equal(kvreg_register_sequence_block(f->a, f->seq, 0, &h), KVREG_OK);
        assert_int_equal(kvreg_release(f->a, h), KVREG_OK);
    }
    assert_int_equal(f->rec.n, 6);
    for (size_t i = 0; i < 6; i++) {
        assert_int_equal(f->rec.events[i].kind, i % 2 == 0 ? KVREG_EVENT_REGISTER : KVREG_EVENT_REMOVE);
        assert_int_equal(f->rec.events[i].event_id, i);
    }
}

static void test_stale_double_and_foreign_handles(void **state) {
    fixture *f = *state;
    kvreg_block ha = 0, hb = 0, hold = 0, other = 0;
    kvreg_registry *reg2 = NULL;
    kvreg_pool *p2 = NULL;
    assert_int_equal(kvreg_register_sequence_block(f->a, f->seq, 0, &ha), KVREG_OK);
    assert_int_equal(kvreg_register_sequence_block(f->b, f->seq, 1, &hb), KVREG_OK);
    /* another pool's handle */
    assert_int_equal(kvreg_release(f->a, hb), KVREG_ESTALE);
    assert_int_equal(kvreg_release(f->b, ha), KVREG_ESTALE);
    /* another registry's handle, even for the same hash */
    assert_int_equal(kvreg_registry_new(&reg2, NULL), KVREG_OK);
    assert_int_equal(kvreg_pool_new(&p2, reg2, "other"), KVREG_OK);
    assert_int_equal(kvreg_register_sequence_block(p2, f->seq, 0, &other), KVREG_OK);
    assert_int_equal(kvreg_release(f->a, other), KVREG_ESTALE);
    assert_int_equal(kvreg_release(p2, ha), KVREG_ESTALE);
    /* garbage and the null handle */
    assert_int_equal(kvreg_release(f->a, KVREG_BLOCK_NONE), KVREG_ESTALE);
    assert_int_equal(kvreg_release(f->a, UINT64_C(0x123456789abcdef)), KVREG_ESTALE);
    /* double release, and release after the slot was reused for another block */
    hold = ha;
    assert_int_equal(kvreg_release(f->a, ha), KVREG_OK);
    assert_int_equal(kvreg_release(f->a, hold), KVREG_ESTALE);
    assert_int_equal(kvreg_register_sequence_block(f->a, f->seq, 1, &ha), KVREG_OK);
    assert_int_equal(kvreg_release(f->a, hold), KVREG_ESTALE);
    uint32_t rc = 0;
    assert_int_equal(kvreg_block_refcount(f->a, ha, &rc), KVREG_OK);
    assert_int_equal(rc, 1); /* nothing above touched the live block */
    assert_int_equal(kvreg_release(f->a, ha), KVREG_OK);
    assert_int_equal(kvreg_release(f->b, hb), KVREG_OK);
    /* everything balanced: both hashes registered and removed exactly as often */
    uint64_t regs = 0, rems = 0;
    assert_int_equal(kvreg_registry_stat(f->reg, KVREG_STAT_EVENTS_REGISTER, &regs), KVREG_OK);
    assert_int_equal(kvreg_registry_stat(f->reg, KVREG_STAT_EVENTS_REMOVE, &rems), KVREG_OK);
    assert_true(regs == rems);
    kvreg_registry_free(reg2);
}

static void test_acquire_refcounts(void **state) {
    fixture *f = *state;
    kvreg_block h = 0, h2 = 0;
    uint32_t rc = 0;
    assert_int_equal(kvreg_acquire(f->a, seqhash(f, 0), &h2), KVREG_ENOENT);
    assert_int_equal(kvreg_register_sequence_block(f->a, f->seq, 0, &h), KVREG_OK);
    assert_int_equal(kvreg_acquire(f->a, seqhash(f, 0), &h2), KVREG_OK);
    assert_true(h2 == h);
    assert_int_equal(kvreg_acquire(f->b, seqhash(f, 0), &h2), KVREG_ENOENT); /* per pool */
    assert_int_equal(kvreg_block_refcount(f->a, h, &rc), KVREG_OK);
    assert_int_equal(rc, 2);
    assert_int_equal(kvreg_release(f->a, h), KVREG_OK);
    assert_int_equal(f->rec.n, 1); /* a reference remains: no Remove */
    assert_int_equal(kvt_pool_has(f->a, seqhash(f, 0)), 1);
    assert_int_equal(kvreg_release(f->a, h), KVREG_OK);
    assert_int_equal(f->rec.n, 2);
    assert_int_equal(kvreg_release(f->a, h), KVREG_ESTALE);
}

static void test_match_and_acquire_prefix(void **state) {
    fixture *f = *state;
    kvreg_block blocks[2];
    size_t n = 0;
    uint64_t hashes[3] = {seqhash(f, 0), seqhash(f, 1), 42};
    assert_int_equal(kvreg_pool_match(f->a, hashes, 3, &n), KVREG_OK);
    assert_int_equal(n, 0);
    assert_int_equal(kvreg_register_sequence(f->a, f->seq, 0, 2, blocks, NULL, &n), KVREG_OK);
    assert_int_equal(n, 2);
    assert_int_equal(kvreg_pool_match(f->a, hashes, 3, &n), KVREG_OK);
    assert_int_equal(n, 2);
    assert_int_equal(kvreg_pool_match(f->b, hashes, 3, &n), KVREG_OK);
    assert_int_equal(n, 0);
    /* a miss stops the walk even when later hashes are present */
    uint64_t gap[2] = {42, seqhash(f, 0)};
    assert_int_equal(kvreg_pool_match(f->a, gap, 2, &n), KVREG_OK);
    assert_int_equal(n, 0);
    kvreg_block got[3];
    assert_int_equal(kvreg_acquire_prefix(f->a, hashes, 3, got, &n), KVREG_OK);
    assert_int_equal(n, 2);
    assert_true(got[0] == blocks[0] && got[1] == blocks[1]);
    assert_int_equal(kvreg_release_batch(f->a, got, 2, NULL, &n), KVREG_OK);
    assert_int_equal(n, 2);
    assert_int_equal(f->rec.n, 2); /* only the two Registers so far */
    assert_int_equal(kvreg_release_batch(f->a, blocks, 2, NULL, NULL), KVREG_OK);
    assert_int_equal(f->rec.n, 4);
}

static void test_pool_free_releases_everything(void **state) {
    fixture *f = *state;
    kvreg_block ha[2], hb = 0;
    uint32_t old_id = kvreg_pool_id(f->a);
    assert_int_equal(kvreg_register_sequence(f->a, f->seq, 0, 2, ha, NULL, NULL), KVREG_OK);
    assert_int_equal(kvreg_register_sequence_block(f->b, f->seq, 0, &hb), KVREG_OK);
    kvreg_block extra = 0;
    assert_int_equal(kvreg_acquire(f->a, seqhash(f, 1), &extra), KVREG_OK); /* refcount 2 */
    kvreg_pool_free(f->a);
    /* block 1 only lived in A: removed (despite its 2 references); block 0 lives on in B */
    assert_int_equal(f->rec.n, 3);
    assert_int_equal(f->rec.events[2].kind, KVREG_EVENT_REMOVE);
    assert_true(f->rec.events[2].sequence_hash == seqhash(f, 1));
    assert_int_equal(kvt_registry_has(f->reg, seqhash(f, 0)), 1);
    assert_int_equal(kvt_registry_has(f->reg, seqhash(f, 1)), 0);
    /* use after free is detected while the slot is not reused */
    assert_int_equal(kvreg_release(f->a, ha[0]), KVREG_ESTALE);
    assert_int_equal(kvt_pool_has(f->a, seqhash(f, 0)), KVREG_ESTALE);
    kvreg_block h = 0;
    kvreg_block_desc d = seq_desc(f->seq, 1);
    assert_int_equal(kvreg_register(f->a, &d, &h), KVREG_ESTALE);
    assert_int_equal(kvreg_pool_size(f->a), 0);
    kvreg_pool_free(f->a); /* twice: harmless */
    uint64_t pools = 0;
    assert_int_equal(kvreg_registry_stat(f->reg, KVREG_STAT_POOLS, &pools), KVREG_OK);
    assert_int_equal(pools, 1);
    /* a new pool gets a fresh id (least recently freed ids come last) */
    kvreg_pool *c = NULL;
    assert_int_equal(kvreg_pool_new(&c, f->reg, "G3"), KVREG_OK);
    assert_int_not_equal(kvreg_pool_id(c), old_id);
    assert_string_equal(kvreg_pool_name(c), "G3");
    f->a = c;
}

static void test_register_without_tokens(void **state) {
    fixture *f = *state;
    kvreg_block h = 0;
    kvreg_block_desc d = hash_desc(1000, 2000, 1, 999);
    kvreg_block_info info;
    assert_int_equal(kvreg_register(f->a, &d, &h), KVREG_OK);
    assert_int_equal(kvreg_block_get_info(f->a, h, &info), KVREG_OK);
    assert_true(info.sequence_hash == 1000 && info.block_hash == 2000);
    assert_int_equal(info.has_parent, 1);
    assert_true(info.parent_sequence_hash == 999);
    assert_int_equal(info.position, KVREG_POSITION_UNKNOWN);
    assert_int_equal(f->rec.events[0].n_tokens, 0);
    uint32_t buf[4];
    size_t n = 0;
    assert_int_equal(kvreg_block_tokens(f->a, h, buf, 4, &n), KVREG_ENOENT);
    assert_int_equal(kvreg_release(f->a, h), KVREG_OK);
    assert_int_equal(kvreg_block_get_info(f->a, h, &info), KVREG_ESTALE);
}

static void test_keep_tokens_stored_once(void **state) {
    (void)state;
    recorder *rec = calloc(1, sizeof *rec);
    kvreg_registry *reg = recorder_registry(rec, 1);
    kvreg_pool *a = NULL, *b = NULL;
    kvreg_sequence *s = NULL;
    kvreg_block ha = 0, hb = 0;
    uint64_t bytes = 0;
    assert_int_equal(kvreg_pool_new(&a, reg, "a"), KVREG_OK);
    assert_int_equal(kvreg_pool_new(&b, reg, "b"), KVREG_OK);
    assert_int_equal(kvreg_sequence_new(&s, 4, 1337), KVREG_OK);
    assert_int_equal(kvreg_sequence_extend(s, T12, 8, NULL), KVREG_OK);
    assert_int_equal(kvreg_register_sequence_block(a, s, 1, &ha), KVREG_OK);
    assert_int_equal(kvreg_register_sequence_block(b, s, 1, &hb), KVREG_OK);
    assert_int_equal(kvreg_registry_stat(reg, KVREG_STAT_TOKEN_BYTES, &bytes), KVREG_OK);
    assert_int_equal(bytes, 16); /* once per hash, not per pool */
    uint32_t buf[4] = {0};
    size_t n = 0;
    assert_int_equal(kvreg_block_tokens(b, hb, buf, 2, &n), KVREG_ERANGE);
    assert_int_equal(n, 4);
    assert_int_equal(kvreg_block_tokens(b, hb, buf, 4, &n), KVREG_OK);
    assert_int_equal(buf[0], 5);
    assert_int_equal(buf[3], 8);
    /* the head moves to B when A lets go; B still reads the tokens */
    assert_int_equal(kvreg_release(a, ha), KVREG_OK);
    memset(buf, 0, sizeof buf);
    assert_int_equal(kvreg_block_tokens(b, hb, buf, 4, &n), KVREG_OK);
    assert_int_equal(buf[2], 7);
    assert_int_equal(kvreg_release(b, hb), KVREG_OK);
    /* Remove carries the stored tokens when they are kept */
    assert_int_equal(rec->n, 2);
    assert_int_equal(rec->events[1].kind, KVREG_EVENT_REMOVE);
    assert_int_equal(rec->events[1].n_tokens, 4);
    assert_int_equal(rec->tokens[1][0], 5);
    assert_int_equal(kvreg_registry_stat(reg, KVREG_STAT_TOKEN_BYTES, &bytes), KVREG_OK);
    assert_int_equal(bytes, 0);
    kvreg_registry_free(reg);
    kvreg_sequence_free(s);
    free(rec);
}

static void test_batch_statuses(void **state) {
    fixture *f = *state;
    kvreg_block_desc d[4];
    kvreg_block out[4];
    int st[4];
    size_t n = 0;
    d[0] = seq_desc(f->seq, 0);
    d[1] = seq_desc(f->seq, 0); /* duplicate within the batch */
    d[2] = seq_desc(f->seq, 1);
    d[2].n_tokens = 2; /* partial */
    d[3] = seq_desc(f->seq, 1);
    assert_int_equal(kvreg_register_batch(f->a, d, 4, out, st, &n), KVREG_OK);
    assert_int_equal(n, 2);
    assert_int_equal(st[0], KVREG_OK);
    assert_int_equal(st[1], KVREG_EEXIST);
    assert_int_equal(st[2], KVREG_ESTATE);
    assert_int_equal(st[3], KVREG_OK);
    assert_true(out[1] == KVREG_BLOCK_NONE && out[2] == KVREG_BLOCK_NONE);
    kvreg_block rel[3] = {out[0], out[3], out[0]};
    assert_int_equal(kvreg_release_batch(f->a, rel, 3, st, &n), KVREG_OK);
    assert_int_equal(n, 2);
    assert_int_equal(st[2], KVREG_ESTALE);
    assert_int_equal(kvreg_register_sequence(f->a, f->seq, 1, 2, out, NULL, NULL), KVREG_ERANGE);
    assert_int_equal(kvreg_register_batch(f->a, NULL, 0, NULL, NULL, &n), KVREG_OK);
    assert_int_equal(n, 0);
    assert_int_equal(kvreg_register_batch(f->a, NULL, 1, out, NULL, &n), KVREG_EINVAL);
}

static void test_many_blocks_one_shard(void **state) {
    /* One shard so the index grows and deletes (backward shift) under heavy load; keys are
     * sequential integers, the worst case for a table that trusted its keys blindly. */
    (void)state;
    kvreg_config *cfg = NULL;
    kvreg_registry *reg = NULL;
    kvreg_pool *p = NULL;
    const size_t N = 20000;
    kvreg_block *h = calloc(N, sizeof *h);
    assert_int_equal(kvreg_config_new(&cfg), KVREG_OK);
    assert_int_equal(kvreg_config_set(cfg, KVREG_OPT_SHARDS, 1), KVREG_OK);
    assert_int_equal(kvreg_registry_new(&reg, cfg), KVREG_OK);
    kvreg_config_free(cfg);
    assert_int_equal(kvreg_pool_new(&p, reg, "p"), KVREG_OK);
    for (size_t i = 0; i < N; i++) {
        kvreg_block_desc d = hash_desc(i, i, 0, 0);
        assert_int_equal(kvreg_register(p, &d, &h[i]), KVREG_OK);
    }
    for (size_t i = 0; i < N; i += 2) assert_int_equal(kvreg_release(p, h[i]), KVREG_OK);
    for (size_t i = 0; i < N; i++) assert_int_equal(kvt_pool_has(p, i), (int)(i % 2));
    uint64_t hashes = 0;
    assert_int_equal(kvreg_registry_stat(reg, KVREG_STAT_HASHES, &hashes), KVREG_OK);
    assert_int_equal(hashes, N / 2);
    for (size_t i = 1; i < N; i += 2) assert_int_equal(kvreg_release(p, h[i]), KVREG_OK);
    assert_int_equal(kvreg_pool_size(p), 0);
    assert_int_equal(kvreg_registry_stat(reg, KVREG_STAT_HASHES, &hashes), KVREG_OK);
    assert_int_equal(hashes, 0);
    kvreg_registry_free(reg);
    free(h);
}

/* KVREG_MAX_POOLS live pools in one registry: all created with distinct ids in
 * 1..KVREG_MAX_POOLS, each one usable, the next is KVREG_EOVERFLOW (nothing created), and
 * freeing one makes room for exactly one more, which gets the only free id. */
static void check_usable(kvreg_pool *p, uint64_t hash) {
    kvreg_block h = 0;
    kvreg_block_info info;
    kvreg_block_desc d = hash_desc(hash, hash + 1, 0, 0);
    assert_int_equal(kvreg_register(p, &d, &h), KVREG_OK);
    assert_int_equal(kvt_pool_has(p, hash), 1);
    assert_int_equal(kvreg_block_get_info(p, h, &info), KVREG_OK);
    assert_true(info.sequence_hash == hash);
    assert_int_equal(kvreg_pool_size(p), 1);
    assert_int_equal(kvreg_release(p, h), KVREG_OK);
    assert_int_equal(kvt_pool_has(p, hash), 0);
}

static void test_pool_limit(void **state) {
    (void)state;
    kvreg_registry *reg = NULL;
    kvreg_pool **pools = calloc(KVREG_MAX_POOLS, sizeof *pools);
    unsigned char *seen = calloc(KVREG_MAX_POOLS + 1, 1);
    kvreg_pool *extra = NULL;
    uint64_t v = 0;
    assert_non_null(pools);
    assert_non_null(seen);
    assert_int_equal(KVREG_MAX_POOLS, 65535); /* the documented limit: 16-bit pool ids */
    assert_int_equal(kvreg_registry_new(&reg, NULL), KVREG_OK);
    for (unsigned i = 0; i < KVREG_MAX_POOLS; i++) {
        assert_int_equal(kvreg_pool_new(&pools[i], reg, "p"), KVREG_OK);
        const uint32_t id = kvreg_pool_id(pools[i]);
        assert_in_range(id, 1, KVREG_MAX_POOLS);
        assert_int_equal(seen[id], 0); /* distinct */
        seen[id] = 1;
    }
    assert_int_equal(kvreg_registry_stat(reg, KVREG_STAT_POOLS, &v), KVREG_OK);
    assert_int_equal(v, KVREG_MAX_POOLS);
    extra = pools[0];
    assert_int_equal(kvreg_pool_new(&extra, reg, "p"), KVREG_EOVERFLOW);
    assert_ptr_equal(extra, pools[0]); /* outputs are written only on success */
    assert_int_equal(kvreg_registry_stat(reg, KVREG_STAT_POOLS, &v), KVREG_OK);
    assert_int_equal(v, KVREG_MAX_POOLS);
    /* each usable: the first, the last, and some in between (ids above 2^15 included) */
    static const unsigned some[] = {0, 1, 1023, 1024, 32767, 32768, 50000, KVREG_MAX_POOLS - 1};
    for (size_t k = 0; k < sizeof some / sizeof some[0]; k++) check_usable(pools[some[k]], 7000 + k);
    /* a block in the last pool, so the one freed below is not the only pool holding blocks */
    kvreg_block keep = 0;
    kvreg_block_desc d = hash_desc(1, 2, 0, 0);
    assert_int_equal(kvreg_register(pools[KVREG_MAX_POOLS - 1], &d, &keep), KVREG_OK);

    const uint32_t freed_id = kvreg_pool_id(pools[40000]);
    kvreg_pool_free(pools[40000]);
    assert_int_equal(kvreg_registry_stat(reg, KVREG_STAT_POOLS, &v), KVREG_OK);
    assert_int_equal(v, KVREG_MAX_POOLS - 1);
    assert_int_equal(kvreg_pool_new(&extra, reg, NULL), KVREG_OK);
    assert_int_equal(kvreg_pool_id(extra), freed_id); /* the only id not in use */
    assert_string_equal(kvreg_pool_name(extra), "");
    check_usable(extra, 9000);
    kvreg_pool *again = pools[1];
    assert_int_equal(kvreg_pool_new(&again, reg, "p"), KVREG_EOVERFLOW);
    assert_ptr_equal(again, pools[1]);
    assert_int_equal(kvt_pool_has(pools[KVREG_MAX_POOLS - 1], 1), 1);
    kvreg_registry_free(reg); /* frees every pool it still owns */
    free(seen);
    free(pools);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_register_release_one_pool, setup, teardown),
        cmocka_unit_test_setup_teardown(test_partial_block_is_estate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_eexist_leaves_state_unchanged, setup, teardown),
        cmocka_unit_test_setup_teardown(test_two_pools_share_one_registration, setup, teardown),
        cmocka_unit_test(test_chain_of_many_pools),
        cmocka_unit_test_setup_teardown(test_release_then_reregister, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stale_double_and_foreign_handles, setup, teardown),
        cmocka_unit_test_setup_teardown(test_acquire_refcounts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_match_and_acquire_prefix, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pool_free_releases_everything, setup, teardown),
        cmocka_unit_test_setup_teardown(test_register_without_tokens, setup, teardown),
        cmocka_unit_test(test_keep_tokens_stored_once),
        cmocka_unit_test_setup_teardown(test_batch_statuses, setup, teardown),
        cmocka_unit_test(test_many_blocks_one_shard),
        cmocka_unit_test(test_pool_limit),
    };
    return cmocka_run_group_tests_name("registry", tests, NULL, NULL);
}
