/* kvreg_index_dump / _load / _digest: the layout of a small dump byte by byte (as
 * docs/design/index.md documents it, the checksum by the system libxxhash), round trips in both
 * hash modes, digests across insertion orders and shard counts, every corruption and
 * truncation, wrong versions and configurations, and dumps taken while writers apply. The
 * reference-model round trips are in test_index_model.c (replicate()). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <xxhash.h>

#include <kvreg_index.h>

#define BS 4u

static kvreg_index *new_index(int own, uint64_t salt, uint64_t shards, uint32_t bs, uint32_t profile)
{
    kvreg_index *idx = NULL;
    kvreg_index_config *cfg = NULL;
    assert_int_equal(kvreg_index_config_new(&cfg), KVREG_OK);
    assert_int_equal(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_BLOCK_SIZE, bs), KVREG_OK);
    assert_int_equal(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_SALT, salt), KVREG_OK);
    assert_int_equal(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_SHARDS, shards), KVREG_OK);
    assert_int_equal(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_PROFILE, profile), KVREG_OK);
    assert_int_equal(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_HASHES,
                                            own ? KVREG_INDEX_HASHES_OWN : KVREG_INDEX_HASHES_ENGINE), KVREG_OK);
    assert_int_equal(kvreg_index_new(&idx, cfg), KVREG_OK);
    kvreg_index_config_free(cfg);
    return idx;
}

static kvreg_index *own_index(uint64_t shards) { return new_index(1, KVREG_ROUTER_SALT, shards, BS, 0); }

static void stored(kvreg_wire_event *e, uint32_t medium, const uint64_t *hashes, size_t n)
{
    memset(e, 0, sizeof *e);
    e->type = KVREG_WIRE_STORED;
    e->medium = medium;
    e->block_hashes = hashes;
    e->n_block_hashes = n;
}

static void removed(kvreg_wire_event *e, uint32_t medium, const uint64_t *hashes, size_t n)
{
    memset(e, 0, sizeof *e);
    e->type = KVREG_WIRE_REMOVED;
    e->medium = medium;
    e->block_hashes = hashes;
    e->n_block_hashes = n;
}

static void apply1(kvreg_index *idx, uint64_t id, uint32_t dp, uint64_t seq, const kvreg_wire_event *e)
{
    assert_int_equal(kvreg_index_apply(idx, id, dp, seq, e, 1, NULL), KVREG_OK);
}

static uint64_t stat(const kvreg_index *idx, uint32_t which)
{
    uint64_t v = 0;
    assert_int_equal(kvreg_index_stat(idx, which, &v), KVREG_OK);
    return v;
}

static void assert_empty(const kvreg_index *idx)
{
    assert_int_equal(stat(idx, KVREG_INDEX_STAT_WORKERS), 0);
    assert_int_equal(stat(idx, KVREG_INDEX_STAT_ENTRIES), 0);
    assert_int_equal(stat(idx, KVREG_INDEX_STAT_MAPPED_HASHES), 0);
}

static uint64_t digest(const kvreg_index *idx)
{
    uint64_t d = 0;
    assert_int_equal(kvreg_index_digest(idx, &d), KVREG_OK);
    return d;
}

static void put32(unsigned char *p, uint32_t v)
{
    int i;
    for (i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
    int i;
    for (i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* Rewrite the checksum after editing a dump (the system libxxhash, not the library's code). */
static void reseal(unsigned char *d, size_t n) { put64(d + n - 8, XXH3_64bits(d, n - 8)); }

/* The OWN-mode dump of worker (5, dp 1), next seq 1, holding 0x10 in GPU and CPU and 0x20 in
 * GPU, written out by hand from the documented layout: format version 2 (what the library
 * writes), or version 1 (what 0.6.0 wrote: the same but for the records' order). */
static size_t small_own_dump_version(unsigned char *d, uint32_t version)
{
    size_t n = 0;
    /* Version 2 orders records by key * 0x9E3779B97F4A7C15 mod 2^64: 0x20 gives
     * 0xc6ef372fe94f82a0, 0x10 gives 0xe3779b97f4a7c150, so 0x20 comes first. Version 1: by key. */
    const uint64_t first = version == 1 ? 0x10 : 0x20, second = version == 1 ? 0x20 : 0x10;
    memcpy(d, "KVREGIDX", 8);
    put32(d + 8, version); /* format version */
    put32(d + 12, 1);    /* hashes: OWN */
    put32(d + 16, 0);    /* profile: DYNAMO */
    put32(d + 20, BS);   /* block size */
    put64(d + 24, 1337); /* salt */
    put64(d + 32, 1);    /* workers */
    n = 40;
    put64(d + n, 5);     /* worker id */
    put32(d + n + 8, 1); /* dp rank */
    put32(d + n + 12, 1); /* flags: next seq known */
    put64(d + n + 16, 1); /* next seq */
    put64(d + n + 24, 0); /* model partition */
    put64(d + n + 32, 1); /* groups */
    n += 40;
    put64(d + n, 0);     /* partition */
    put64(d + n + 8, 2); /* records */
    n += 16;
    put64(d + n, first);
    d[n + 8] = first == 0x10 ? 0x3 : 0x1;       /* 0x10: GPU | CPU, 0x20: GPU */
    put64(d + n + 9, second);
    d[n + 17] = second == 0x10 ? 0x3 : 0x1;
    n += 18;
    put64(d + n, XXH3_64bits(d, n));
    return n + 8;
}

static size_t small_own_dump(unsigned char *d) { return small_own_dump_version(d, 2); }

