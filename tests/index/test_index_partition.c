/* Partitions: the same prompt stored under two models, two LoRA adapters of one model and the
 * base model never cross-matches; a removal in one partition leaves the others; the partition
 * id rule against an independent computation (the system libxxhash); partitions survive a dump
 * and load; the default partition is the index without partitions. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include <kvreg_index.h>

#define BS 2u
#define NB 3u

static const uint32_t tokens[NB * BS] = {1, 2, 3, 4, 5, 6};
static uint64_t router[NB];

static kvreg_index *new_index(int own)
{
    kvreg_index *idx = NULL;
    kvreg_index_config *cfg = NULL;
    kvreg_block_info info[NB];
    size_t n = 0, i;
    assert_int_equal(kvreg_hash_blocks(tokens, NB * BS, BS, KVREG_ROUTER_SALT, info, NB, &n), KVREG_OK);
    for (i = 0; i < NB; i++)
        router[i] = info[i].sequence_hash;
    assert_int_equal(kvreg_index_config_new(&cfg), KVREG_OK);
    assert_int_equal(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_BLOCK_SIZE, BS), KVREG_OK);
    assert_int_equal(kvreg_index_config_set(cfg, KVREG_INDEX_OPT_HASHES,
                                            own ? KVREG_INDEX_HASHES_OWN : KVREG_INDEX_HASHES_ENGINE), KVREG_OK);
    assert_int_equal(kvreg_index_new(&idx, cfg), KVREG_OK);
    kvreg_index_config_free(cfg);
    return idx;
}

static uint64_t pid(const char *model, const char *lora)
{
    uint64_t p = 0;
    assert_int_equal(kvreg_index_partition_id(model, lora, &p), KVREG_OK);
    return p;
}

/* Store prompt k (tokens k * NB * BS + 1, ...; prompt 0 is `tokens`) on worker (id, 0) in
 * ENGINE mode, engine hashes base + i, with a LoRA name. */
static void store_prompt(kvreg_index *idx, uint64_t id, uint64_t seq, uint64_t k, uint64_t base, const char *lora)
{
    uint32_t t[NB * BS];
    uint64_t h[NB];
    kvreg_wire_event e;
    size_t i;
    for (i = 0; i < NB * BS; i++)
        t[i] = (uint32_t)(k * NB * BS + i + 1);
    for (i = 0; i < NB; i++)
        h[i] = base + i;
    memset(&e, 0, sizeof e);
    e.type = KVREG_WIRE_STORED;
    e.medium = KVREG_MEDIUM_GPU;
    e.block_hashes = h;
    e.n_block_hashes = NB;
    e.token_ids = t;
    e.n_token_ids = NB * BS;
    e.lora_name = lora;
    assert_int_equal(kvreg_index_apply(idx, id, 0, seq, &e, 1, NULL), KVREG_OK);
}

static void store_engine(kvreg_index *idx, uint64_t id, uint64_t seq, uint64_t base, const char *lora)
{
    store_prompt(idx, id, seq, 0, base, lora);
}

static void remove_engine(kvreg_index *idx, uint64_t id, uint64_t seq, uint64_t base)
{
    uint64_t h[NB];
    kvreg_wire_event e;
    size_t i;
    for (i = 0; i < NB; i++)
        h[i] = base + i;
    memset(&e, 0, sizeof e);
    e.type = KVREG_WIRE_REMOVED;
    e.medium = KVREG_MEDIUM_GPU;
    e.block_hashes = h;
    e.n_block_hashes = NB;
    assert_int_equal(kvreg_index_apply(idx, id, 0, seq, &e, 1, NULL), KVREG_OK);
}

/* The one worker matching the prompt in partition p (by hashes, tokens and depths), or 0 if
 * none; checks that at most one matches and its depth is the whole prompt. */