static void build_small_own(kvreg_index *idx)
{
    const uint64_t h[2] = {0x10, 0x20};
    kvreg_wire_event e[2];
    stored(&e[0], KVREG_MEDIUM_GPU, h, 2);
    stored(&e[1], KVREG_MEDIUM_CPU, h, 1);
    assert_int_equal(kvreg_index_apply(idx, 5, 1, 0, e, 2, NULL), KVREG_OK);
}

static void test_small_own_layout(void **state)
{
    unsigned char want[256];
    const size_t n_want = small_own_dump(want);
    kvreg_index *idx = own_index(4), *copy = own_index(1);
    void *got = NULL;
    size_t n_got = 0, n_m = 0;
    kvreg_index_match m[2];
    const uint64_t q[2] = {0x10, 0x20};
    (void)state;
    build_small_own(idx);
    assert_int_equal(kvreg_index_dump_alloc(idx, &got, &n_got), KVREG_OK);
    assert_int_equal(n_got, n_want);
    assert_int_equal(n_want, 122);
    assert_memory_equal(got, want, n_want);
    /* the digest is the dump's checksum */
    assert_true(digest(idx) == XXH3_64bits(want, n_want - 8));

    /* the hand-written dump loads and answers as the original */
    assert_int_equal(kvreg_index_load(copy, want, n_want), KVREG_OK);
    assert_int_equal(stat(copy, KVREG_INDEX_STAT_WORKERS), 1);
    assert_int_equal(stat(copy, KVREG_INDEX_STAT_ENTRIES), 2);
    assert_int_equal(kvreg_index_query_hashes(copy, q, 2, 0, m, 2, &n_m), KVREG_OK);
    assert_int_equal(n_m, 1);
    assert_true(m[0].worker_id == 5);
    assert_int_equal(m[0].dp_rank, 1);
    assert_int_equal(m[0].depth, 2);
    assert_int_equal(m[0].blocks[KVREG_MEDIUM_GPU], 2);
    assert_int_equal(m[0].blocks[KVREG_MEDIUM_CPU], 0);
    assert_int_equal(m[0].tier_depth[KVREG_MEDIUM_GPU], 2);
    assert_int_equal(m[0].tier_depth[KVREG_MEDIUM_CPU], 1);
    /* the next seq came along: 1 applies quietly, and the worker is not new */
    {
        kvreg_index_apply_info info;
        assert_int_equal(kvreg_index_apply(copy, 5, 1, 1, NULL, 0, &info), KVREG_OK);
        assert_int_equal(info.flags, 0);
        assert_true(info.expected_seq == 1);
    }
    free(got);
    kvreg_index_free(idx);
    kvreg_index_free(copy);
}

/* Version 1 (libkvreg 0.6.0's dumps, records by key) still loads, to the same content; each
 * version's records in the other's order are out of order. */
static void test_version_1_loads(void **state)
{
    unsigned char v1[256], v2[256];
    const size_t n1 = small_own_dump_version(v1, 1), n2 = small_own_dump(v2);
    kvreg_index *idx = own_index(4);
    (void)state;
    assert_int_equal(n1, n2);
    assert_int_equal(kvreg_index_load(idx, v1, n1), KVREG_OK);
    assert_int_equal(stat(idx, KVREG_INDEX_STAT_ENTRIES), 2);
    /* its digest is that of the version 2 dump of the same content */
    assert_true(digest(idx) == XXH3_64bits(v2, n2 - 8));
    assert_int_equal(kvreg_index_remove_worker(idx, 5, 1), KVREG_OK);
    put32(v1 + 8, 2); /* version 1's order, called version 2 */
    reseal(v1, n1);
    assert_int_equal(kvreg_index_load(idx, v1, n1), KVREG_EPROTO);
    assert_empty(idx);
    put32(v2 + 8, 1); /* version 2's order, called version 1 */
    reseal(v2, n2);
    assert_int_equal(kvreg_index_load(idx, v2, n2), KVREG_EPROTO);
    assert_empty(idx);
    kvreg_index_free(idx);
}

/* ENGINE mode: the mapping travels, so a Remove of an engine hash stored before the dump
 * finds its entry on the replica, and a child names a parent stored before the dump. */
static void test_engine_mapping_round_trip(void **state)
{
    uint32_t tokens[3 * BS];
    kvreg_block_info info[3];
    size_t n = 0, i, n_m = 0;
    const uint64_t engine[3] = {1001, 1002, 1003};
    uint64_t router[3];
    kvreg_wire_event e;
    kvreg_index_match m[2];
    kvreg_index *idx = new_index(0, 99, 8, BS, 0), *copy = new_index(0, 99, 2, BS, 0);
    void *d = NULL;
    size_t dn = 0;
    (void)state;
    for (i = 0; i < 3 * BS; i++)
        tokens[i] = (uint32_t)(7 * i + 1);
    assert_int_equal(kvreg_hash_blocks(tokens, 3 * BS, BS, 99, info, 3, &n), KVREG_OK);
    for (i = 0; i < 3; i++)
        router[i] = info[i].sequence_hash;
    /* blocks 0 and 1 stored (GPU), block 0 also in CPU */
    stored(&e, KVREG_MEDIUM_GPU, engine, 2);
    e.token_ids = tokens;
    e.n_token_ids = 2 * BS;
    apply1(idx, 3, 0, 0, &e);
    stored(&e, KVREG_MEDIUM_CPU, engine, 1);
    e.token_ids = tokens;
    e.n_token_ids = BS;
    apply1(idx, 3, 0, 1, &e);

    assert_int_equal(kvreg_index_dump_alloc(idx, &d, &dn), KVREG_OK);
    /* header, one worker, one group, two 17-byte mapping records, checksum; the records by
     * engine hash * 0x9E3779B97F4A7C15 mod 2^64: 1002 gives 0x4522700c3989aa32, 1001
     * 0xa6eaf652ba3f2e1d, so 1002 (GPU) comes first, then 1001 (GPU | CPU) */
    assert_int_equal(dn, 40 + 40 + 16 + 2 * 17 + 8);
    {
        const unsigned char *r = (const unsigned char *)d + 96;
        uint64_t v = 0;
        int k, j;
        const uint64_t want_engine[2] = {1002, 1001}, want_router[2] = {router[1], router[0]};
        const unsigned char want_tiers[2] = {0x1, 0x3};
        for (j = 0; j < 2; j++, r += 17) {
            for (v = 0, k = 7; k >= 0; k--)
                v = v << 8 | r[k];
            assert_true(v == want_engine[j]);
            for (v = 0, k = 15; k >= 8; k--)
                v = v << 8 | r[k];
            assert_true(v == want_router[j]);
            assert_int_equal(r[16], want_tiers[j]);
        }
    }
    assert_int_equal(kvreg_index_load(copy, d, dn), KVREG_OK);
    assert_true(digest(copy) == digest(idx));
    assert_int_equal(stat(copy, KVREG_INDEX_STAT_MAPPED_HASHES), 2);

    /* a child of block 1 (engine parent 1002) chains on the replica */
    stored(&e, KVREG_MEDIUM_GPU, engine + 2, 1);
    e.has_parent = 1;
    e.parent_block_hash = 1002;
    e.token_ids = tokens + 2 * BS;
    e.n_token_ids = BS;
    apply1(copy, 3, 0, 2, &e);
    assert_int_equal(kvreg_index_query_hashes(copy, router, 3, 0, m, 2, &n_m), KVREG_OK);
    assert_int_equal(n_m, 1);
    assert_int_equal(m[0].depth, 3);
    /* removing engine hash 1001 from GPU leaves it in CPU only */
    removed(&e, KVREG_MEDIUM_GPU, engine, 1);
    apply1(copy, 3, 0, 3, &e);
    assert_int_equal(kvreg_index_query_hashes(copy, router, 3, 0, m, 2, &n_m), KVREG_OK);
    assert_int_equal(m[0].depth, 3);
    assert_int_equal(m[0].tier_depth[KVREG_MEDIUM_GPU], 0);
    assert_int_equal(m[0].blocks[KVREG_MEDIUM_CPU], 1);
    removed(&e, KVREG_MEDIUM_CPU, engine, 1);
    apply1(copy, 3, 0, 4, &e);
    assert_int_equal(kvreg_index_query_hashes(copy, router, 3, 0, m, 2, &n_m), KVREG_OK);
    assert_int_equal(n_m, 0);
    assert_int_equal(stat(copy, KVREG_INDEX_STAT_ENTRIES), 2);
    free(d);
    kvreg_index_free(idx);
    kvreg_index_free(copy);
}

/* The same content reached in different orders (and through a detour: stored, removed, other
 * workers first) in indexes of different shard counts: equal digests, equal dumps. */
static void fill(kvreg_index *idx, int order)
{
    const uint64_t a[3] = {11, 12, 13}, b[2] = {21, 22}, junk[2] = {99, 98};
    kvreg_wire_event e;
    if (order == 0) {
        stored(&e, KVREG_MEDIUM_GPU, a, 3);
        apply1(idx, 1, 0, 0, &e);
        stored(&e, KVREG_MEDIUM_CPU, b, 2);
        apply1(idx, 2, 0, 0, &e);
        stored(&e, KVREG_MEDIUM_CPU, a + 1, 1);
        apply1(idx, 1, 0, 1, &e);
    } else {
        stored(&e, KVREG_MEDIUM_GPU, junk, 2);
        apply1(idx, 2, 0, 0, &e);
        stored(&e, KVREG_MEDIUM_CPU, b + 1, 1);
        apply1(idx, 3, 0, 0, &e); /* a third worker, then gone */
        stored(&e, KVREG_MEDIUM_CPU, a + 1, 1);
        apply1(idx, 1, 0, 0, &e);
        stored(&e, KVREG_MEDIUM_GPU, a + 2, 1);
        apply1(idx, 1, 0, KVREG_INDEX_SEQ_NONE, &e);
        stored(&e, KVREG_MEDIUM_GPU, a, 2);
        apply1(idx, 1, 0, 1, &e);
        assert_int_equal(kvreg_index_remove_worker(idx, 3, 0), KVREG_OK);
        removed(&e, KVREG_MEDIUM_GPU, junk, 2);
        apply1(idx, 2, 0, KVREG_INDEX_SEQ_NONE, &e);
        stored(&e, KVREG_MEDIUM_CPU, b, 2);
        apply1(idx, 2, 0, KVREG_INDEX_SEQ_NONE, &e);
    }
}

/* Walk a dump of one worker: each group's records must ascend by key * 0x9E3779B97F4A7C15 mod
 * 2^64 (the documented order, computed here), groups by partition; returns the records. */
static size_t check_record_order(const unsigned char *d, size_t n, size_t rec_size)
{
    size_t at = 40 + 40, total = 0;
    uint64_t g, groups, prev_part = 0;
    int k;
    for (groups = 0, k = 7; k >= 0; k--)
        groups = groups << 8 | d[40 + 32 + k];
    for (g = 0; g < groups; g++) {
        uint64_t part = 0, recs = 0, r, prev = 0;
        for (k = 7; k >= 0; k--) {
            part = part << 8 | d[at + k];
            recs = recs << 8 | d[at + 8 + k];
        }
        assert_true(g == 0 || part > prev_part);
        prev_part = part;
        at += 16;
        for (r = 0; r < recs; r++, at += rec_size) {
            uint64_t key = 0, mixed;
            for (k = 7; k >= 0; k--)
                key = key << 8 | d[at + k];
            mixed = key * UINT64_C(0x9E3779B97F4A7C15);
            assert_true(r == 0 || mixed > prev);
            prev = mixed;
        }
        total += (size_t)recs;
    }
    assert_int_equal(at + 8, n);
    return total;
}