static uint64_t who(const kvreg_index *idx, uint64_t p)
{
    kvreg_index_match m[4];
    kvreg_index_depth d[4];
    size_t n = 0, n2 = 0, n3 = 0, n4 = 0;
    assert_int_equal(kvreg_index_query_hashes_in(idx, p, router, NB, 0, m, 4, &n), KVREG_OK);
    assert_int_equal(kvreg_index_query_tokens_in(idx, p, tokens, NB * BS, 0, m + 2, 2, &n2), KVREG_OK);
    assert_int_equal(kvreg_index_query_depths_in(idx, p, router, NB, d, 4, &n3), KVREG_OK);
    assert_int_equal(kvreg_index_query_depths_tokens_in(idx, p, tokens, NB * BS, d + 2, 2, &n4), KVREG_OK);
    assert_true(n <= 1);
    assert_int_equal(n2, n);
    assert_int_equal(n3, n);
    assert_int_equal(n4, n);
    if (!n)
        return 0;
    assert_int_equal(m[0].depth, NB);
    assert_true(m[2].worker_id == m[0].worker_id && d[0].worker_id == m[0].worker_id);
    return m[0].worker_id;
}

static void test_partition_id_rule(void **state)
{
    const uint64_t seed = UINT64_C(0x6c646d676572766b); /* "kvregmdl" little-endian */
    const uint64_t m = XXH3_64bits_withSeed("llama-3-8b", 10, seed);
    (void)state;
    assert_true(pid(NULL, NULL) == 0);
    assert_true(pid("", "") == 0);
    assert_true(pid("llama-3-8b", NULL) == m);
    assert_true(pid("llama-3-8b", "") == m);
    assert_true(pid("llama-3-8b", "sql-adapter") == XXH3_64bits_withSeed("sql-adapter", 11, m));
    assert_true(pid(NULL, "sql-adapter") == XXH3_64bits_withSeed("sql-adapter", 11, 0));
    assert_int_equal(kvreg_index_partition_id("x", NULL, NULL), KVREG_EINVAL);
}

/* ENGINE mode: worker 1 serves model A (base and two adapters), worker 2 model B, worker 3 no
 * partition; each stores the same prompt. */
static void test_engine_no_cross_match(void **state)
{
    kvreg_index *idx = new_index(0), *copy = new_index(0);
    const uint64_t a = pid("model-a", NULL), b = pid("model-b", NULL);
    const uint64_t a1 = pid("model-a", "lora-1"), a2 = pid("model-a", "lora-2");
    void *d = NULL;
    size_t n = 0;
    uint64_t g1 = 0, g2 = 1;
    (void)state;
    assert_true(who(idx, 0) == 0);
    assert_int_equal(kvreg_index_set_worker_partition(idx, 1, 0, a), KVREG_OK);
    assert_int_equal(kvreg_index_set_worker_partition(idx, 2, 0, b), KVREG_OK);
    store_engine(idx, 1, 0, 100, NULL);
    assert_true(who(idx, a) == 1);
    assert_true(who(idx, 0) == 0);
    assert_true(who(idx, b) == 0);
    assert_true(who(idx, a1) == 0);
    store_engine(idx, 1, 1, 200, "lora-1");
    store_engine(idx, 2, 0, 300, NULL);
    assert_true(who(idx, a1) == 1);
    assert_true(who(idx, a2) == 0);
    assert_true(who(idx, b) == 2);
    assert_true(who(idx, 0) == 0);
    store_engine(idx, 3, 0, 400, NULL); /* no partition: the default */
    assert_true(who(idx, 0) == 3);
    assert_true(who(idx, a) == 1);
    /* the replica keeps them apart too, and removes find entries of every partition */
    assert_int_equal(kvreg_index_dump_alloc(idx, &d, &n), KVREG_OK);
    assert_int_equal(kvreg_index_load(copy, d, n), KVREG_OK);
    assert_int_equal(kvreg_index_digest(idx, &g1), KVREG_OK);
    assert_int_equal(kvreg_index_digest(copy, &g2), KVREG_OK);
    assert_true(g1 == g2);
    free(d);
    remove_engine(copy, 1, 2, 200); /* lora-1's blocks: the base stays */
    assert_true(who(copy, a1) == 0);
    assert_true(who(copy, a) == 1);
    assert_true(who(copy, b) == 2);
    assert_true(who(copy, 0) == 3);
    store_engine(copy, 1, 3, 500, "lora-2"); /* a new adapter after the load */
    assert_true(who(copy, a2) == 1);
    remove_engine(copy, 1, 4, 100);
    assert_true(who(copy, a) == 0);
    assert_true(who(copy, a2) == 1);
    /* a change of partition drops the worker's entries */
    assert_int_equal(kvreg_index_set_worker_partition(copy, 2, 0, a), KVREG_OK);
    assert_true(who(copy, b) == 0);
    assert_int_equal(kvreg_index_set_worker_partition(NULL, 2, 0, a), KVREG_EINVAL);
    kvreg_index_free(idx);
    kvreg_index_free(copy);
}