/* Enough records that the dump's sort cannot be a pass of adjacent swaps: ENGINE records of
 * two partitions interleaved in the mapping, and OWN records (the table's order is not the
 * dump's): each group in the documented order. */
static void test_dump_order_many_records(void **state)
{
    enum { N = 3000 };
    kvreg_index *engine = new_index(0, KVREG_ROUTER_SALT, 16, BS, 0), *own = own_index(16);
    uint32_t tokens[BS];
    uint64_t h;
    size_t i, dn = 0;
    void *d = NULL;
    kvreg_wire_event e;
    (void)state;
    for (i = 0; i < 2 * N; i++) {
        size_t t;
        h = (uint64_t)i + 1; /* small integers: the mixing spreads them */
        for (t = 0; t < BS; t++)
            tokens[t] = (uint32_t)(i * BS + t);
        stored(&e, KVREG_MEDIUM_GPU, &h, 1);
        e.token_ids = tokens;
        e.n_token_ids = BS;
        e.lora_name = i % 2 ? "adapter" : NULL;
        apply1(engine, 7, 0, i, &e);
        stored(&e, KVREG_MEDIUM_GPU, &h, 1);
        apply1(own, 7, 0, i, &e);
    }
    assert_int_equal(kvreg_index_dump_alloc(engine, &d, &dn), KVREG_OK);
    assert_int_equal(check_record_order((const unsigned char *)d, dn, 17), 2 * N);
    free(d);
    assert_int_equal(kvreg_index_dump_alloc(own, &d, &dn), KVREG_OK);
    assert_int_equal(check_record_order((const unsigned char *)d, dn, 9), 2 * N);
    free(d);
    kvreg_index_free(engine);
    kvreg_index_free(own);
}

static void test_digest_order_and_shards(void **state)
{
    kvreg_index *x = own_index(1), *y = own_index(64);
    void *dx = NULL, *dy = NULL;
    size_t nx = 0, ny = 0;
    (void)state;
    fill(x, 0);
    fill(y, 1);
    assert_true(digest(x) == digest(y));
    assert_int_equal(kvreg_index_dump_alloc(x, &dx, &nx), KVREG_OK);
    assert_int_equal(kvreg_index_dump_alloc(y, &dy, &ny), KVREG_OK);
    assert_int_equal(nx, ny);
    assert_memory_equal(dx, dy, nx);
    free(dx);
    free(dy);
    kvreg_index_free(x);
    kvreg_index_free(y);
}

/* One tier bit, one entry, one seq, one worker's rank: each changes the digest. */
static void test_digest_differs(void **state)
{
    const uint64_t a2[1] = {12}, a3[1] = {13};
    kvreg_wire_event e;
    kvreg_index *base = own_index(8), *idx;
    uint64_t d0;
    (void)state;
    fill(base, 0);
    d0 = digest(base);

    idx = own_index(8); /* tier bit: 13 also in CPU */
    fill(idx, 0);
    stored(&e, KVREG_MEDIUM_CPU, a3, 1);
    apply1(idx, 1, 0, KVREG_INDEX_SEQ_NONE, &e);
    assert_true(digest(idx) != d0);
    kvreg_index_free(idx);

    idx = own_index(8); /* tier bit: 12 no longer in CPU (still in GPU) */
    fill(idx, 0);
    removed(&e, KVREG_MEDIUM_CPU, a2, 1);
    apply1(idx, 1, 0, KVREG_INDEX_SEQ_NONE, &e);
    assert_int_equal(stat(idx, KVREG_INDEX_STAT_ENTRIES), stat(base, KVREG_INDEX_STAT_ENTRIES));
    assert_true(digest(idx) != d0);
    kvreg_index_free(idx);

    idx = own_index(8); /* an entry removed */
    fill(idx, 0);
    removed(&e, KVREG_MEDIUM_GPU, a3, 1);
    apply1(idx, 1, 0, KVREG_INDEX_SEQ_NONE, &e);
    assert_true(digest(idx) != d0);
    kvreg_index_free(idx);

    idx = own_index(8); /* a seq: the same entries, the next batch expected one later */
    fill(idx, 0);
    assert_int_equal(kvreg_index_apply(idx, 2, 0, 1, NULL, 0, NULL), KVREG_OK);
    assert_int_equal(stat(idx, KVREG_INDEX_STAT_ENTRIES), stat(base, KVREG_INDEX_STAT_ENTRIES));
    assert_true(digest(idx) != d0);
    kvreg_index_free(idx);

    idx = own_index(8); /* an empty worker more */
    fill(idx, 0);
    assert_int_equal(kvreg_index_clear_worker(idx, 4, 0, 0), KVREG_OK);
    assert_true(digest(idx) != d0);
    kvreg_index_free(idx);

    assert_true(digest(base) == d0);
    kvreg_index_free(base);
}

/* Every byte flipped, every truncation, trailing bytes: the documented status, and the index
 * stays empty and loads the good dump afterwards. */
static void test_corruption(void **state)
{
    unsigned char d[256], bad[264];
    const size_t n = small_own_dump(d);
    kvreg_index *idx = own_index(4);
    size_t i, bit;
    (void)state;
    for (i = 0; i < n; i++) {
        for (bit = 0; bit < 8; bit += 7) {
            memcpy(bad, d, n);
            bad[i] ^= (unsigned char)(1u << bit);
            assert_int_equal(kvreg_index_load(idx, bad, n), i >= 8 && i < 12 ? KVREG_ENOTSUP : KVREG_EPROTO);
            assert_empty(idx);
        }
    }
    for (i = 0; i < n; i++) {
        assert_int_equal(kvreg_index_load(idx, d, i), KVREG_EPROTO);
        assert_empty(idx);
    }
    memcpy(bad, d, n);
    bad[n] = 0;
    assert_int_equal(kvreg_index_load(idx, bad, n + 1), KVREG_EPROTO);
    memcpy(bad, d, n - 8);
    bad[n - 8] = 0;
    reseal(bad, n + 1); /* a trailing byte inside the checksum */
    assert_int_equal(kvreg_index_load(idx, bad, n + 1), KVREG_EPROTO);
    assert_empty(idx);
    assert_int_equal(kvreg_index_load(idx, NULL, 0), KVREG_EPROTO);
    assert_int_equal(kvreg_index_load(idx, NULL, 1), KVREG_EINVAL);
    assert_int_equal(kvreg_index_load(NULL, d, n), KVREG_EINVAL);
    assert_int_equal(kvreg_index_load(idx, d, n), KVREG_OK);
    assert_int_equal(stat(idx, KVREG_INDEX_STAT_ENTRIES), 2);
    kvreg_index_free(idx);
}

/* Checksummed but inconsistent: each gives KVREG_EPROTO and an empty index. */
static void test_inconsistent(void **state)
{
    unsigned char d[256], bad[256];
    const size_t n = small_own_dump(d);
    const size_t w = 40, g = 80, r = 96;
    kvreg_index *idx = own_index(4);
    struct {
        size_t at;
        uint64_t v;
        int width;
    } edits[] = {
        {32, 2, 8},              /* two workers, one there */
        {32, 0, 8},              /* no worker, one there: trailing bytes */
        {32, UINT64_MAX, 8},     /* a count no dump can hold */
        {w + 12, 2, 4},          /* unknown worker flag */
        {w + 12, 0, 4},          /* next seq unknown but not 0 */
        {w + 16, UINT64_MAX, 8}, /* next seq known as KVREG_INDEX_SEQ_NONE, which nothing makes */
        {w + 24, 3, 8},          /* a model partition this version does not have */
        {w + 32, 0, 8},          /* no group, records there */
        {w + 32, 2, 8},          /* two groups, one there */
        {w + 32, UINT64_MAX / 2, 8},
        {g, 7, 8},               /* a partition this version does not have */
        {g + 8, 0, 8},           /* an empty group */
        {g + 8, 3, 8},           /* three records, two there */
        {g + 8, UINT64_MAX, 8},
        {r + 9, 0x20, 8},        /* records repeated */
        {r + 9, 0x30, 8},        /* records out of order (0x30 mixed: 0xaa66d2c7ddf743f0) */
        {r + 8, 0, 1},           /* no tier */
        {r + 8, 0x10, 1},        /* a tier beyond KVREG_MEDIUM_COUNT */
        {16, 2, 4},              /* unknown profile */
        {12, 7, 4},              /* unknown hashes mode */
        {20, 0, 4},              /* block size 0 */
    };
    size_t i;
    (void)state;
    for (i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        memcpy(bad, d, n);
        if (edits[i].width == 8)
            put64(bad + edits[i].at, edits[i].v);
        else if (edits[i].width == 4)
            put32(bad + edits[i].at, (uint32_t)edits[i].v);
        else
            bad[edits[i].at] = (unsigned char)edits[i].v;
        reseal(bad, n);
        assert_int_equal(kvreg_index_load(idx, bad, n), KVREG_EPROTO);
        assert_empty(idx);
    }
    /* a repeated worker: the dump of two workers, the second renamed as the first */
    {
        kvreg_index *two = own_index(4);
        const uint64_t h[1] = {0x10};
        kvreg_wire_event e;
        void *dd = NULL;
        size_t dn = 0;
        stored(&e, KVREG_MEDIUM_GPU, h, 1);
        apply1(two, 5, 1, 0, &e);
        apply1(two, 5, 2, 0, &e);
        assert_int_equal(kvreg_index_dump_alloc(two, &dd, &dn), KVREG_OK);
        assert_int_equal(kvreg_index_load(idx, dd, dn), KVREG_OK); /* as it is: fine */
        assert_int_equal(stat(idx, KVREG_INDEX_STAT_WORKERS), 2);
        assert_int_equal(kvreg_index_remove_worker(idx, 5, 1), KVREG_OK);
        assert_int_equal(kvreg_index_remove_worker(idx, 5, 2), KVREG_OK);
        put32((unsigned char *)dd + 40 + 40 + 16 + 9 + 8, 1); /* second worker's dp: 1 */
        reseal(dd, dn);
        assert_int_equal(kvreg_index_load(idx, dd, dn), KVREG_EPROTO);
        assert_empty(idx);
        free(dd);
        kvreg_index_free(two);
    }
    kvreg_index_free(idx);
}