/* ENGINE mode: an engine hash in two partition groups of one worker is inconsistent: refused,
 * and the index stays empty. */
static void test_engine_repeated_across_groups(void **state)
{
    kvreg_index *idx = new_index(0), *copy = new_index(0);
    unsigned char *d = NULL;
    size_t n = 0;
    uint64_t v = 0;
    int k;
    (void)state;
    assert_int_equal(kvreg_index_set_worker_partition(idx, 1, 0, pid("m", NULL)), KVREG_OK);
    store_engine(idx, 1, 0, 100, NULL);
    store_engine(idx, 1, 1, 200, "l");
    assert_int_equal(kvreg_index_dump_alloc(idx, (void **)&d, &n), KVREG_OK);
    /* header 40, worker 40, then two groups of a 16-byte head and three 17-byte records */
    assert_int_equal(n, 40 + 40 + 2 * (16 + 3 * 17) + 8);
    assert_int_equal(kvreg_index_load(copy, d, n), KVREG_OK);
    assert_int_equal(kvreg_index_remove_worker(copy, 1, 0), KVREG_OK);
    {
        /* both groups' last engine hash set to the larger of the two: each group stays in
         * ascending order, and the hash is in both */
        unsigned char *last1 = d + 96 + 2 * 17, *last2 = d + 96 + 3 * 17 + 16 + 2 * 17;
        uint64_t x1 = 0, x2 = 0;
        for (k = 7; k >= 0; k--) {
            x1 = x1 << 8 | last1[k];
            x2 = x2 << 8 | last2[k];
        }
        if (x1 > x2)
            memcpy(last2, last1, 8);
        else
            memcpy(last1, last2, 8);
    }
    v = XXH3_64bits(d, n - 8);
    for (k = 0; k < 8; k++)
        d[n - 8 + k] = (unsigned char)(v >> (8 * k));
    assert_int_equal(kvreg_index_load(copy, d, n), KVREG_EPROTO);
    assert_int_equal(kvreg_index_workers(copy, NULL, 0, sizeof(kvreg_index_worker_info), &n), KVREG_OK);
    assert_int_equal(n, 0);
    assert_int_equal(kvreg_index_stat(copy, KVREG_INDEX_STAT_ENTRIES, &v), KVREG_OK);
    assert_int_equal(v, 0);
    assert_int_equal(kvreg_index_stat(copy, KVREG_INDEX_STAT_MAPPED_HASHES, &v), KVREG_OK);
    assert_int_equal(v, 0);
    free(d);
    kvreg_index_free(idx);
    kvreg_index_free(copy);
}