static void test_version_and_config(void **state)
{
    unsigned char d[256];
    const size_t n = small_own_dump(d);
    kvreg_index *idx;
    (void)state;
    put32(d + 8, 3); /* a newer format, sealed */
    reseal(d, n);
    idx = own_index(4);
    assert_int_equal(kvreg_index_load(idx, d, n), KVREG_ENOTSUP);
    assert_empty(idx);
    put32(d + 8, 0);
    reseal(d, n);
    assert_int_equal(kvreg_index_load(idx, d, n), KVREG_ENOTSUP);
    kvreg_index_free(idx);
    small_own_dump(d);

    idx = new_index(1, 1338, 4, BS, 0); /* salt */
    assert_int_equal(kvreg_index_load(idx, d, n), KVREG_EINVAL);
    assert_empty(idx);
    kvreg_index_free(idx);
    idx = new_index(1, KVREG_ROUTER_SALT, 4, BS + 1, 0); /* block size */
    assert_int_equal(kvreg_index_load(idx, d, n), KVREG_EINVAL);
    kvreg_index_free(idx);
    idx = new_index(1, KVREG_ROUTER_SALT, 4, BS, KVREG_INDEX_PROFILE_KV_ROUTER); /* profile */
    assert_int_equal(kvreg_index_load(idx, d, n), KVREG_EINVAL);
    kvreg_index_free(idx);
    idx = new_index(0, KVREG_ROUTER_SALT, 4, BS, 0); /* hashes mode */
    assert_int_equal(kvreg_index_load(idx, d, n), KVREG_EINVAL);
    assert_empty(idx);
    kvreg_index_free(idx);

    /* not empty: a known worker, even without entries */
    idx = own_index(4);
    assert_int_equal(kvreg_index_clear_worker(idx, 9, 0, 0), KVREG_OK);
    assert_int_equal(kvreg_index_load(idx, d, n), KVREG_ESTATE);
    assert_int_equal(kvreg_index_remove_worker(idx, 9, 0), KVREG_OK); /* empty again: loads */
    assert_int_equal(kvreg_index_load(idx, d, n), KVREG_OK);
    assert_int_equal(kvreg_index_load(idx, d, n), KVREG_ESTATE);
    kvreg_index_free(idx);
}

typedef struct sink {
    unsigned char *data;
    size_t len, cap, calls;
    int stop_at; /* call number that returns 77 (0: never) */
} sink;

static int sink_write(const void *data, size_t len, void *ctx)
{
    sink *s = ctx;
    assert_true(len > 0 && len <= 65536);
    s->calls++;
    if (s->stop_at && (int)s->calls == s->stop_at)
        return 77;
    if (s->len + len > s->cap) {
        s->cap = (s->len + len) * 2;
        s->data = realloc(s->data, s->cap);
        assert_non_null(s->data);
    }
    memcpy(s->data + s->len, data, len);
    s->len += len;
    return 0;
}

/* A dump of many pieces through the callback: the same bytes as the buffer form; a callback
 * that stops is obeyed, and its value returned. */
static void test_streaming(void **state)
{
    kvreg_index *idx = own_index(16), *copy = own_index(2);
    uint64_t h[1000];
    kvreg_wire_event e;
    sink s = {0};
    void *d = NULL;
    size_t n = 0, i;
    uint32_t w;
    (void)state;
    for (w = 0; w < 20; w++) {
        for (i = 0; i < 1000; i++)
            h[i] = (uint64_t)w * 100000 + i * 7 + 1;
        stored(&e, w % KVREG_MEDIUM_COUNT, h, 1000);
        apply1(idx, w, w % 3, 0, &e);
    }
    assert_int_equal(kvreg_index_dump(idx, sink_write, &s), KVREG_OK);
    assert_int_equal(s.len, 40 + 20 * (40 + 16 + 1000 * 9) + 8);
    assert_true(s.calls >= 3);
    assert_int_equal(kvreg_index_dump_alloc(idx, &d, &n), KVREG_OK);
    assert_int_equal(n, s.len);
    assert_memory_equal(d, s.data, n);
    assert_int_equal(kvreg_index_load(copy, s.data, s.len), KVREG_OK);
    assert_true(digest(copy) == digest(idx));
    assert_int_equal(stat(copy, KVREG_INDEX_STAT_ENTRIES), 20000);
    free(s.data);
    memset(&s, 0, sizeof s);
    s.stop_at = 2;
    assert_int_equal(kvreg_index_dump(idx, sink_write, &s), 77);
    assert_int_equal(s.calls, 2);
    assert_int_equal(kvreg_index_dump(NULL, sink_write, &s), KVREG_EINVAL);
    assert_int_equal(kvreg_index_dump(idx, NULL, &s), KVREG_EINVAL);
    assert_int_equal(kvreg_index_dump_alloc(idx, NULL, &n), KVREG_EINVAL);
    assert_int_equal(kvreg_index_digest(idx, NULL), KVREG_EINVAL);
    free(s.data);
    free(d);
    kvreg_index_free(idx);
    kvreg_index_free(copy);
}

/* Dumps while writers apply: each batch of a writer stores its next block and removes the one
 * before, so at every instant each worker that has applied a batch holds exactly one entry and
 * expects the seq after its last batch. A dump is one instant: loaded, it must show exactly
 * that, for every worker. */
#define RACE_WRITERS 3
#define RACE_BATCHES 3000

typedef struct race {
    kvreg_index *idx;
    uint32_t id;
    atomic_int *stop;
} race;

static void *race_writer(void *arg)
{
    race *r = arg;
    uint64_t k;
    for (k = 0; k < RACE_BATCHES && !atomic_load(r->stop); k++) {
        const uint64_t cur[1] = {(uint64_t)r->id << 32 | (k + 1)}, prev[1] = {(uint64_t)r->id << 32 | k};
        kvreg_wire_event e[2];
        stored(&e[0], KVREG_MEDIUM_GPU, cur, 1);
        removed(&e[1], KVREG_MEDIUM_GPU, prev, 1);
        if (kvreg_index_apply(r->idx, r->id, 0, k, e, 2, NULL) != KVREG_OK)
            abort();
    }
    return NULL;
}

static void test_dump_while_writing(void **state)
{
    kvreg_index *idx = own_index(8);
    pthread_t t[RACE_WRITERS];
    race r[RACE_WRITERS];
    atomic_int stop = 0;
    int i, dumps;
    (void)state;
    for (i = 0; i < RACE_WRITERS; i++) {
        r[i].idx = idx;
        r[i].id = (uint32_t)i + 1;
        r[i].stop = &stop;
        assert_int_equal(pthread_create(&t[i], NULL, race_writer, &r[i]), 0);
    }
    for (dumps = 0; dumps < 40; dumps++) {
        kvreg_index *copy = own_index(4);
        void *d = NULL;
        size_t n = 0, n_m = 0;
        uint64_t workers;
        assert_int_equal(kvreg_index_dump_alloc(idx, &d, &n), KVREG_OK);
        assert_int_equal(kvreg_index_load(copy, d, n), KVREG_OK);
        workers = stat(copy, KVREG_INDEX_STAT_WORKERS);
        assert_int_equal(stat(copy, KVREG_INDEX_STAT_ENTRIES), workers);
        for (i = 0; i < RACE_WRITERS; i++) {
            /* the worker's one block is the one its next seq names */
            kvreg_index_apply_info info;
            kvreg_index_match m[1];
            uint64_t h;
            if (kvreg_index_apply(copy, r[i].id, 0, KVREG_INDEX_SEQ_NONE, NULL, 0, &info) != KVREG_OK)
                fail();
            if (info.flags & KVREG_INDEX_F_NEW_WORKER)
                continue;
            h = (uint64_t)r[i].id << 32 | info.expected_seq;
            assert_int_equal(kvreg_index_query_hashes(copy, &h, 1, 0, m, 1, &n_m), KVREG_OK);
            assert_int_equal(n_m, 1);
        }
        free(d);
        kvreg_index_free(copy);
    }
    atomic_store(&stop, 1);
    for (i = 0; i < RACE_WRITERS; i++)
        pthread_join(t[i], NULL);
    kvreg_index_free(idx);
}

/* Queries from 7 threads while a dump loads (the table grows into its reserved place and
 * takes the entries shard by shard, under readers): workers 1..4 hold the first 500 * w
 * blocks of one prompt.
 * Every answer during the load names known workers at depths they reach once loaded (a
 * worker's prefix may be seen partly: its blocks go in one after another), and once the load
 * returned the answer is exact. Under ThreadSanitizer this checks the load's writes against
 * lock-free readers. */
#define LQ_WORKERS 4
#define LQ_BLOCKS 2000

#define LQ_READERS 7 /* with the loading thread, more threads than these hosts' 2 cores */

typedef struct load_query {
    atomic_uintptr_t idx; /* the kvreg_index being loaded (0: none) */
    const uint64_t *prompt;
    atomic_int stop;
    atomic_int bad;
    atomic_long answers[LQ_READERS]; /* passes, per reader */
} load_query;

typedef struct lq_arg {
    load_query *q;
    int reader;
} lq_arg;

static long lq_total(load_query *q)
{
    long n = 0;
    int r;
    for (r = 0; r < LQ_READERS; r++)
        n += atomic_load(&q->answers[r]);
    return n;
}

static void *lq_reader(void *arg)
{
    load_query *q = ((lq_arg *)arg)->q;
    atomic_long *answers = &q->answers[((lq_arg *)arg)->reader];
    kvreg_index_depth d[2 * LQ_WORKERS];
    for (; !atomic_load(&q->stop); atomic_fetch_add(answers, 1)) { /* every pass counted */
        kvreg_index *idx = (kvreg_index *)atomic_load(&q->idx);
        size_t n = 0, i;
        if (!idx)
            continue;
        if (kvreg_index_query_depths(idx, q->prompt, LQ_BLOCKS, d, 2 * LQ_WORKERS, &n) != KVREG_OK ||
            n > LQ_WORKERS)
            atomic_store(&q->bad, 1);
        for (i = 0; i < n && i < 2 * LQ_WORKERS; i++)
            if (d[i].worker_id < 1 || d[i].worker_id > LQ_WORKERS || d[i].dp_rank != 0 ||
                d[i].depth > 500 * d[i].worker_id)
                atomic_store(&q->bad, 1);
    }
    return NULL;
}

/* A load that fails after its last worker (one byte after it, resealed) removes what it
 * loaded; a dump meanwhile must still have each worker whole or not at all. Seven dumpers
 * beside the loading thread (8 threads on these 2-core hosts) walk every dump they take and
 * count workers with fewer entries than they were loaded with. */
enum { FL_WORKERS = 2, FL_ENTRIES = 50000, FL_DUMPERS = 7 };
typedef struct {
    kvreg_index *idx;
    atomic_int stop;
    atomic_long dumps, partial;
} failed_load;

static uint64_t get64le(const unsigned char *p)
{
    uint64_t v = 0;
    int k;
    for (k = 7; k >= 0; k--)
        v = v << 8 | p[k];
    return v;
}

static void *fl_dumper(void *arg)
{
    failed_load *f = (failed_load *)arg;
    while (!atomic_load(&f->stop)) {
        void *d = NULL;
        size_t n = 0, at = 40;
        uint64_t w, workers;
        if (kvreg_index_dump_alloc(f->idx, &d, &n) != KVREG_OK)
            continue;
        workers = get64le((const unsigned char *)d + 32);
        for (w = 0; w < workers; w++) {
            uint64_t g, groups = get64le((const unsigned char *)d + at + 32), recs = 0;
            at += 40;
            for (g = 0; g < groups; g++) {
                const uint64_t r = get64le((const unsigned char *)d + at + 8);
                at += 16 + 9 * r;
                recs += r;
            }
            if (recs != FL_ENTRIES)
                atomic_fetch_add(&f->partial, 1);
        }
        atomic_fetch_add(&f->dumps, 1);
        free(d);
    }
    return NULL;
}