/* OWN mode: the worker's partition keys all its events; removal in one leaves the other. */
static void test_own_partitions(void **state)
{
    kvreg_index *idx = new_index(1), *copy = new_index(1);
    const uint64_t a = pid("model-a", NULL), b = pid("model-b", NULL);
    kvreg_wire_event e;
    kvreg_index_worker_info w[2];
    void *d = NULL;
    size_t n = 0;
    (void)state;
    memset(&e, 0, sizeof e);
    e.type = KVREG_WIRE_STORED;
    e.medium = KVREG_MEDIUM_GPU;
    e.block_hashes = router;
    e.n_block_hashes = NB;
    assert_int_equal(kvreg_index_set_worker_partition(idx, 1, 0, a), KVREG_OK);
    assert_int_equal(kvreg_index_set_worker_partition(idx, 2, 0, b), KVREG_OK);
    assert_int_equal(kvreg_index_apply(idx, 1, 0, 0, &e, 1, NULL), KVREG_OK);
    assert_int_equal(kvreg_index_apply(idx, 2, 0, 0, &e, 1, NULL), KVREG_OK);
    assert_true(who(idx, a) == 1);
    assert_true(who(idx, b) == 2);
    assert_true(who(idx, 0) == 0);
    assert_int_equal(kvreg_index_workers(idx, w, 2, sizeof w[0], &n), KVREG_OK);
    assert_true(w[0].partition == a && w[1].partition == b);
    assert_int_equal(kvreg_index_dump_alloc(idx, &d, &n), KVREG_OK);
    assert_int_equal(kvreg_index_load(copy, d, n), KVREG_OK);
    free(d);
    e.type = KVREG_WIRE_REMOVED;
    assert_int_equal(kvreg_index_apply(copy, 1, 0, 1, &e, 1, NULL), KVREG_OK);
    assert_true(who(copy, a) == 0);
    assert_true(who(copy, b) == 2);
    kvreg_index_free(idx);
    kvreg_index_free(copy);
}

static uint64_t memory(const kvreg_index *idx)
{
    uint64_t v = 0;
    assert_int_equal(kvreg_index_stat(idx, KVREG_INDEX_STAT_MEMORY_BYTES, &v), KVREG_OK);
    return v;
}

/* A worker's LoRA partitions are counted in KVREG_INDEX_STAT_MEMORY_BYTES: 1,000 prompts
 * stored each under its own adapter hold more than the same prompts under one adapter, whose
 * table and mapping have as many entries (the adapters were not counted); and a partition's place goes once its last entry does: 5,000 rounds of storing and
 * removing the prompt, each under a new adapter, hold no more after the last round than after
 * the 3,000th (each adapter was kept: memory, and a scan of them all per stored event). Not
 * compared with the first rounds: the new adapters' keys land in every shard of the table,
 * each of which makes its first table on its first entry (68 KB over the first ~1,000). */
static void test_lora_places_counted_and_freed(void **state)
{
    kvreg_index *many = new_index(0), *one = new_index(0), *churn = new_index(0);
    char name[32];
    uint64_t seq, after_first = 0;
    (void)state;
    for (seq = 0; seq < 1000; seq++) {
        snprintf(name, sizeof name, "adapter-%llu", (unsigned long long)seq);
        store_prompt(many, 1, seq, seq, 1000 + NB * seq, name);
        store_prompt(one, 1, seq, seq, 1000 + NB * seq, "adapter");
    }
    /* as many table and mapping entries in both (the shards' tables may differ by a few KB):
     * at least 24 bytes an adapter more */
    assert_true(memory(many) >= memory(one) + 1000 * 24);
    for (seq = 0; seq < 10000; seq += 2) {
        snprintf(name, sizeof name, "churn-%llu", (unsigned long long)seq);
        store_engine(churn, 1, seq, 5000, name);
        remove_engine(churn, 1, seq + 1, 5000);
        if (seq == 6000)
            after_first = memory(churn);
    }
    assert_int_equal(memory(churn), after_first);
    /* still right: the prompt under one more adapter matches there, and only there */
    store_engine(churn, 1, 10000, 5000, "last");
    assert_true(who(churn, pid(NULL, "last")) == 1);
    assert_true(who(churn, pid(NULL, "churn-0")) == 0);
    kvreg_index_free(many);
    kvreg_index_free(one);
    kvreg_index_free(churn);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_partition_id_rule),
        cmocka_unit_test(test_engine_no_cross_match),
        cmocka_unit_test(test_engine_repeated_across_groups),
        cmocka_unit_test(test_own_partitions),
        cmocka_unit_test(test_lora_places_counted_and_freed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