static void test_failed_load_while_dumping(void **state)
{
    static uint64_t h[FL_ENTRIES];
    kvreg_index *src = own_index(16);
    failed_load f;
    pthread_t t[FL_DUMPERS];
    void *d = NULL;
    unsigned char *bad;
    size_t n = 0, i;
    int w, loads;
    const time_t deadline = time(NULL) + 3;
    (void)state;
    for (w = 0; w < FL_WORKERS; w++) {
        kvreg_wire_event e;
        for (i = 0; i < FL_ENTRIES; i++)
            h[i] = (uint64_t)w << 40 | (uint64_t)(i * 7919 + 1);
        stored(&e, KVREG_MEDIUM_GPU, h, FL_ENTRIES);
        apply1(src, 100 + (uint64_t)w, 0, 0, &e);
    }
    assert_int_equal(kvreg_index_dump_alloc(src, &d, &n), KVREG_OK);
    bad = malloc(n + 1);
    assert_non_null(bad);
    memcpy(bad, d, n - 8);
    bad[n - 8] = 0; /* a byte after the last worker */
    reseal(bad, n + 1);
    f.idx = own_index(16);
    atomic_store(&f.stop, 0);
    atomic_store(&f.dumps, 0);
    atomic_store(&f.partial, 0);
    for (w = 0; w < FL_DUMPERS; w++)
        assert_int_equal(pthread_create(&t[w], NULL, fl_dumper, &f), 0);
    for (loads = 0; loads < 12 && time(NULL) < deadline && atomic_load(&f.partial) == 0; loads++) {
        assert_int_equal(kvreg_index_load(f.idx, bad, n + 1), KVREG_EPROTO);
        assert_empty(f.idx);
    }
    atomic_store(&f.stop, 1);
    for (w = 0; w < FL_DUMPERS; w++)
        assert_int_equal(pthread_join(t[w], NULL), 0);
    assert_int_equal(atomic_load(&f.partial), 0);
    assert_true(atomic_load(&f.dumps) > 0);
    free(bad);
    free(d);
    kvreg_index_free(f.idx);
    kvreg_index_free(src);
}

static void test_load_while_querying(void **state)
{
    static uint64_t prompt[LQ_BLOCKS];
    kvreg_index *src = own_index(16);
    load_query q;
    pthread_t t[LQ_READERS];
    lq_arg args[LQ_READERS];
    void *d = NULL;
    size_t n = 0, i;
    int round, r;
    (void)state;
    for (i = 0; i < LQ_BLOCKS; i++)
        prompt[i] = 0x9E3779B97F4A7C15ull * (i + 1);
    for (i = 1; i <= LQ_WORKERS; i++) {
        kvreg_wire_event e;
        stored(&e, KVREG_MEDIUM_GPU, prompt, 500 * i);
        apply1(src, i, 0, 0, &e);
    }
    assert_int_equal(kvreg_index_dump_alloc(src, &d, &n), KVREG_OK);
    q.prompt = prompt;
    atomic_store(&q.idx, 0);
    atomic_store(&q.stop, 0);
    atomic_store(&q.bad, 0);
    for (r = 0; r < LQ_READERS; r++) {
        atomic_store(&q.answers[r], 0);
        args[r].q = &q;
        args[r].reader = r;
    }
    for (r = 0; r < LQ_READERS; r++)
        assert_int_equal(pthread_create(&t[r], NULL, lq_reader, &args[r]), 0);
    for (round = 0; round < 10; round++) {
        kvreg_index *copy = own_index(16);
        kvreg_index_depth dd[2 * LQ_WORKERS];
        size_t nd = 0;
        atomic_store(&q.idx, (uintptr_t)copy);
        assert_int_equal(kvreg_index_load(copy, d, n), KVREG_OK);
        assert_int_equal(kvreg_index_query_depths(copy, prompt, LQ_BLOCKS, dd, 2 * LQ_WORKERS, &nd), KVREG_OK);
        assert_int_equal(nd, LQ_WORKERS);
        for (i = 0; i < nd; i++)
            assert_int_equal(dd[i].depth, 500 * dd[i].worker_id);
        /* every reader lets go of this index before it is freed: withdrawn first, then each
         * reader's count read, the pass under way then ends at most one count later, and any
         * later pass sees no index (bounded wait: 10 s). Counts read before the withdrawal let
         * a reader start another pass on the index between the two: TSan saw it freed under
         * a query (8 threads on 2 cores). */
        {
            long seen[LQ_READERS];
            const time_t deadline = time(NULL) + 10;
            atomic_store(&q.idx, 0);
            for (r = 0; r < LQ_READERS; r++)
                seen[r] = atomic_load(&q.answers[r]);
            for (r = 0; r < LQ_READERS; r++)
                while (atomic_load(&q.answers[r]) < seen[r] + 2)
                    assert_true(time(NULL) < deadline);
        }
        kvreg_index_free(copy);
    }
    atomic_store(&q.stop, 1);
    for (r = 0; r < LQ_READERS; r++)
        pthread_join(t[r], NULL);
    assert_int_equal(atomic_load(&q.bad), 0);
    assert_true(lq_total(&q) > 0);
    free(d);
    kvreg_index_free(src);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_own_layout),
        cmocka_unit_test(test_engine_mapping_round_trip),
        cmocka_unit_test(test_digest_order_and_shards),
        cmocka_unit_test(test_version_1_loads),
        cmocka_unit_test(test_dump_order_many_records),
        cmocka_unit_test(test_failed_load_while_dumping),
        cmocka_unit_test(test_digest_differs),
        cmocka_unit_test(test_corruption),
        cmocka_unit_test(test_inconsistent),
        cmocka_unit_test(test_version_and_config),
        cmocka_unit_test(test_streaming),
        cmocka_unit_test(test_dump_while_writing),
        cmocka_unit_test(test_load_while_querying),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
